package tendril

// Opening and accepting protocol streams: negotiation, registration (the dual-open rule)
// and the start of what serves them.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"time"

	"github.com/tendril-p2p/tendril/mux"
	"github.com/tendril-p2p/tendril/protocol"
)

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
	switch {
	case p.StreamHandler != nil:
		return s.openAndStart(ctx, p) // a new stream per call
	case p.RequestHandler != nil:
		return fmt.Errorf("tendril: %q is a request protocol: use Request", name)
	case p.Handler == nil:
		return fmt.Errorf("tendril: %q has no handler here: open it with OpenStream or Request", name)
	}
	ch, err := s.reserveOpen(ctx, name)
	if ch == nil {
		return err // open already, or not to be
	}
	defer func() {
		s.mu.Lock()
		delete(s.opening, name)
		s.checkSettledLocked()
		s.mu.Unlock()
		close(ch)
	}()
	return s.openAndStart(ctx, p)
}

// reserveOpen waits until no other OpenProtocol of the message-mode protocol name is in
// progress, then records this one in s.opening and returns its channel, for the caller to
// remove and close; nil if the protocol is open by then, the session closing, or ctx done
// (the error says which).
func (s *Session) reserveOpen(ctx context.Context, name string) (chan struct{}, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for {
		if s.state != sessionOpen {
			return nil, ErrSessionClosed
		}
		if s.streams[name] != nil {
			return nil, nil
		}
		wait, busy := s.opening[name]
		if !busy {
			ch := make(chan struct{})
			s.opening[name] = ch
			return ch, nil
		}
		s.mu.Unlock()
		select {
		case <-wait:
		case <-ctx.Done():
			s.mu.Lock()
			return nil, ctx.Err()
		}
		s.mu.Lock()
	}
}

// openAndStart opens a stream of p, negotiates it and registers it (startStream), then runs
// what serves it; an error says why it was not registered (nil if another stream of p won).
func (s *Session) openAndStart(ctx context.Context, p *Protocol) error {
	st, version, err := s.openNegotiated(ctx, p)
	if err != nil {
		return err
	}
	_, run, out := s.startStream(p, version, st, true)
	if out == started {
		go run()
		return nil
	}
	st.Reset()
	switch out {
	case lostDualOpen:
		return nil // both sides opened p at once, and the peer's stream is kept
	case tooManyStreams:
		return fmt.Errorf("tendril: open %s: %w (%d raw streams running)", p.Name, mux.ErrTooManyStreams, s.svc.cfg.Mux.MaxStreams)
	case protocolRemoved:
		return fmt.Errorf("%w: %q removed", ErrUnknownProtocol, p.Name)
	}
	return ErrSessionClosed
}

// Stream is a stream of a raw-mode protocol that this node opened (OpenStream): a net.Conn
// with deadlines, which can also be half-closed. Close ends both directions; CloseWrite
// sends end-of-stream and keeps reading (the peer's reads return io.EOF once they have
// consumed what was written); Reset aborts the stream at once, both ways.
type Stream interface {
	net.Conn
	// CloseWrite half-closes the stream: the peer reads io.EOF after the data already
	// written, and this side can still read.
	CloseWrite() error
	// Reset aborts the stream in both directions; the peer's reads and writes fail.
	Reset() error
}

// OpenStream opens a new stream of the named raw-mode protocol and returns it to the caller
// with the version in use, without running the local StreamHandler: the caller owns the
// stream and must close it. The remote's StreamHandler serves the other end. The protocol
// must be registered here with a StreamHandler, or with no handler at all (a protocol this
// node only opens).
//
// With one version listed, negotiation is lazy: the request travels with the first data
// (no round trip of its own), OpenStream returns at once, and a refusal by the peer
// (ErrUnknownProtocol, ErrNoCommonVersion, wrapped) is the error of the first Read, of
// the Write that would send more than protocol.MaxUnanswered bytes before the answer came,
// or of a Write that meets the reset with which the peer closes a refused stream: never a
// Write blocked for good, nor a bare reset in place of the refusal. With several versions listed, OpenStream waits for the
// negotiation and returns its outcome.
func (s *Session) OpenStream(ctx context.Context, name string) (Stream, string, error) {
	p := s.svc.protocol(name)
	if p == nil {
		return nil, "", fmt.Errorf("%w: %q", ErrUnknownProtocol, name)
	}
	switch {
	case p.Handler != nil:
		return nil, "", fmt.Errorf("tendril: %q is a message-mode protocol: use OpenProtocol and Send", name)
	case p.RequestHandler != nil:
		return nil, "", fmt.Errorf("tendril: %q is a request protocol: use Request", name)
	case !s.allows(p):
		return nil, "", fmt.Errorf("%w: %q", ErrInsecureSession, name)
	}
	return s.openStream(ctx, p)
}

// openStream opens a stream of p for the caller (OpenStream, Request): lazily negotiated
// if p lists one version, else negotiated now. It counts the stream opened.
func (s *Session) openStream(ctx context.Context, p *Protocol) (Stream, string, error) {
	return s.openStreamWait(ctx, p, s.svc.cfg.NegotiationTimeout)
}

// openStreamWait is openStream where a lazy negotiation's answer may take answerWait (0:
// as long as the caller's deadlines allow; a request's answer comes with its reply).
func (s *Session) openStreamWait(ctx context.Context, p *Protocol, answerWait time.Duration) (Stream, string, error) {
	s.mu.Lock()
	closing := s.state != sessionOpen
	s.mu.Unlock()
	if closing {
		return nil, "", ErrSessionClosed
	}
	var (
		st      Stream
		version string
		err     error
	)
	if len(p.Versions) == 1 {
		st, version, err = s.openStreamLazy(ctx, p, answerWait)
	} else {
		st, version, err = s.openNegotiated(ctx, p)
	}
	if err != nil {
		return nil, "", err
	}
	s.countStream(true)
	return st, version, nil
}

// openStreamLazy opens a mux stream for a protocol with one version and negotiates it
// lazily: the request goes with the first data, and a refusal is the first Read's error.
func (s *Session) openStreamLazy(ctx context.Context, p *Protocol, answerWait time.Duration) (Stream, string, error) {
	st, err := s.openMuxStream(ctx, p)
	if err != nil {
		return nil, "", err
	}
	lc, err := protocol.NegotiateLazy(st, p.Name, p.Versions[0], answerWait)
	if err != nil {
		st.Reset()
		return nil, "", fmt.Errorf("tendril: negotiate %s: %w", p.Name, err)
	}
	return lazyStream{lc, st}, p.Versions[0], nil
}

// lazyStream is a lazily negotiated stream: the LazyConn, with the mux stream's Reset.
type lazyStream struct {
	*protocol.LazyConn
	st *mux.Stream
}

func (l lazyStream) Reset() error { return l.st.Reset() }

// openNegotiated opens a mux stream and negotiates p on it, within NegotiationTimeout. The
// session's end needs no watcher here: closing the mux fails the stream's I/O.
func (s *Session) openNegotiated(ctx context.Context, p *Protocol) (*mux.Stream, string, error) {
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

// refusedInsecure is what the acceptor answers when a legacy TEA peer asks for a protocol
// that did not opt in: a typed refusal the peer can read.
var refusedInsecure = &protocol.RefusedError{Code: protocol.CodeRefused, Reason: "not available on an insecure session"}

// refusedRemoved is the answer for a protocol removed (RemoveProtocol) during its negotiation.
var refusedRemoved = &protocol.RefusedError{Code: protocol.CodeUnknownProtocol, Reason: "protocol removed"}

// refusedTooMany is the answer for a raw stream beyond the handlers this session may run.
var refusedTooMany = &protocol.RefusedError{Code: protocol.CodeRefused, Reason: "too many streams"}

// acceptStream serves a stream the peer opened, on the goroutine the mux started for it: an
// idle session has no goroutine of its own.
func (s *Session) acceptStream(st *mux.Stream) {
	s.mu.Lock()
	if s.state != sessionOpen {
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
	// A request's answer is held back to leave with its reply (requestServer), one frame,
	// when the request came with the negotiation (a lazy opener); an opener that waits for
	// the answer before it sends the request gets the answer at once.
	info, _, held, err := protocol.AcceptHold(ctx, st, s.svc.registry, func(info protocol.Info, version string) (bool, error) {
		p := s.svc.protocol(info.Name)
		if p == nil {
			return false, refusedRemoved // removed since the registry found it
		}
		if !s.allows(p) {
			return false, refusedInsecure
		}
		var out startOutcome
		ps, run, out = s.startStream(p, version, st, false)
		switch out {
		case started:
			accepted = true
			return p.RequestHandler != nil && st.Buffered() > 0, nil
		case tooManyStreams:
			return false, refusedTooMany
		}
		return false, nil
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
	ps.answerHeld = held
	ps.answered()
	return run
}

// startOutcome is what startStream did with a negotiated stream.
type startOutcome uint8

const (
	started         startOutcome = iota // registered: run serves it
	lostDualOpen                        // not registered: the stream of the protocol kept is another (dualOpen)
	tooManyStreams                      // not registered: MaxStreams raw handlers run already
	protocolRemoved                     // not registered: the protocol was removed
	sessionEnding                       // not registered: the session is closing
)

// dualOpen is the rule for a message-mode protocol, which has at most one stream per
// session, when a stream of it is negotiated while another is open or being opened: both
// peers apply it alike, so both keep the same stream, the one opened by the session's
// dialling side. newFromDialer says who opened the new stream; open, whether a stream of
// the protocol is registered, and oldFromDialer who opened that one; dialerOpening, whether
// this side is the dialler and its own open of the protocol is in progress. It returns
// whether to keep the new stream, and whether that replaces the registered one.
func dualOpen(newFromDialer, open, oldFromDialer, dialerOpening bool) (keep, replace bool) {
	switch {
	case open:
		// The dialler's stream wins; between two of the same side, the one registered.
		return newFromDialer && !oldFromDialer, newFromDialer && !oldFromDialer
	case dialerOpening && !newFromDialer:
		return false, false // our own open, from the dialling side, will win
	}
	return true, false
}

// startStream registers a negotiated stream and returns it with what serves it, which the
// caller runs on a new goroutine if the outcome is started; otherwise the caller resets
// the stream. A stream the peer opened (!outbound) is registered before the answer is sent:
// its writer waits for answered.
func (s *Session) startStream(p *Protocol, version string, st *mux.Stream, outbound bool) (ps *protoStream, run func(), out startOutcome) {
	ps = &protoStream{
		sess:      s,
		proto:     p,
		version:   version,
		st:        st,
		outbound:  outbound,
		sendQueue: sendQueue{closing: make(chan struct{})},
	}
	ps.handlerCtx = &Context{ps: ps}
	if p.streamMode() {
		// A raw stream's handler writes to it itself: its writer is done from the start.
		ps.writer, ps.wdone = writerDone, writerNeverRan
	} else {
		ps.connected, ps.wdone = make(chan struct{}), make(chan struct{})
		if !outbound {
			ps.writer = writerHeld
		}
	}
	s.mu.Lock()
	if out := s.registrableLocked(p); out != started {
		s.mu.Unlock()
		return ps, nil, out
	}
	if p.streamMode() {
		if len(s.raw) >= s.svc.cfg.Mux.MaxStreams {
			s.mu.Unlock()
			return ps, nil, tooManyStreams
		}
		return ps, s.startRawLocked(ps), started
	}
	fromDialer := outbound == (s.dir == Outbound)
	old := s.streams[p.Name]
	_, pending := s.opening[p.Name]
	keep, replace := dualOpen(fromDialer, old != nil, old != nil && old.outbound == (s.dir == Outbound), pending && s.dir == Outbound)
	if !keep {
		s.mu.Unlock()
		return ps, nil, lostDualOpen
	}
	s.streams[p.Name] = ps
	s.used = true
	s.wg.Add(1)
	s.mu.Unlock()
	s.countStream(outbound)
	if replace {
		old.abort()
	}
	s.svc.emit(s.protoEvent(EventProtocolOpened, p.Name, version, nil))
	return ps, ps.readLoop, started
}

// registrableLocked says whether a stream of p can be registered now (started), or why
// not. s.mu is held.
func (s *Session) registrableLocked(p *Protocol) startOutcome {
	switch {
	case s.state != sessionOpen:
		return sessionEnding
	case !s.svc.registered(p):
		return protocolRemoved
	}
	return started
}

// countStream counts a protocol stream registered, by who opened it.
func (s *Session) countStream(outbound bool) {
	if outbound {
		s.counts.streamsOpened.Add(1)
	} else {
		s.counts.streamsAccepted.Add(1)
	}
}

// startRawLocked registers a raw-mode stream and returns what runs its StreamHandler and
// closes the stream when the handler returns or the stream is asked to close. s.mu is held
// on entry and released.
func (s *Session) startRawLocked(ps *protoStream) (run func()) {
	s.raw[ps] = struct{}{}
	s.used = true
	s.wg.Add(1)
	s.mu.Unlock()
	s.countStream(ps.outbound)
	if ps.proto.RequestHandler == nil { // a request is not a protocol opening (and would flood Events)
		s.svc.emit(s.protoEvent(EventProtocolOpened, ps.proto.Name, ps.version, nil))
	}
	// The handler's Context ends when the stream does, whoever ends it (the peer resetting
	// it, say), not only with the session: a handler blocked elsewhere than on the stream
	// learns that nobody waits for it any more. A handler stuck in the stream's I/O returns
	// then anyway.
	endCtx := ps.st.AfterEnd(ps.stop)
	return func() {
		defer s.wg.Done()
		err := callHandler(ps.proto.Name, func() { ps.proto.rawServer(s.svc).ServeStream(ps.handlerCtx, ps.version, ps.st) })
		if err != nil {
			s.svc.log.Error("stream handler panicked", "protocol", ps.proto.Name, "err", err)
		}
		endCtx()
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
		if errors.Is(err, mux.ErrStreamClosed) {
			// The handler closed the stream itself: its end-of-stream may still be
			// queued, and a reset now would drop it, leaving the peer waiting for an end
			// that never comes. The stream is freed already.
			return
		}
		st.Reset()
		return
	}
	st.Close()
}
