package mux

import (
	"errors"
	"os"
	"sync"
	"time"
)

// lazyDelay is how long an acknowledgement or a ping answer may wait for a frame to ride
// with (a stream's ACK with its first answer, usually) before it is sent alone.
const lazyDelay = 500 * time.Microsecond

// maxQueuedResets bounds the resets waiting to be written (refused streams, 12 bytes each).
const maxQueuedResets = 4096

// maxQueuedPongs bounds the peer's pings waiting for their answer; more are ignored, so a
// ping flood costs a fixed amount.
const maxQueuedPongs = 64

// writer is the send side of a session. One writer at a time holds sem and writes to the
// connection; control frames queued meanwhile are written by the holder before it lets go,
// or by a flusher goroutine that exists only while it writes.
type writer struct {
	sem chan struct{} // held while writing to the connection

	mu        sync.Mutex
	streams   []*Stream // streams with a control frame to send (queueStream)
	frames    []byte    // session frames to send: resets, go-away, pings
	pongs     []uint32  // answers owed to the peer's pings
	pingID    uint32    // our ping to send, if pingDue
	pingDue   bool
	urgent    bool // something queued must not wait for lazyDelay
	lazyArmed bool
	lazyTimer *time.Timer
	stopped   bool

	// Owned by the holder of sem.
	err      error     // sticky: the first failed write
	deadline time.Time // the connection's write deadline, extended lazily
}

func (w *writer) init() { w.sem = make(chan struct{}, 1) }

// stop ends the lazy timer; nothing more is written.
func (w *writer) stop() {
	w.mu.Lock()
	w.stopped = true
	if w.lazyTimer != nil {
		w.lazyTimer.Stop()
	}
	w.mu.Unlock()
}

var writeBufs = sync.Pool{New: func() any { return new([]byte) }}

// queueStream schedules st's control frame (window update, flags); urgent ones are
// written at once, the others ride with the next frame or leave after lazyDelay. A stream
// is queued once however often it asks (its frame says everything due when it is
// written), so the queue never holds more than the streams counted against MaxStreams.
func (s *Session) queueStream(st *Stream, urgent bool) {
	st.mu.Lock()
	already := st.queued
	st.queued = true
	st.mu.Unlock()
	if !already {
		w := &s.w
		w.mu.Lock()
		if w.stopped {
			w.mu.Unlock()
			return
		}
		w.streams = append(w.streams, st)
		w.mu.Unlock()
	}
	s.kick(urgent)
}

// queueFrame schedules a session-level frame.
func (s *Session) queueFrame(typ uint8, flags uint16, id, length uint32) {
	w := &s.w
	w.mu.Lock()
	if w.stopped {
		w.mu.Unlock()
		return
	}
	w.frames = appendFrameHeader(w.frames, typ, flags, id, length)
	w.mu.Unlock()
	s.kick(true)
}

// queueReset schedules a reset of stream id; beyond maxQueuedResets resets are dropped (the
// peer's stream then lingers on its side only).
func (s *Session) queueReset(id uint32) {
	w := &s.w
	w.mu.Lock()
	if w.stopped || len(w.frames) >= maxQueuedResets*FrameHeaderSize {
		w.mu.Unlock()
		return
	}
	w.frames = appendFrameHeader(w.frames, typeWindowUpdate, flagRST, id, 0)
	w.mu.Unlock()
	s.kick(true)
}

// queuePong schedules the answer to the peer's ping.
func (s *Session) queuePong(id uint32) {
	w := &s.w
	w.mu.Lock()
	if w.stopped || len(w.pongs) >= maxQueuedPongs {
		w.mu.Unlock()
		return
	}
	w.pongs = append(w.pongs, id)
	w.mu.Unlock()
	s.kick(false)
}

// queuePing schedules our ping.
func (s *Session) queuePing(id uint32, urgent bool) {
	w := &s.w
	w.mu.Lock()
	if w.stopped {
		w.mu.Unlock()
		return
	}
	w.pingID, w.pingDue = id, true
	w.mu.Unlock()
	s.kick(urgent)
}

// kick makes sure what was queued gets written: now if urgent, else within lazyDelay.
func (s *Session) kick(urgent bool) {
	w := &s.w
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.stopped {
		return
	}
	if !urgent {
		if !w.lazyArmed {
			w.lazyArmed = true
			if w.lazyTimer == nil {
				w.lazyTimer = time.AfterFunc(lazyDelay, s.lazyFlush)
			} else {
				w.lazyTimer.Reset(lazyDelay)
			}
		}
		return
	}
	w.urgent = true
	s.startFlusherLocked()
}

// startFlusherLocked starts a flusher if no writer holds sem (otherwise the holder writes
// what is queued before letting go). The flusher is a goroutine of its own: the caller may
// be the frame reader, which must never block on the connection. w.mu is held, so that
// Close, which stops the writer under w.mu before waiting, never misses it.
func (s *Session) startFlusherLocked() {
	select {
	case s.w.sem <- struct{}{}:
		s.wg.Add(1)
		go s.flusher()
	default:
	}
}

func (s *Session) lazyFlush() {
	w := &s.w
	w.mu.Lock()
	defer w.mu.Unlock()
	w.lazyArmed = false
	if w.stopped || len(w.streams)+len(w.frames)+len(w.pongs) == 0 && !w.pingDue {
		return
	}
	w.urgent = true
	s.startFlusherLocked()
}

// flusher writes queued control frames; it holds sem when called.
func (s *Session) flusher() {
	defer s.wg.Done()
	s.unlockWriter()
}

// pendingLocked reports whether control frames wait to be written urgently.
func (w *writer) pendingLocked() bool {
	return w.urgent && (len(w.streams) > 0 || len(w.frames) > 0 || len(w.pongs) > 0 || w.pingDue)
}

// unlockWriter writes urgent control frames queued meanwhile, then releases sem. A
// frame queued after the last look finds sem free and is written by its own kick.
func (s *Session) unlockWriter() {
	w := &s.w
	for {
		w.mu.Lock()
		due := w.pendingLocked()
		w.mu.Unlock()
		if due {
			buf := writeBufs.Get().(*[]byte)
			*buf = s.appendControl((*buf)[:0])
			if len(*buf) > 0 {
				_ = s.writeLocked(*buf)
			}
			writeBufs.Put(buf)
			continue
		}
		<-w.sem
		w.mu.Lock()
		due = w.pendingLocked()
		w.mu.Unlock()
		if !due {
			return
		}
		select {
		case w.sem <- struct{}{}:
		default:
			return // another writer took over
		}
	}
}

// appendControl appends the queued control frames, as many as maxControlBytes allows; the
// rest stay queued. The caller holds sem.
func (s *Session) appendControl(dst []byte) []byte {
	w := &s.w
	w.mu.Lock()
	n := min(len(w.streams), maxControlBytes/FrameHeaderSize)
	streams := w.streams[:n:n]
	if n == len(w.streams) {
		w.streams = nil
	} else {
		w.streams = w.streams[n:]
	}
	pongs := w.pongs
	w.pongs = nil
	ping, pingDue := w.pingID, w.pingDue
	w.pingDue = false
	k := min(len(w.frames), maxControlBytes)
	frames := append([]byte(nil), w.frames[:k]...)
	if k == len(w.frames) {
		w.frames = w.frames[:0]
	} else {
		w.frames = append(w.frames[:0], w.frames[k:]...)
	}
	if len(w.streams) == 0 && len(w.frames) == 0 {
		w.urgent = false
	}
	w.mu.Unlock()
	for _, id := range pongs {
		dst = appendFrameHeader(dst, typePing, flagACK, 0, id)
	}
	if pingDue {
		dst = appendFrameHeader(dst, typePing, flagSYN, 0, ping)
		s.pingSent(ping)
	}
	// Streams' frames before the resets: a stream closed with data unread sends its FIN,
	// then its reset (Close), and the peer reads what came before the FIN.
	for _, st := range streams {
		dst = st.appendControl(dst)
	}
	return append(dst, frames...)
}

// writeStream writes up to writeBatch bytes of p on st, in frames of at most MaxDataFrame,
// with queued control frames in front, in one Write to the connection; with final, the
// write that takes the last of p ends the stream's write side with its last frame.
func (s *Session) writeStream(st *Stream, p []byte, final bool) (int, error) {
	if st.wdl.passed() {
		return 0, ErrTimeout
	}
	n, err := st.takeWindow(min(len(p), writeBatch))
	if err != nil {
		return 0, err
	}
	select {
	case s.w.sem <- struct{}{}:
	case <-st.wdl.wait():
		st.returnWindow(n)
		return 0, ErrTimeout
	case <-s.done:
		return 0, ErrSessionClosed
	}
	buf := writeBufs.Get().(*[]byte)
	b := s.appendControl((*buf)[:0])
	st.mu.Lock()
	if err := st.writableLocked(); err != nil {
		st.mu.Unlock()
		if len(b) > 0 {
			_ = s.writeLocked(b)
		}
		*buf = b
		writeBufs.Put(buf)
		s.unlockWriter()
		return 0, err
	}
	flags := st.flagsLocked()
	fin := final && n == len(p) // the end rides on the last frame of this write
	if fin {
		st.finSent = true
		if st.finRecv {
			s.removeLocked(st)
		}
	}
	st.mu.Unlock()
	frame := int(s.cfg.MaxDataFrame)
	for off := 0; off < n; off += frame {
		end := min(off+frame, n)
		if fin && end == n {
			flags |= flagFIN
		}
		b = appendFrameHeader(b, typeData, flags, st.id, uint32(end-off))
		b = append(b, p[off:end]...)
		flags = 0
	}
	// A stream's write deadline holds while the connection's write is stuck. A deadline at
	// least half ConnectionWriteTimeout away is enforced on the connection itself: if it
	// is still stuck then, the session fails, as it soon would anyway. A sooner one hands
	// the write to a goroutine (writeBounded), which costs a switch.
	var by time.Time
	if dl, ok := st.wdl.when(); ok {
		if dl.Before(time.Now().Add(s.cfg.ConnectionWriteTimeout / 2)) {
			return n, s.writeBounded(st, buf, b)
		}
		by = dl
	}
	err = s.writeLockedBy(b, by)
	*buf = b
	writeBufs.Put(buf)
	s.unlockWriter()
	if err != nil {
		return 0, ErrSessionClosed
	}
	return n, nil
}

// writeBounded writes b (in buf) as writeStream does, but returns by st's write deadline
// even if the connection's write blocks (the peer stopped reading): the write goes on from
// a goroutine of its own, which holds sem until it is done, and the caller gets ErrTimeout.
// Its data is committed then: it goes out unless the connection fails, which
// ConnectionWriteTimeout bounds. Only writes with a deadline sooner than that pay for the
// goroutine.
func (s *Session) writeBounded(st *Stream, buf *[]byte, b []byte) error {
	w := &s.w
	write := func() error {
		err := s.writeLocked(b)
		*buf = b
		writeBufs.Put(buf)
		s.unlockWriter()
		if err != nil {
			return ErrSessionClosed
		}
		return nil
	}
	w.mu.Lock()
	if w.stopped { // closing: Close may be waiting for the session's goroutines already
		w.mu.Unlock()
		return write()
	}
	s.wg.Add(1)
	w.mu.Unlock()
	done := make(chan error, 1)
	go func() {
		defer s.wg.Done()
		done <- write()
	}()
	select {
	case err := <-done:
		return err
	case <-st.wdl.wait():
		return ErrTimeout
	}
}

// writeLocked writes b to the connection; the caller holds sem. A failure is sticky and
// closes the session.
func (s *Session) writeLocked(b []byte) error { return s.writeLockedBy(b, time.Time{}) }

// writeLockedBy is writeLocked with the connection's deadline no later than by, if by is
// not zero.
func (s *Session) writeLockedBy(b []byte, by time.Time) error {
	w := &s.w
	if w.err != nil {
		return w.err
	}
	// Extending the deadline costs a timer update: do it once per half timeout.
	if now := time.Now(); now.Add(s.cfg.ConnectionWriteTimeout/2).After(w.deadline) || !by.IsZero() && by.Before(w.deadline) {
		w.deadline = now.Add(s.cfg.ConnectionWriteTimeout)
		if !by.IsZero() && by.Before(w.deadline) {
			w.deadline = by
		}
		if err := s.conn.SetWriteDeadline(w.deadline); err != nil {
			w.err = err
		}
	}
	if w.err == nil {
		_, w.err = s.conn.Write(b)
	}
	if w.err != nil {
		err := w.err
		if errors.Is(err, os.ErrDeadlineExceeded) {
			err = ErrTimeout
		}
		go s.shutdown(&closedError{cause: err})
		return w.err
	}
	return nil
}
