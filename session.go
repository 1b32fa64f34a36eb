package tendril

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tendril-p2p/tendril/cipher/aead"
	"github.com/tendril-p2p/tendril/mux"
	"github.com/tendril-p2p/tendril/secio"
)

// Session is an established connection with one peer: a secure channel, a stream
// multiplexer, and the protocol streams open on it.
type Session struct {
	svc     *Service
	id      uint64
	peer    secio.PeerID
	pub     *secio.PublicKey
	local   Addr
	remote  Addr
	dir     Direction
	relayed bool // the connection is carried by a third party (transport.IsRelayed)
	secure  bool
	suite   aead.Suite
	conn    *secio.Conn
	rconn   *readErrConn // what the mux reads through: remembers why reading failed
	mux     *mux.Session
	opened  time.Time

	// ctx is cancelled as soon as this side ends the session (abort, a graceful close that
	// settled, teardown, abortUnstarted): the OpenOnConnect opens and the keepalive ping run
	// under it, and teardown reads "not cancelled" as "the connection was lost".
	ctx    context.Context
	cancel context.CancelFunc

	mu        sync.Mutex
	streams   map[string]*protoStream   // established message-mode streams, by protocol name
	raw       map[*protoStream]struct{} // raw-mode streams served by a StreamHandler
	opening   map[string]chan struct{}  // outbound negotiations in progress, closed when done
	state     sessionState              // where the session is in its life (lifecycle.go)
	pinging   bool                      // a keepalive ping is in flight
	used      bool                      // a protocol stream was registered once (admission: not idle)
	closeErr  error
	settled   chan struct{} // closed when closing and no stream is left to wait for (checkSettledLocked)
	sendSpace queueSpace    // the send queue's bytes, all streams (sendqueue.go)

	wg       goroutineGroup // stream goroutines
	calls    atomic.Int32   // message handler calls in progress (Connected, Received, Disconnected)
	requests atomic.Int32   // requests in flight (Request), Config.MaxRequests at most
	done     chan struct{}
	ready    chan struct{} // closed when the OpenOnConnect protocols are open (or failed): start

	adm admitted // what admission counted for the session (admission.go)

	counts sessionCounters // for Stats (stats.go); bytes are counted by rconn
}

func newSession(s *Service, sc *secio.Conn, ms *mux.Session, dir Direction, local, remote Addr) *Session {
	sess := &Session{
		svc:       s,
		peer:      sc.RemotePeer(),
		pub:       sc.RemotePublicKey(),
		dir:       dir,
		local:     local,
		remote:    remote,
		secure:    sc.Secure(),
		suite:     sc.Suite(),
		conn:      sc,
		mux:       ms,
		opened:    time.Now(),
		streams:   make(map[string]*protoStream),
		raw:       make(map[*protoStream]struct{}),
		opening:   make(map[string]chan struct{}),
		settled:   make(chan struct{}),
		sendSpace: queueSpace{space: make(chan struct{})},
		done:      make(chan struct{}),
		ready:     make(chan struct{}),
	}
	sess.remote.Peer = sess.peer
	sess.local.Peer = sc.LocalPeer()
	sess.ctx, sess.cancel = context.WithCancel(context.Background())
	return sess
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

// Relayed reports whether a third party carries the session's connection (a relay's
// circuit: transport.IsRelayed). A direct session with the same peer replaces a relayed
// one whichever side dialled it (see ErrDuplicateSession), and the relayed one is then
// closed gracefully: its streams flush and end, while new streams and messages go to the
// direct session.
func (s *Session) Relayed() bool { return s.relayed }

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

// MemoryUsed returns the bytes this session's streams reserve, out of
// Config.MaxSessionMemory: what they have received and not yet read, and the windows of
// streams that grew.
func (s *Session) MemoryUsed() int64 { return s.mux.MemoryUsed() }

// RTT returns the session's smoothed round-trip time: first the handshake's round trip (an
// upper bound: it includes the peer's handshake computation, a few hundred microseconds),
// then measured by every keepalive ping (the first replaces the handshake's estimate). It is known from the
// session's start (0 only for legacy TEA sessions before their first ping).
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
	return s.sendSpace.queued
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

// allows reports whether p may run on this session: on a legacy TEA session (neither
// authenticated nor integrity-protected) only protocols that opt in with AllowLegacyTEA.
func (s *Session) allows(p *Protocol) bool { return s.secure || p.AllowLegacyTEA }

func (s *Session) protoEvent(t EventType, name, version string, err error) Event {
	e := s.event(t, err)
	e.Protocol, e.Version = name, version
	return e
}

// usedOnce reports whether a protocol stream was ever registered on the session.
func (s *Session) usedOnce() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.used
}
