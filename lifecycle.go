package tendril

// A Session's life: how it starts, the ways it ends, and its teardown.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tendril-p2p/tendril/mux"
	"github.com/tendril-p2p/tendril/secio"
)

// sessionState is where a Session is in its life. It only moves forward, and only
// setStateLocked changes it:
//
//	open -> closing -> tornDown -> closed
//	open -------------> tornDown             the connection ended, or abort, while open
//	open --------------------------> closed  abortUnstarted: never registered
//
// Service.setup creates a session open. Service.register counts it in the Service's
// WaitGroup (svc.wg.Add) as it registers it, and start gives the mux teardown as its
// closed callback: every way of ending a started session closes the mux, so teardown runs
// exactly once, and it releases the WaitGroup (svc.wg.Done) when it returns. A session that
// is never registered (refused by the gater or a limit, a duplicate, the Service closing)
// is not counted and ends in abortUnstarted.
//
// The ways a session ends:
//   - Close: graceful, within Config.ShutdownTimeout (shutdown).
//   - shutdown: graceful within ctx: flush and end every stream, then close the connection.
//   - abort: at once, with a reason (keepalive, trimming, idle, duplicate) or none.
//   - teardown: the one end every started session reaches, run by the mux once it closed.
//   - abortUnstarted: for a session that was never registered.
type sessionState uint8

const (
	sessionOpen     sessionState = iota // protocols open and streams are accepted
	sessionClosing                      // shutdown began: no new streams; the open ones flush and end
	sessionTornDown                     // the mux closed and teardown runs: no new goroutines
	sessionClosed                       // ended: done is closed
)

var sessionStateNames = [...]string{"open", "closing", "tornDown", "closed"}

func (st sessionState) String() string { return sessionStateNames[st] }

// setStateLocked moves the session to state to; s.mu is held. It panics on a move the
// lifecycle does not have: that would be a bug here, not something a peer can cause.
func (s *Session) setStateLocked(to sessionState) {
	from := s.state
	if to <= from || (to == sessionClosed && from == sessionClosing) {
		panic("tendril: session state " + from.String() + " -> " + to.String())
	}
	s.state = to
}

// abortUnstarted closes a session that was never registered (a duplicate, or the Service
// closing). It emits nothing: no one was told it existed.
func (s *Session) abortUnstarted() {
	s.mu.Lock()
	s.setStateLocked(sessionClosed)
	s.mu.Unlock()
	s.cancel()
	s.mux.Close()
	close(s.done)
}

// start runs a registered session: it hands the mux its stream handler and teardown, and
// opens the OpenOnConnect protocols. The Service's WaitGroup counts the session already.
func (s *Session) start() {
	svc := s.svc
	if svc.logs(slog.LevelInfo) {
		svc.log.Info("session opened", "peer", s.peer, "addr", s.remote,
			"dir", s.dir.String(), "suite", suiteName(s), "secure", s.secure)
	}
	svc.emit(s.event(EventSessionOpened, nil))
	s.mux.Serve(s.acceptStream, s.teardown)
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
			if s.state >= sessionTornDown {
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

func (s *Session) setErr(err error) {
	s.mu.Lock()
	if s.closeErr == nil {
		s.closeErr = err
	}
	s.mu.Unlock()
}

// abort ends the session at once, without flushing, recording err (if not nil, and if no
// reason was recorded before) as why; it does not wait: the mux closes, and teardown follows.
func (s *Session) abort(err error) {
	if err != nil {
		s.setErr(err)
	}
	s.cancel()
	s.mux.Abort()
}

// teardown is the end of every started session, whatever ended it: the mux calls it on a
// goroutine of its own once it has closed, with its error. It records why the session ended
// (if this side did not end it), ends its streams and waits for their handlers (at most
// HandlerExitTimeout), unregisters it, reports it closed, closes done, and releases the
// Service's WaitGroup.
func (s *Session) teardown(muxErr error) {
	defer s.svc.wg.Done()
	if s.ctx.Err() == nil {
		s.setErr(s.lostCause(muxErr))
	}
	s.mu.Lock()
	s.setStateLocked(sessionTornDown)
	streams := s.streamsLocked()
	s.mu.Unlock()
	s.cancel()
	s.mux.Close()
	// Every handler's Context ends with its session, whatever ended it: a handler waiting on
	// its Context.Done() (as a raw StreamHandler does) returns now. A message stream is not reset:
	// the mux keeps what it received readable after it closed, so the handler still gets
	// the messages the peer sent before it closed the session (a peer that closes from its
	// own handler does not wait for this side to read them first), then the stream ends.
	for _, ps := range streams {
		if ps.proto.streamMode() {
			ps.abort()
		} else {
			ps.stop()
		}
	}
	s.waitHandlers()
	s.svc.unregister(s)
	s.mu.Lock()
	err := s.closeErr
	s.sendSpace.queued = 0
	s.setStateLocked(sessionClosed)
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
	if s.state == sessionOpen {
		s.setStateLocked(sessionClosing)
	}
	s.checkSettledLocked()
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
			// (abort's mux.Abort drops what is unsent, the close record included).
			s.cancel()
			_ = s.conn.Close()
		}
	case <-ctx.Done():
	case <-s.done:
	}
	s.abort(nil)
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
	if s.wg.idle() {
		return // no goroutine of the session's is left: no helper goroutine, no timer
	}
	returned := make(chan struct{})
	go func() {
		s.wg.Wait()
		close(returned)
	}()
	wait := s.svc.cfg.HandlerExitTimeout
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-returned:
		return
	case <-t.C:
	case <-s.svc.overdue:
		// The Service's Shutdown has run out of time: handlers whose Context ended get a
		// moment to return, not HandlerExitTimeout.
		wait = min(wait, handlerGrace)
		t.Reset(wait)
		select {
		case <-returned:
			return
		case <-t.C:
		}
	}
	s.svc.log.Warn("handlers still running after their session ended: abandoned",
		"peer", s.peer, "session", s.id, "waited", wait)
}

// handlerGrace is how long a session ending after Shutdown's deadline waits for its
// handlers.
const handlerGrace = 200 * time.Millisecond

// goroutineGroup counts a session's goroutines, as a sync.WaitGroup does, and also tells
// whether none is running, so that teardown waits for them without a goroutine and a timer
// of its own when none is left. Goroutines are added under s.mu while the session is not torn
// down, so none is added once teardown finds the group idle.
type goroutineGroup struct {
	wg      sync.WaitGroup
	running atomic.Int64
}

func (g *goroutineGroup) Add(delta int) {
	g.running.Add(int64(delta))
	g.wg.Add(delta)
}

// Done marks one goroutine finished; running drops after the WaitGroup does, so an idle
// group's WaitGroup is at zero.
func (g *goroutineGroup) Done() {
	g.wg.Done()
	g.running.Add(-1)
}

func (g *goroutineGroup) Wait() { g.wg.Wait() }

func (g *goroutineGroup) idle() bool { return g.running.Load() == 0 }

// checkSettledLocked closes settled once a graceful close has nothing left to wait for: no
// protocol is opening, no raw stream is left, and every message stream has ended, or has
// sent all it had queued and its end-of-stream while its handler is in the middle of a call
// (it may be the handler that is closing the session: it cannot read the peer's answer
// before it returns). s.mu is held; it runs whenever one of these changes.
func (s *Session) checkSettledLocked() {
	if s.state == sessionOpen || len(s.opening) > 0 || len(s.raw) > 0 {
		return
	}
	for _, ps := range s.streams {
		if ps.writer != writerDone || !ps.inCall.Load() {
			return
		}
	}
	select {
	case <-s.settled:
	default:
		close(s.settled)
	}
}

// lostCause is why a session ended that this side did not end, given the mux's error.
func (s *Session) lostCause(err error) error {
	// The mux keeps the first error of its reader or writer; a write can fail (the secure
	// conn closed itself) before the reader reports the bad frame that caused it. The read
	// error is the cause.
	if cause := s.rconn.cause(time.Second); cause != nil && !errors.Is(cause, net.ErrClosed) && !errors.Is(err, cause) {
		err = cause
	}
	switch {
	case s.secure && errors.Is(err, io.EOF):
		// secio returns io.EOF only after the peer's authenticated close record (an
		// unannounced end is ErrTruncated): the peer left on purpose.
		return &closedError{ErrPeerClosed, err}
	case !s.secure && errors.Is(err, mux.ErrProtocol) && !s.usedOnce():
		// TEA has no integrity check: with the wrong key a frame decrypts to garbage,
		// which the mux reports as a protocol error before any protocol could open.
		return &closedError{ErrLegacyKeyMismatch, err}
	case errors.Is(err, mux.ErrProtocol), errors.Is(err, mux.ErrPeerMisbehaving),
		errors.Is(err, secio.ErrKeyUpdateTooSoon), errors.Is(err, secio.ErrTooManyNonDataRecords):
		return &closedError{errPeerMisbehaved, err}
	default:
		return &closedError{errConnectionLost, err}
	}
}
