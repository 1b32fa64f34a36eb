package tendril

// A negotiated protocol stream: its reader loop, the handler calls and its end.

import (
	"errors"
	"fmt"
	"io"
	"net/netip"
	"sync/atomic"

	"github.com/tendril-p2p/tendril/mux"
	"github.com/tendril-p2p/tendril/protocol"
)

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
	sess       *Session
	proto      *Protocol
	version    string
	st         *mux.Stream
	outbound   bool
	answerHeld bool     // request mode: the negotiation answer goes with the reply (requestServer)
	handlerCtx *Context // what its handler is given

	inCall    atomic.Bool   // message mode: the handler is in a Connected, Received or Disconnected call
	connected chan struct{} // message mode: closed when the handler's Connected has returned (nil for raw streams)

	sendQueue // the queue and its writer (sendqueue.go); a raw stream's writer is done from the start
}

// answered lets the writer of a stream the peer opened start, now that the negotiation
// answer is sent: messages queued meanwhile follow it.
func (ps *protoStream) answered() {
	ps.sess.mu.Lock()
	if ps.writer == writerHeld {
		ps.setWriterLocked(writerIdle)
	}
	if len(ps.frames) > 0 || ps.intake != intakeOpen {
		ps.ensureWriterLocked()
	}
	ps.sess.mu.Unlock()
}

// discard undoes the registration of a stream whose negotiation answer could not be sent:
// its handler never runs.
func (ps *protoStream) discard(err error) {
	s := ps.sess
	ps.sess.mu.Lock()
	if ps.writer == writerHeld {
		ps.setWriterLocked(writerIdle)
	}
	ps.sess.mu.Unlock()
	ps.abort()
	ps.finish(err)
	s.wg.Done()
}

func (ps *protoStream) readLoop() {
	s := ps.sess
	defer s.wg.Done()
	h := ps.proto.Handler
	var readErr error
	err := callHandler(ps.proto.Name, func() {
		func() {
			defer close(ps.connected) // also if Connected panics
			ps.call(func() { h.Connected(ps.handlerCtx, ps.version) })
		}()
		r := protocol.NewReader(ps.st, s.svc.maxMessage(ps.proto))
		for {
			msg, err := r.ReadMessageAlloc()
			if err != nil {
				if !errors.Is(err, io.EOF) {
					readErr = err
				}
				return
			}
			s.counts.msgsReceived.Add(1)
			ps.call(func() { h.Received(ps.handlerCtx, msg) })
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
	if perr := callHandler(ps.proto.Name, func() { ps.call(func() { h.Disconnected(ps.handlerCtx) }) }); perr != nil {
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
func (ps *protoStream) closeLocal() { ps.closeIntake(intakeClosed) }

// closeIntake stops the queue taking messages (closeIntakeLocked) and lets the writer end.
func (ps *protoStream) closeIntake(to queueIntake) {
	ps.sess.mu.Lock()
	ps.closeIntakeLocked(to)
	ps.ensureWriterLocked()
	ps.sess.mu.Unlock()
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
func (ps *protoStream) stop() { ps.closeIntake(intakeAborted) }

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
	if ps.proto.RequestHandler == nil || err != nil {
		s.svc.emit(s.protoEvent(EventProtocolClosed, ps.proto.Name, ps.version, err))
	}
}
