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
	if s.state >= sessionTornDown {
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
