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
	"time"

	"github.com/tendril-p2p/tendril/mux"
)

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
