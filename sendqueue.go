package tendril

// The send queue of a message stream and its writer: Send copies a framed message into the
// queue, counted against the session's SendQueueBytes, and a writer goroutine, started when
// there is work and gone when the queue is empty, sends it.

import (
	"context"
	"fmt"
	"io"
	"net/netip"
	"sync"

	"github.com/tendril-p2p/tendril/protocol"
)

// queueSpace is the session's side of the send queue: the bytes queued on all its message
// streams, bounded by Config.SendQueueBytes, and the SendContext calls waiting for room.
// Guarded by Session.mu (it is Session.sendSpace).
type queueSpace struct {
	queued  int           // bytes queued for sending, all streams (queueCost of each message)
	waiters int           // SendContext calls waiting for space
	space   chan struct{} // closed (and replaced) when space is freed and someone waits
}

// freeLocked gives n bytes of queue space back and wakes waiting senders.
func (q *queueSpace) freeLocked(n int) {
	q.queued -= n
	if q.waiters > 0 {
		close(q.space)
		q.space = make(chan struct{})
	}
}

// sendQueue is a message stream's queue, whether it still takes messages, and its writer.
// Its fields are guarded by the session's mutex (protoStream.sess.mu): the queue's bytes
// count against the session's sendSpace under the same lock.
type sendQueue struct {
	frames  [][]byte      // framed messages waiting for the writer
	intake  queueIntake   // only closeIntakeLocked changes it
	writer  writerState   // only setWriterLocked changes it
	closing chan struct{} // closed when intake leaves open (also the handler's Context.Done)
	wdone   chan struct{} // closed when the writer is done: after end-of-stream, or given up
}

// queueIntake says whether a stream's queue still takes messages, and how it ends. It only
// moves forward: open -> closed -> aborted, or open -> aborted.
type queueIntake uint8

const (
	intakeOpen    queueIntake = iota // Send queues messages
	intakeClosed                     // no more are taken: the writer sends the queue, then end-of-stream
	intakeAborted                    // no more are taken, and what is queued is dropped: no end-of-stream
)

// closeIntakeLocked stops the queue taking messages: to is intakeClosed (flush, then
// end-of-stream) or intakeAborted (drop). It never moves back, and it closes closing when
// the queue stops taking messages. mu is held.
func (q *sendQueue) closeIntakeLocked(to queueIntake) {
	if to <= q.intake {
		return
	}
	if q.intake == intakeOpen {
		close(q.closing)
	}
	q.intake = to
}

// writerState is where a message stream's writer is:
//
//	held -> idle <-> running -> done
//	held, idle --------------> done   (the session is torn down)
//
// A raw stream's writer is done from the start (startStream).
//
// A stream the peer opened starts held until its negotiation answer is sent (answered); a
// writer goroutine runs only while there is work, so an idle stream has none.
type writerState uint8

const (
	writerIdle    writerState = iota // no writer goroutine: the next message, or the end, starts one
	writerHeld                       // the negotiation answer is not sent yet: none may start
	writerRunning                    // a writer goroutine is sending the queue
	writerDone                       // writing has ended for good: wdone is closed
)

var writerStateNames = [...]string{"idle", "held", "running", "done"}

// writerNeverRan is the wdone of raw streams, whose writer is done from the start: closed
// once, shared by all of them (an idle raw stream costs no channel of its own for it).
var writerNeverRan = func() chan struct{} { ch := make(chan struct{}); close(ch); return ch }()

func (w writerState) String() string { return writerStateNames[w] }

// setWriterLocked moves the writer to state to, closing wdone when it is done (a graceful
// close may then be settled). It panics on a move the writer does not have: a bug here.
// ps.mu is held.
func (ps *protoStream) setWriterLocked(to writerState) {
	from := ps.writer
	ok := false
	switch to {
	case writerIdle:
		ok = from == writerHeld || from == writerRunning
	case writerRunning:
		ok = from == writerIdle
	case writerDone:
		ok = from != writerDone
	}
	if !ok {
		panic("tendril: stream writer state " + from.String() + " -> " + to.String())
	}
	ps.writer = to
	if to == writerDone {
		close(ps.wdone)
		ps.sess.checkSettledLocked()
	}
}

// send queues a copy of msg. If wait is false it never waits; otherwise it waits under ctx
// while the session's queue is full.
func (ps *protoStream) send(ctx context.Context, msg []byte, wait bool) error {
	s := ps.sess
	if ps.proto.streamMode() {
		return fmt.Errorf("%w: %q is a raw stream protocol: write to its stream", ErrProtocolNotOpen, ps.proto.Name)
	}
	if limit := s.svc.maxMessage(ps.proto); len(msg) > limit {
		return fmt.Errorf("%w: %d > %d bytes", ErrMessageTooLarge, len(msg), limit)
	}
	cost := queueCost(msg)
	limit := s.svc.cfg.SendQueueBytes
	ps.sess.mu.Lock()
	for {
		if ps.intake != intakeOpen {
			ps.sess.mu.Unlock()
			return fmt.Errorf("%w: %q stream closed", ErrProtocolNotOpen, ps.proto.Name)
		}
		if s.sendSpace.queued+cost <= limit {
			break
		}
		if !wait {
			ps.sess.mu.Unlock()
			s.svc.emitRepeat(s.protoEvent(EventSessionBlocked, ps.proto.Name, ps.version, ErrSessionBlocked), netip.Addr{})
			return ErrSessionBlocked
		}
		s.sendSpace.waiters++
		space := s.sendSpace.space
		ps.sess.mu.Unlock()
		var err error
		select {
		case <-space:
		case <-ctx.Done():
			err = ctx.Err()
		case <-ps.closing:
		}
		ps.sess.mu.Lock()
		s.sendSpace.waiters--
		if err != nil {
			ps.sess.mu.Unlock()
			return err
		}
	}
	// Queue the message already framed: the writer sends it as it is, with no further copy.
	ps.frames = append(ps.frames, protocol.AppendFrame(make([]byte, 0, protocol.MessageHeaderSize+len(msg)), msg))
	s.sendSpace.queued += cost
	ps.ensureWriterLocked()
	ps.sess.mu.Unlock()
	return nil
}

// queueCost is what a message counts against the send queue: its bytes plus a fixed
// overhead, so that a flood of empty messages is bounded too.
func queueCost(msg []byte) int { return len(msg) + 64 }

// frameCost is queueCost of the message inside a queued frame.
func frameCost(frame []byte) int { return queueCost(frame[protocol.MessageHeaderSize:]) }

// ensureWriterLocked starts a writer if there is work for one (messages to send, or the
// end-of-stream to send or give up on) and none is running. Writers exit when the queue is
// empty, so an idle stream has no writer goroutine. ps.mu is held.
func (ps *protoStream) ensureWriterLocked() {
	s := ps.sess
	switch ps.writer {
	case writerRunning, writerDone:
		return
	}
	if s.state >= sessionTornDown {
		// The session is being torn down and waits for its goroutines: start none.
		ps.dropQueueLocked()
		ps.setWriterLocked(writerDone)
		return
	}
	if ps.writer == writerHeld {
		return // answered starts it
	}
	ps.setWriterLocked(writerRunning)
	s.wg.Add(1)
	go ps.writeLoop()
}

func (ps *protoStream) writeLoop() {
	s := ps.sess
	defer s.wg.Done()
	for {
		ps.sess.mu.Lock()
		switch {
		case ps.intake == intakeAborted:
			ps.dropQueueLocked()
			ps.setWriterLocked(writerDone)
			ps.sess.mu.Unlock()
			return
		case len(ps.frames) == 0 && ps.intake == intakeClosed:
			// The end-of-stream is queued before writing is reported over (wdone), so that a
			// close that waits for this goes out after it: the peer reads to EOF, then
			// closes its side.
			ps.sess.mu.Unlock()
			ps.st.CloseWrite()
			ps.sess.mu.Lock()
			ps.setWriterLocked(writerDone)
			ps.sess.mu.Unlock()
			return
		case len(ps.frames) == 0:
			ps.setWriterLocked(writerIdle) // the next send starts a writer again
			ps.sess.mu.Unlock()
			return
		}
		frames := ps.frames
		ps.frames = nil
		ps.sess.mu.Unlock()
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
				ps.sess.mu.Lock()
				ps.freeFramesLocked(frames)
				ps.sess.mu.Unlock()
				ps.fail(fmt.Errorf("tendril: write %s: %w", ps.proto.Name, err))
				ps.sess.mu.Lock()
				ps.dropQueueLocked()
				ps.setWriterLocked(writerDone)
				ps.sess.mu.Unlock()
				return
			}
			ps.sess.mu.Lock()
			ps.freeFramesLocked(frames[:n])
			ps.sess.mu.Unlock()
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

// freeFramesLocked gives back the queue space of frames that were sent or will not be.
func (ps *protoStream) freeFramesLocked(frames [][]byte) {
	n := 0
	for _, f := range frames {
		n += frameCost(f)
	}
	if n > 0 {
		ps.sess.sendSpace.freeLocked(n)
	}
}

// dropQueueLocked discards unsent messages (the stream failed) and gives their space back.
func (ps *protoStream) dropQueueLocked() {
	ps.freeFramesLocked(ps.frames)
	ps.frames = nil
	ps.closeIntakeLocked(intakeAborted)
}
