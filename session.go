package tendril

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tendril-p2p/tendril/cipher/aead"
	"github.com/tendril-p2p/tendril/mux"
	"github.com/tendril-p2p/tendril/protocol"
	"github.com/tendril-p2p/tendril/secio"
)

// Session is an established connection with one peer: a secure channel, a stream
// multiplexer, and the protocol streams open on it.
type Session struct {
	svc    *Service
	id     uint64
	peer   secio.PeerID
	pub    *secio.PublicKey
	dir    Direction
	local  Addr
	remote Addr
	secure bool
	suite  aead.Suite
	conn   *secio.Conn
	rconn  *readErrConn // what the mux reads through: remembers why reading failed
	mux    *mux.Session
	opened time.Time

	// ctx is cancelled when the session is torn down; stream goroutines watch it.
	ctx    context.Context
	cancel context.CancelFunc

	mu       sync.Mutex
	streams  map[string]*protoStream   // established message-mode streams, by protocol name
	raw      map[*protoStream]struct{} // raw-mode streams served by a StreamHandler
	opening  map[string]chan struct{}  // outbound negotiations in progress, closed when done
	closing  bool                      // graceful shutdown started: no new streams
	torn     bool                      // teardown started: no new goroutines
	pinging  bool                      // a keepalive ping is in flight
	used     bool                      // a protocol stream was registered once (admission: not idle)
	closeErr error
	settled  chan struct{} // closed when closing and no stream is left to wait for (checkSettledLocked)
	queued   int           // bytes queued for sending, all streams
	waiters  int           // SendContext calls waiting for space
	space    chan struct{} // closed (and replaced) when queue space is freed and someone waits

	wg    sync.WaitGroup // stream goroutines
	calls atomic.Int32   // message handler calls in progress (Connected, Received, Disconnected)
	done  chan struct{}
	ready chan struct{} // closed when the OpenOnConnect protocols are open (or failed): start

	adm admitted // what admission counted for the session (admission.go)

	counts sessionCounters // for Stats (stats.go); bytes are counted by rconn
}

func newSession(s *Service, sc *secio.Conn, ms *mux.Session, dir Direction, local, remote Addr) *Session {
	sess := &Session{
		svc:     s,
		peer:    sc.RemotePeer(),
		pub:     sc.RemotePublicKey(),
		dir:     dir,
		local:   local,
		remote:  remote,
		secure:  sc.Secure(),
		suite:   sc.Suite(),
		conn:    sc,
		mux:     ms,
		opened:  time.Now(),
		streams: make(map[string]*protoStream),
		raw:     make(map[*protoStream]struct{}),
		opening: make(map[string]chan struct{}),
		settled: make(chan struct{}),
		space:   make(chan struct{}),
		done:    make(chan struct{}),
		ready:   make(chan struct{}),
	}
	sess.remote.Peer = sess.peer
	sess.local.Peer = sc.LocalPeer()
	sess.ctx, sess.cancel = context.WithCancel(context.Background())
	return sess
}

// abortUnstarted closes a session that was never registered (a duplicate, or the Service
// closing). It emits nothing: no one was told it existed.
func (s *Session) abortUnstarted() {
	s.cancel()
	s.mux.Close()
	close(s.done)
}

// start runs the session; the Service's WaitGroup has been incremented for it.
func (s *Session) start() {
	svc := s.svc
	if svc.logs(slog.LevelInfo) {
		svc.log.Info("session opened", "peer", s.peer, "addr", s.remote,
			"dir", s.dir.String(), "suite", suiteName(s), "secure", s.secure)
	}
	svc.emit(s.event(EventSessionOpened, nil))
	s.mux.Serve(s.acceptStream, s.muxClosed)
	// ready closes when every OpenOnConnect protocol has been opened (or has failed) and
	// this side's Connected has returned: Dial waits for it, so that a Send right after Dial
	// finds the protocol open on both ends.
	var opening sync.WaitGroup
	defer func() {
		go func() { opening.Wait(); close(s.ready) }()
	}()
	if s.dir == Outbound {
		for _, p := range svc.openOnConnect() {
			if !s.allows(p) {
				continue
			}
			s.mu.Lock()
			if s.torn {
				s.mu.Unlock()
				break
			}
			s.wg.Add(1)
			s.mu.Unlock()
			opening.Add(1)
			go func() {
				defer s.wg.Done()
				defer opening.Done()
				ctx, cancel := context.WithCancel(s.ctx)
				defer cancel()
				if err := s.OpenProtocol(ctx, p.Name); err != nil {
					svc.log.Debug("open on connect failed", "peer", s.peer, "protocol", p.Name, "err", err)
					return
				}
				if ps := s.stream(p.Name); ps != nil {
					select {
					case <-ps.connected:
					case <-s.ctx.Done():
					}
				}
			}()
		}
	}
}

// waitReady waits until the OpenOnConnect protocols that this side opens are open on both
// ends and their Connected handlers here have returned, or have failed to open.
func (s *Session) waitReady(ctx context.Context) error {
	select {
	case <-s.ready:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("tendril: waiting for OpenOnConnect protocols: %w", context.Cause(ctx))
	}
}

func suiteName(s *Session) string {
	if !s.secure {
		return "TEA (insecure legacy)"
	}
	return s.suite.String()
}

func (s *Session) event(t EventType, err error) Event {
	return Event{Type: t, SessionID: s.id, Peer: s.peer, Addr: s.remote, Direction: s.dir, Secure: s.secure, Err: err}
}

// ping checks that the peer answers within timeout, without waiting for it: a session that
// does not answer is closed.
func (s *Session) ping(timeout time.Duration) {
	s.mu.Lock()
	if s.torn || s.pinging {
		s.mu.Unlock()
		return
	}
	s.pinging = true
	s.wg.Add(1)
	s.mu.Unlock()
	go func() {
		defer s.wg.Done()
		ctx, cancel := context.WithTimeout(s.ctx, timeout)
		_, err := s.mux.Ping(ctx)
		cancel()
		s.mu.Lock()
		s.pinging = false
		s.mu.Unlock()
		// A ping that fails because the session is already closing is not a keepalive
		// failure: run records the real cause (an authentication failure, a reset, ...).
		if err != nil && s.ctx.Err() == nil && !errors.Is(err, mux.ErrSessionClosed) {
			s.closeWith(fmt.Errorf("%w: keepalive: peer did not answer within %v: %w", ErrSessionClosed, timeout, err))
		}
	}()
}

func (s *Session) setErr(err error) {
	s.mu.Lock()
	if s.closeErr == nil {
		s.closeErr = err
	}
	s.mu.Unlock()
}

// closeWith closes the session at once, recording why.
func (s *Session) closeWith(err error) {
	s.setErr(err)
	s.end()
}

// end cancels the session's context and closes its connection without waiting; the mux then
// reports the close to muxClosed, which tears the session down.
func (s *Session) end() {
	s.cancel()
	s.mux.Abort()
}

func (s *Session) teardown() {
	s.mu.Lock()
	s.torn = true
	streams := s.streamsLocked()
	s.mu.Unlock()
	s.cancel()
	s.mux.Close()
	// Every handler's Context ends with its session, whatever ended it: a handler waiting on
	// ctx.Done() (as a raw StreamHandler does) returns now. A message stream is not reset:
	// the mux keeps what it received readable after it closed, so the handler still gets
	// the messages the peer sent before it closed the session (a peer that closes from its
	// own handler does not wait for this side to read them first), then the stream ends.
	for _, ps := range streams {
		if ps.proto.StreamHandler != nil {
			ps.abort()
		} else {
			ps.stop()
		}
	}
	s.waitHandlers()
	s.svc.unregister(s)
	s.mu.Lock()
	err := s.closeErr
	s.queued = 0
	s.mu.Unlock()
	if s.svc.logs(slog.LevelInfo) {
		s.svc.log.Info("session closed", "peer", s.peer, "err", err)
	}
	s.svc.emit(s.event(EventSessionClosed, err))
	close(s.done)
}

// shutdown closes every stream gracefully, waits for them until ctx is done, then closes
// the connection. It returns once the session has ended and its handlers have returned,
// except when a message handler is in the middle of a call then: that handler may be the
// one calling (Session.Close from OnReceived, say), and it can only return once this does,
// so shutdown returns when the connection is closed and Done waits for the handler.
func (s *Session) shutdown(ctx context.Context) {
	s.mu.Lock()
	if !s.closing {
		s.closing = true
		s.checkSettledLocked()
	}
	streams := s.streamsLocked()
	s.mu.Unlock()
	for _, ps := range streams {
		ps.closeLocal()
	}
	select {
	case <-s.settled:
		if !s.svc.cfg.ResetOnClose {
			// Every stream ended in order: close the secio connection itself, which sends its
			// close record, so that the peer reads a clean end rather than a truncation
			// (s.end's mux.Abort drops what is unsent, the close record included).
			s.cancel()
			_ = s.conn.Close()
		}
	case <-ctx.Done():
	case <-s.done:
	}
	s.end()
	if s.calls.Load() > 0 {
		<-s.mux.CloseChan()
		return
	}
	<-s.done
}

// streamsLocked returns the session's protocol streams, message and raw. s.mu is held.
func (s *Session) streamsLocked() []*protoStream {
	streams := make([]*protoStream, 0, len(s.streams)+len(s.raw))
	for _, ps := range s.streams {
		streams = append(streams, ps)
	}
	for ps := range s.raw {
		streams = append(streams, ps)
	}
	return streams
}

// waitHandlers waits for the session's goroutines (handlers among them), at most
// Config.HandlerExitTimeout once their contexts have ended: a handler that ignores its
// Context must not keep a dead session registered. One that is still running then is
// logged and abandoned; it keeps only what it holds itself.
func (s *Session) waitHandlers() {
	returned := make(chan struct{})
	go func() {
		s.wg.Wait()
		close(returned)
	}()
	t := time.NewTimer(s.svc.cfg.HandlerExitTimeout)
	defer t.Stop()
	select {
	case <-returned:
	case <-t.C:
		s.svc.log.Warn("handlers still running after their session ended: abandoned",
			"peer", s.peer, "session", s.id, "waited", s.svc.cfg.HandlerExitTimeout)
	}
}

// checkSettledLocked closes settled once a graceful close has nothing left to wait for: no
// protocol is opening, no raw stream is left, and every message stream has ended, or has
// sent all it had queued and its end-of-stream while its handler is in the middle of a call
// (it may be the handler that is closing the session: it cannot read the peer's answer
// before it returns). s.mu is held; it runs whenever one of these changes.
func (s *Session) checkSettledLocked() {
	if !s.closing || len(s.opening) > 0 || len(s.raw) > 0 {
		return
	}
	for _, ps := range s.streams {
		if !ps.wclosed || !ps.inCall.Load() {
			return
		}
	}
	select {
	case <-s.settled:
	default:
		close(s.settled)
	}
}

// ID returns the session's number, unique within its Service.
func (s *Session) ID() uint64 { return s.id }

// Peer returns the remote peer's authenticated ID (zero for a legacy TEA session).
func (s *Session) Peer() secio.PeerID { return s.peer }

// PublicKey returns the remote peer's identity key (nil for a legacy TEA session).
func (s *Session) PublicKey() *secio.PublicKey { return s.pub }

// RemoteAddr returns the remote address, with the peer ID.
func (s *Session) RemoteAddr() Addr { return s.remote }

// LocalAddr returns the local address of the connection, with this node's peer ID.
func (s *Session) LocalAddr() Addr { return s.local }

// Direction says who dialled.
func (s *Session) Direction() Direction { return s.dir }

// Secure reports whether the session is authenticated and encrypted with an AEAD; it is
// false only for legacy TEA sessions.
func (s *Session) Secure() bool { return s.secure }

// Suite returns the negotiated AEAD suite (zero for legacy TEA sessions).
func (s *Session) Suite() aead.Suite { return s.suite }

// OpenedAt returns when the session was established.
func (s *Session) OpenedAt() time.Time { return s.opened }

// Done is closed once the session has ended and its handlers have returned.
func (s *Session) Done() <-chan struct{} { return s.done }

// MemoryUsed returns the bytes this session's receive windows reserve, out of
// Config.MaxSessionMemory: the most the peer can make this node buffer for it now.
func (s *Session) MemoryUsed() int64 { return s.mux.MemoryUsed() }

// RTT returns the round-trip time measured on the session (by keepalive pings and the
// first bulk transfer), or 0 before the first measurement.
func (s *Session) RTT() time.Duration { return s.mux.RTT() }

// Err returns why the session ended: nil while it is open or if it was closed locally;
// ErrPeerClosed if the peer closed it on purpose; an error wrapping ErrSessionClosed and the
// cause if the connection was lost.
func (s *Session) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closeErr
}

// QueuedBytes returns the bytes queued for sending on the session.
func (s *Session) QueuedBytes() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.queued
}

// ProtocolInfo describes a protocol open on a session.
type ProtocolInfo struct {
	Name     string
	Version  string
	Outbound bool // this node opened the stream
}

// Protocols returns the protocols open on the session, sorted by name.
func (s *Session) Protocols() []ProtocolInfo {
	s.mu.Lock()
	out := make([]ProtocolInfo, 0, len(s.streams))
	for _, ps := range s.streams {
		out = append(out, ProtocolInfo{Name: ps.proto.Name, Version: ps.version, Outbound: ps.outbound})
	}
	s.mu.Unlock()
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Close closes the session gracefully: queued messages are sent and every stream is closed,
// within Config.ShutdownTimeout; then the connection is closed. It waits for the handlers,
// unless a message handler is in the middle of a call (Connected, Received, Disconnected)
// by then: Close may be called from that very handler, to drop a misbehaving peer, so it
// does not wait for its stream's end-of-stream answer, and returns once the connection is
// closed; Done waits for every handler. What that handler queued before calling Close is
// still sent. A raw StreamHandler that closes its own session should return instead of
// waiting: Close waits for its stream to end, up to ShutdownTimeout.
func (s *Session) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), s.svc.cfg.ShutdownTimeout)
	defer cancel()
	s.shutdown(ctx)
	return nil
}

// Send queues msg on the named protocol without blocking; ErrSessionBlocked if the session's
// send queue is full. msg may be reused once Send returns.
func (s *Session) Send(name string, msg []byte) error {
	ps := s.stream(name)
	if ps == nil {
		return s.notOpen(name)
	}
	return ps.send(context.Background(), msg, false)
}

// SendContext queues msg on the named protocol, waiting under ctx while the queue is full.
func (s *Session) SendContext(ctx context.Context, name string, msg []byte) error {
	ps := s.stream(name)
	if ps == nil {
		return s.notOpen(name)
	}
	return ps.send(ctx, msg, true)
}

func (s *Session) notOpen(name string) error {
	if s.svc.protocol(name) == nil {
		return fmt.Errorf("%w: %q", ErrUnknownProtocol, name)
	}
	select {
	case <-s.ctx.Done():
		return ErrSessionClosed
	default:
	}
	return fmt.Errorf("%w: %q", ErrProtocolNotOpen, name)
}

func (s *Session) stream(name string) *protoStream {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.streams[name]
}

// OpenProtocol opens the named protocol on this session and negotiates its version.
//
// For a message-mode protocol (Protocol.Handler) a session has at most one stream per
// protocol: OpenProtocol returns nil once it is negotiated and this side's handler is
// starting (Connected comes before any message), or at once if it is already open. Messages
// sent from here right away reach the peer's handler after its Connected; the peer registers
// its end before it answers, so once this returns a Send on the peer finds the protocol
// open. For a raw-mode protocol
// (Protocol.StreamHandler) every call opens a new stream and runs the local StreamHandler
// on it, as the remote one runs on the other end.
//
// Negotiation failures are returned (they wrap protocol.ErrUnknownProtocol,
// protocol.ErrNoCommonVersion, ...) and reported as events.
func (s *Session) OpenProtocol(ctx context.Context, name string) error {
	p := s.svc.protocol(name)
	if p == nil {
		return fmt.Errorf("%w: %q", ErrUnknownProtocol, name)
	}
	if !s.allows(p) {
		return fmt.Errorf("%w: %q", ErrInsecureSession, name)
	}
	if p.StreamHandler != nil {
		st, version, err := s.openStream(ctx, p)
		if err != nil {
			return err
		}
		if _, run := s.startStream(p, version, st, true); run != nil {
			go run()
		} else {
			st.Reset()
			return s.refused(p)
		}
		return nil
	}
	for {
		s.mu.Lock()
		if s.closing || s.torn {
			s.mu.Unlock()
			return ErrSessionClosed
		}
		if s.streams[name] != nil {
			s.mu.Unlock()
			return nil
		}
		wait, busy := s.opening[name]
		if !busy {
			break // with s.mu held
		}
		s.mu.Unlock()
		select {
		case <-wait:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	ch := make(chan struct{})
	s.opening[name] = ch
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.opening, name)
		s.checkSettledLocked()
		s.mu.Unlock()
		close(ch)
	}()
	st, version, err := s.openStream(ctx, p)
	if err != nil {
		return err
	}
	if _, run := s.startStream(p, version, st, true); run != nil {
		go run()
	} else {
		st.Reset()
		return s.refused(p)
	}
	return nil
}

// refused is why OpenProtocol's stream of p was not registered: nil if one of p is open
// (both sides opened it at once, and the other stream won), else why not.
func (s *Session) refused(p *Protocol) error {
	if !s.svc.registered(p) {
		return fmt.Errorf("%w: %q removed", ErrUnknownProtocol, p.Name)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closing || s.torn {
		return ErrSessionClosed
	}
	return nil
}

// OpenStream opens a new stream of the named raw-mode protocol and returns it to the caller
// with the negotiated version, without running the local StreamHandler: the caller owns the
// stream and must close it. The remote's StreamHandler serves the other end.
func (s *Session) OpenStream(ctx context.Context, name string) (net.Conn, string, error) {
	p := s.svc.protocol(name)
	if p == nil {
		return nil, "", fmt.Errorf("%w: %q", ErrUnknownProtocol, name)
	}
	if p.StreamHandler == nil {
		return nil, "", fmt.Errorf("tendril: %q is a message-mode protocol: use OpenProtocol and Send", name)
	}
	if !s.allows(p) {
		return nil, "", fmt.Errorf("%w: %q", ErrInsecureSession, name)
	}
	s.mu.Lock()
	closing := s.closing || s.torn
	s.mu.Unlock()
	if closing {
		return nil, "", ErrSessionClosed
	}
	if len(p.Versions) == 1 {
		return s.openStreamLazy(ctx, p)
	}
	st, version, err := s.openStream(ctx, p)
	if err != nil {
		return nil, "", err
	}
	return st, version, nil
}

// openStreamLazy opens a mux stream for a protocol with one version and negotiates it
// lazily: the request goes with the first data, and a refusal is the first Read's error.
func (s *Session) openStreamLazy(ctx context.Context, p *Protocol) (net.Conn, string, error) {
	st, err := s.openMuxStream(ctx, p)
	if err != nil {
		return nil, "", err
	}
	lc, err := protocol.NegotiateLazy(st, p.Name, p.Versions[0], s.svc.cfg.NegotiationTimeout)
	if err != nil {
		st.Reset()
		return nil, "", fmt.Errorf("tendril: negotiate %s: %w", p.Name, err)
	}
	return lc, p.Versions[0], nil
}

// openStream opens a mux stream and negotiates p on it, within NegotiationTimeout. The
// session's end needs no watcher here: closing the mux fails the stream's I/O.
func (s *Session) openStream(ctx context.Context, p *Protocol) (*mux.Stream, string, error) {
	ctx, cancel := context.WithTimeout(ctx, s.svc.cfg.NegotiationTimeout)
	defer cancel()
	st, err := s.openMuxStream(ctx, p)
	if err != nil {
		return nil, "", err
	}
	version, err := protocol.Negotiate(ctx, st, p.Name, p.Versions)
	if err != nil {
		st.Reset()
		err = fmt.Errorf("tendril: negotiate %s: %w", p.Name, err)
		s.svc.emitRepeat(s.protoEvent(EventNegotiationFailed, p.Name, "", err), netip.Addr{})
		return nil, "", err
	}
	return st, version, nil
}

// openMuxStream opens a mux stream for p, reporting a stream limit as an event.
func (s *Session) openMuxStream(ctx context.Context, p *Protocol) (*mux.Stream, error) {
	st, err := s.mux.OpenStream(ctx)
	if err != nil {
		if errors.Is(err, mux.ErrTooManyStreams) || errors.Is(err, mux.ErrMemoryBudget) {
			s.svc.emitRepeat(s.protoEvent(EventLimitReached, p.Name, "", err), netip.Addr{})
		}
		return nil, fmt.Errorf("tendril: open %s: %w", p.Name, err)
	}
	return st, nil
}

// allows reports whether p may run on this session: on a legacy TEA session (neither
// authenticated nor integrity-protected) only protocols that opt in with AllowLegacyTEA.
func (s *Session) allows(p *Protocol) bool { return s.secure || p.AllowLegacyTEA }

// refusedInsecure is what the acceptor answers when a legacy TEA peer asks for a protocol
// that did not opt in: a typed refusal the peer can read.
var refusedInsecure = &protocol.RefusedError{Code: protocol.CodeRefused, Reason: "not available on an insecure session"}

// refusedRemoved is the answer for a protocol removed (RemoveProtocol) during its negotiation.
var refusedRemoved = &protocol.RefusedError{Code: protocol.CodeUnknownProtocol, Reason: "protocol removed"}

func (s *Session) protoEvent(t EventType, name, version string, err error) Event {
	e := s.event(t, err)
	e.Protocol, e.Version = name, version
	return e
}

// acceptStream serves a stream the peer opened, on the goroutine the mux started for it: an
// idle session has no goroutine of its own.
func (s *Session) acceptStream(st *mux.Stream) {
	s.mu.Lock()
	if s.closing || s.torn {
		s.mu.Unlock()
		st.Reset()
		return
	}
	s.wg.Add(1)
	s.mu.Unlock()
	// The stream is served on a fresh goroutine: negotiation grows a stack that would
	// never shrink back while the handler, which may wait for hours, holds it (8 KB instead
	// of 12 KB per idle stream in bench/).
	if run := s.acceptProtocol(st); run != nil {
		go run()
	}
}

// connectionLost is why a session closed when its connection failed. It wraps
// ErrSessionClosed and the cause; its message is only built when asked for, since a
// node that churns through connections would otherwise format (and discard) the cause
// of every one.
type connectionLost struct{ cause error }

func (e *connectionLost) Error() string {
	return ErrSessionClosed.Error() + ": connection lost: " + e.cause.Error()
}

func (e *connectionLost) Unwrap() []error { return []error{ErrSessionClosed, e.cause} }

// peerClosed is why a session ended when the peer closed it on purpose: it says so, and
// wraps ErrPeerClosed and the cause (io.EOF from secio, wrapped by the mux).
type peerClosed struct{ cause error }

func (e *peerClosed) Error() string { return ErrPeerClosed.Error() }

func (e *peerClosed) Unwrap() []error { return []error{ErrPeerClosed, e.cause} }

// legacyKeyMismatch is why a legacy TEA session ended when the peer's frames did not
// decrypt to yamux frames before any protocol opened: most likely the two sides do not
// share the key. It wraps ErrSessionClosed, ErrLegacyKeyMismatch and the mux's error.
type legacyKeyMismatch struct{ cause error }

func (e *legacyKeyMismatch) Error() string {
	return ErrSessionClosed.Error() + ": " + strings.TrimPrefix(ErrLegacyKeyMismatch.Error(), "tendril: ") + ": " + e.cause.Error()
}

func (e *legacyKeyMismatch) Unwrap() []error {
	return []error{ErrSessionClosed, ErrLegacyKeyMismatch, e.cause}
}

// usedOnce reports whether a protocol stream was ever registered on the session.
func (s *Session) usedOnce() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.used
}

// muxClosed runs once the mux has closed, for whatever reason, and tears the session down;
// the Service's WaitGroup counts the session until then.
func (s *Session) muxClosed(err error) {
	defer s.svc.wg.Done()
	if s.ctx.Err() == nil {
		// The mux keeps the first error of its reader or writer; a write can fail (the
		// secure conn closed itself) before the reader reports the bad frame that caused
		// it. The read error is the cause.
		if cause := s.rconn.cause(time.Second); cause != nil && !errors.Is(cause, net.ErrClosed) && !errors.Is(err, cause) {
			err = cause
		}
		switch {
		case s.secure && errors.Is(err, io.EOF):
			// secio returns io.EOF only after the peer's authenticated close record (an
			// unannounced end is ErrTruncated): the peer left on purpose.
			s.setErr(&peerClosed{err})
		case !s.secure && errors.Is(err, mux.ErrProtocol) && !s.usedOnce():
			// TEA has no integrity check: with the wrong key a frame decrypts to garbage,
			// which the mux reports as a protocol error before any protocol could open.
			s.setErr(&legacyKeyMismatch{err})
		default:
			s.setErr(&connectionLost{err})
		}
	}
	s.teardown()
}

// acceptProtocol negotiates a stream the peer opened and registers it; it returns what
// serves the stream, or nil.
func (s *Session) acceptProtocol(st *mux.Stream) (run func()) {
	defer s.wg.Done()
	// The acceptor waits half as long again as the opener: when a request stalls, the opener
	// (whose timer started first) must be the one to time out and report it, rather than see
	// the acceptor give up and close the stream a moment earlier. Not derived from s.ctx:
	// closing the mux fails the stream's I/O, and a child would cost each session a map.
	ctx, cancel := context.WithTimeout(context.Background(), s.svc.cfg.NegotiationTimeout*3/2)
	var (
		ps       *protoStream
		accepted bool // registered; false: refused by the dual-open rule, reset after answering
	)
	// The stream is registered before the answer leaves (with its writer held back until
	// the answer is sent), so that once the opener's OpenProtocol returns, a Send on this
	// end finds the protocol open.
	info, _, err := protocol.AcceptCommit(ctx, st, s.svc.registry, func(info protocol.Info, version string) error {
		p := s.svc.protocol(info.Name)
		if p == nil {
			return refusedRemoved // removed since the registry found it
		}
		if !s.allows(p) {
			return refusedInsecure
		}
		ps, run = s.startStream(p, version, st, false)
		accepted = run != nil
		return nil
	})
	cancel()
	if err != nil {
		if accepted {
			ps.discard(err) // registered, but the answer did not get out
		}
		st.Close() // not Reset: the refusal must reach the opener
		s.svc.emitRepeat(s.protoEvent(EventNegotiationFailed, info.Name, "", fmt.Errorf("tendril: accept protocol: %w", err)), netip.Addr{})
		return nil
	}
	if !accepted {
		st.Reset()
		return nil
	}
	ps.answered()
	return run
}

// startStream registers a negotiated stream and returns it with what serves it, which the
// caller runs on a new goroutine; a nil run means the stream was refused, and the caller
// resets it. A stream the peer opened (!outbound) is registered before the answer is sent:
// its writer waits for answered. A message-mode protocol has at most one stream per
// session; when both sides opened it at once, both keep the stream opened by the session's
// dialling side and close the other.
func (s *Session) startStream(p *Protocol, version string, st *mux.Stream, outbound bool) (ps *protoStream, run func()) {
	ps = &protoStream{
		sess:      s,
		proto:     p,
		version:   version,
		st:        st,
		outbound:  outbound,
		held:      !outbound,
		closing:   make(chan struct{}),
		wdone:     make(chan struct{}),
		connected: make(chan struct{}),
	}
	ps.ctx = &Context{ps: ps}
	if p.StreamHandler != nil {
		return ps, s.startRaw(ps)
	}
	fromDialer := outbound == (s.dir == Outbound)
	s.mu.Lock()
	if s.torn || s.closing || !s.svc.registered(p) {
		s.mu.Unlock()
		return ps, nil
	}
	var replaced *protoStream
	if old := s.streams[p.Name]; old != nil {
		oldFromDialer := old.outbound == (s.dir == Outbound)
		if !fromDialer || oldFromDialer {
			s.mu.Unlock()
			return ps, nil
		}
		replaced = old
	} else if _, pending := s.opening[p.Name]; pending && !outbound && s.dir == Outbound {
		// Our own open, from the dialling side, will win: refuse the peer's.
		s.mu.Unlock()
		return ps, nil
	}
	s.streams[p.Name] = ps
	s.used = true
	s.wg.Add(1)
	s.mu.Unlock()
	s.countStream(outbound)
	if replaced != nil {
		replaced.abort()
	}
	s.svc.emit(s.protoEvent(EventProtocolOpened, p.Name, version, nil))
	return ps, ps.readLoop
}

// countStream counts a protocol stream registered, by who opened it.
func (s *Session) countStream(outbound bool) {
	if outbound {
		s.counts.streamsOpened.Add(1)
	} else {
		s.counts.streamsAccepted.Add(1)
	}
}

// startRaw registers a raw-mode stream and returns what runs its StreamHandler and closes
// the stream when the handler returns or the stream is asked to close.
func (s *Session) startRaw(ps *protoStream) (run func()) {
	s.mu.Lock()
	if s.torn || s.closing || !s.svc.registered(ps.proto) {
		s.mu.Unlock()
		return nil
	}
	s.raw[ps] = struct{}{}
	s.used = true
	s.wg.Add(1)
	ps.wclosed = true
	s.mu.Unlock()
	s.countStream(ps.outbound)
	close(ps.wdone)
	s.svc.emit(s.protoEvent(EventProtocolOpened, ps.proto.Name, ps.version, nil))
	// A handler stuck in I/O returns when the session goes: closing the mux fails every
	// stream's reads and writes.
	return func() {
		defer s.wg.Done()
		err := callHandler(ps.proto.Name, func() { ps.proto.StreamHandler.ServeStream(ps.ctx, ps.version, ps.st) })
		if err != nil {
			s.svc.log.Error("stream handler panicked", "protocol", ps.proto.Name, "err", err)
		}
		ps.closeLocal()
		lingerClose(ps.st, s.svc.cfg.ShutdownTimeout)
		ps.finish(err)
	}
}

// lingerClose ends a raw stream whose handler has returned: it sends end-of-stream after what
// the handler wrote, then reads and discards what the peer still sends (so that a peer
// blocked on flow control can finish and see the end) until the peer closes its side or
// linger runs out, and resets the stream if it has to give up.
func lingerClose(st *mux.Stream, linger time.Duration) {
	if err := st.CloseWrite(); err != nil {
		st.Reset()
		return
	}
	_ = st.SetReadDeadline(time.Now().Add(linger))
	if _, err := io.Copy(io.Discard, st); err != nil {
		st.Reset()
		return
	}
	st.Close()
}

// callHandler runs fn, turning a panic into an error so that one faulty handler cannot take
// the process down.
func callHandler(name string, fn func()) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("tendril: handler for %s panicked: %v", name, r)
		}
	}()
	fn()
	return nil
}

// protoStream is one negotiated protocol stream of a session.
type protoStream struct {
	sess     *Session
	proto    *Protocol
	version  string
	st       *mux.Stream
	outbound bool
	ctx      *Context

	inCall      atomic.Bool   // message mode: the handler is in a Connected, Received or Disconnected call
	closing     chan struct{} // closed when no more sends are taken (local close, remote EOF, abort)
	connected   chan struct{} // message mode: closed when the handler's Connected has returned
	closingOnce sync.Once
	wdone       chan struct{} // closed when writing has ended for good (after end-of-stream or abort)

	// guarded by sess.mu
	queue   [][]byte
	noMore  bool // no more messages are taken; once the queue is sent, end-of-stream follows
	aborted bool
	writing bool // a writer goroutine is running
	wclosed bool // wdone is closed
	held    bool // accepted but the negotiation answer is not sent yet: no writer may start
}

// answered lets the writer of a stream the peer opened start, now that the negotiation
// answer is sent: messages queued meanwhile follow it.
func (ps *protoStream) answered() {
	s := ps.sess
	s.mu.Lock()
	ps.held = false
	if len(ps.queue) > 0 || ps.noMore {
		ps.ensureWriterLocked()
	}
	s.mu.Unlock()
}

// discard undoes the registration of a stream whose negotiation answer could not be sent:
// its handler never runs.
func (ps *protoStream) discard(err error) {
	s := ps.sess
	s.mu.Lock()
	ps.held = false
	s.mu.Unlock()
	ps.abort()
	ps.finish(err)
	s.wg.Done()
}

// send queues a copy of msg. If wait is false it never waits; otherwise it waits under ctx
// while the session's queue is full.
func (ps *protoStream) send(ctx context.Context, msg []byte, wait bool) error {
	s := ps.sess
	if ps.proto.StreamHandler != nil {
		return fmt.Errorf("%w: %q is a raw stream protocol: write to its stream", ErrProtocolNotOpen, ps.proto.Name)
	}
	if len(msg) > s.svc.cfg.MaxMessageSize {
		return fmt.Errorf("%w: %d > %d bytes", ErrMessageTooLarge, len(msg), s.svc.cfg.MaxMessageSize)
	}
	cost := queueCost(msg)
	limit := s.svc.cfg.SendQueueBytes
	s.mu.Lock()
	for {
		if ps.noMore {
			s.mu.Unlock()
			return fmt.Errorf("%w: %q stream closed", ErrProtocolNotOpen, ps.proto.Name)
		}
		if s.queued+cost <= limit {
			break
		}
		if !wait {
			s.mu.Unlock()
			s.svc.emitRepeat(s.protoEvent(EventSessionBlocked, ps.proto.Name, ps.version, ErrSessionBlocked), netip.Addr{})
			return ErrSessionBlocked
		}
		s.waiters++
		space := s.space
		s.mu.Unlock()
		var err error
		select {
		case <-space:
		case <-ctx.Done():
			err = ctx.Err()
		case <-ps.closing:
		}
		s.mu.Lock()
		s.waiters--
		if err != nil {
			s.mu.Unlock()
			return err
		}
	}
	// Queue the message already framed: the writer sends it as it is, with no further copy.
	ps.queue = append(ps.queue, protocol.AppendFrame(make([]byte, 0, protocol.MessageHeaderSize+len(msg)), msg))
	s.queued += cost
	ps.ensureWriterLocked()
	s.mu.Unlock()
	return nil
}

// queueCost is what a message counts against the send queue: its bytes plus a fixed
// overhead, so that a flood of empty messages is bounded too.
func queueCost(msg []byte) int { return len(msg) + 64 }

// frameCost is queueCost of the message inside a queued frame.
func frameCost(frame []byte) int { return queueCost(frame[protocol.MessageHeaderSize:]) }

// ensureWriterLocked starts a writer if there is work for one (messages to send, or the
// end-of-stream to send or give up on) and none is running. Writers exit when the queue is
// empty, so an idle stream has no writer goroutine. s.mu is held.
func (ps *protoStream) ensureWriterLocked() {
	s := ps.sess
	if ps.writing || ps.wclosed {
		return
	}
	if s.torn {
		// The session is being torn down and waits for its goroutines: start none.
		ps.dropQueueLocked()
		ps.closeWdoneLocked()
		return
	}
	if ps.held {
		return // answered starts it
	}
	ps.writing = true
	s.wg.Add(1)
	go ps.writeLoop()
}

// releaseLocked gives queue space back and wakes waiting senders.
func (s *Session) releaseLocked(n int) {
	s.queued -= n
	if s.waiters > 0 {
		close(s.space)
		s.space = make(chan struct{})
	}
}

func (ps *protoStream) writeLoop() {
	s := ps.sess
	defer s.wg.Done()
	for {
		s.mu.Lock()
		switch {
		case ps.aborted:
			ps.dropQueueLocked()
			ps.writing = false
			ps.closeWdoneLocked()
			s.mu.Unlock()
			return
		case len(ps.queue) == 0 && ps.noMore:
			// The end-of-stream is queued before writing is reported over (wdone), so that a
			// close that waits for this goes out after it: the peer reads to EOF, then
			// closes its side.
			s.mu.Unlock()
			ps.st.CloseWrite()
			s.mu.Lock()
			ps.writing = false
			ps.closeWdoneLocked()
			s.mu.Unlock()
			return
		case len(ps.queue) == 0:
			ps.writing = false // idle: the next send starts a writer again
			s.mu.Unlock()
			return
		}
		frames := ps.queue
		ps.queue = nil
		s.mu.Unlock()
		for len(frames) > 0 {
			// Small messages queued together leave in one stream write (one mux frame, one
			// encrypted frame) of up to coalesceBytes; a large one leaves alone.
			n, size := 0, 0
			for n < len(frames) && (n == 0 || size+len(frames[n]) <= coalesceBytes) {
				size += len(frames[n])
				n++
			}
			// Counted before the write: the peer may answer before the write returns.
			s.counts.msgsSent.Add(uint64(n))
			err := writeFrames(ps.st, frames[:n])
			if err != nil {
				s.mu.Lock()
				ps.releaseLocked(frames)
				s.mu.Unlock()
				ps.fail(fmt.Errorf("tendril: write %s: %w", ps.proto.Name, err))
				s.mu.Lock()
				ps.dropQueueLocked()
				ps.writing = false
				ps.closeWdoneLocked()
				s.mu.Unlock()
				return
			}
			s.mu.Lock()
			ps.releaseLocked(frames[:n])
			s.mu.Unlock()
			frames = frames[n:]
		}
	}
}

// coalesceBytes bounds how many bytes of small queued messages are joined into one write.
const coalesceBytes = 64 << 10

var coalescePool = sync.Pool{New: func() any { b := make([]byte, 0, coalesceBytes); return &b }}

// writeFrames writes frames in one Write: directly if there is one, else joined in a pooled
// buffer (their total is at most coalesceBytes).
func writeFrames(w io.Writer, frames [][]byte) error {
	if len(frames) == 1 {
		_, err := w.Write(frames[0])
		return err
	}
	p := coalescePool.Get().(*[]byte)
	buf := (*p)[:0]
	for _, f := range frames {
		buf = append(buf, f...)
	}
	_, err := w.Write(buf)
	*p = buf[:0]
	coalescePool.Put(p)
	return err
}

func (ps *protoStream) closeWdoneLocked() {
	if !ps.wclosed {
		ps.wclosed = true
		close(ps.wdone)
		ps.sess.checkSettledLocked()
	}
}

// releaseLocked gives back the queue space of messages that will not be sent.
func (ps *protoStream) releaseLocked(msgs [][]byte) {
	n := 0
	for _, f := range msgs {
		n += frameCost(f)
	}
	if n > 0 {
		ps.sess.releaseLocked(n)
	}
}

// dropQueueLocked discards unsent messages (the stream failed) and gives their space back.
func (ps *protoStream) dropQueueLocked() {
	ps.releaseLocked(ps.queue)
	ps.queue = nil
	ps.noMore = true
}

func (ps *protoStream) readLoop() {
	s := ps.sess
	defer s.wg.Done()
	h := ps.proto.Handler
	var readErr error
	err := callHandler(ps.proto.Name, func() {
		func() {
			defer close(ps.connected) // also if Connected panics
			ps.call(func() { h.Connected(ps.ctx, ps.version) })
		}()
		r := protocol.NewReader(ps.st, s.svc.cfg.MaxMessageSize)
		for {
			msg, err := r.ReadMessageAlloc()
			if err != nil {
				if !errors.Is(err, io.EOF) {
					readErr = err
				}
				return
			}
			s.counts.msgsReceived.Add(1)
			ps.call(func() { h.Received(ps.ctx, msg) })
		}
	})
	if err == nil {
		err = readErr
	}
	if err != nil {
		ps.fail(err)
	} else {
		ps.closeLocal() // the peer closed its side: flush ours and close it
	}
	<-ps.wdone
	ps.finish(err)
	if perr := callHandler(ps.proto.Name, func() { ps.call(func() { h.Disconnected(ps.ctx) }) }); perr != nil {
		s.svc.log.Error("handler panicked", "protocol", ps.proto.Name, "err", perr)
	}
}

// call runs one call of the message handler, marked as in progress for shutdown (which
// does not wait for a handler in the middle of a call: it may be the caller).
func (ps *protoStream) call(fn func()) {
	s := ps.sess
	ps.inCall.Store(true)
	s.calls.Add(1)
	defer func() {
		ps.inCall.Store(false)
		s.calls.Add(-1)
	}()
	fn()
}

// closeLocal stops taking messages; the writer sends what is queued and half-closes.
func (ps *protoStream) closeLocal() {
	s := ps.sess
	s.mu.Lock()
	ps.noMore = true
	ps.ensureWriterLocked()
	s.mu.Unlock()
	ps.closingOnce.Do(func() { close(ps.closing) })
}

// fail ends the stream at once after an error: queued messages are dropped.
func (ps *protoStream) fail(err error) {
	s := ps.sess
	select {
	case <-s.ctx.Done():
	default:
		if err != nil {
			s.svc.log.Debug("protocol stream failed", "peer", s.peer, "protocol", ps.proto.Name, "err", err)
			s.svc.emitRepeat(s.protoEvent(EventProtocolError, ps.proto.Name, ps.version, err), netip.Addr{})
		}
	}
	ps.abort()
}

// abort closes the stream without flushing.
func (ps *protoStream) abort() {
	ps.stop()
	ps.st.Reset() // also unblocks a writer stuck on flow control
}

// stop ends the stream's writing without flushing and ends its Context, but leaves what
// was received readable: for a session whose mux has closed (which fails writes and, once
// the received data is read, reads).
func (ps *protoStream) stop() {
	s := ps.sess
	s.mu.Lock()
	ps.aborted = true
	ps.noMore = true
	ps.ensureWriterLocked()
	s.mu.Unlock()
	ps.closingOnce.Do(func() { close(ps.closing) })
}

// finish unregisters the stream and reports it closed.
func (ps *protoStream) finish(err error) {
	s := ps.sess
	s.mu.Lock()
	if s.streams[ps.proto.Name] == ps {
		delete(s.streams, ps.proto.Name)
	}
	delete(s.raw, ps)
	s.checkSettledLocked()
	s.mu.Unlock()
	s.svc.emit(s.protoEvent(EventProtocolClosed, ps.proto.Name, ps.version, err))
}

// readErrConn passes reads and writes to the secure connection, remembers the first read
// error and counts the bytes each way (Session.Stats).
type readErrConn struct {
	net.Conn
	read    atomic.Uint64
	written atomic.Uint64
	err     atomic.Pointer[error]
	once    sync.Once
	failed  chan struct{} // closed when err is set
}

func newReadErrConn(c net.Conn) *readErrConn {
	return &readErrConn{Conn: c, failed: make(chan struct{})}
}

func (c *readErrConn) Write(p []byte) (int, error) {
	n, err := c.Conn.Write(p)
	c.written.Add(uint64(n))
	return n, err
}

func (c *readErrConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.read.Add(uint64(n))
	// A deadline is how the mux wakes a Read that reads its frames itself: not a failure.
	if err != nil && !errors.Is(err, os.ErrDeadlineExceeded) {
		c.err.CompareAndSwap(nil, &err)
		c.once.Do(func() { close(c.failed) })
	}
	return n, err
}

// cause returns the first read error, waiting up to wait for the reader to report it: when
// the mux has closed, the connection is closed and a read in progress returns promptly.
func (c *readErrConn) cause(wait time.Duration) error {
	if c == nil {
		return nil
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-c.failed:
		return *c.err.Load()
	case <-t.C:
		return nil
	}
}
