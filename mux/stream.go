package mux

import (
	"io"
	"net"
	"sync"
	"time"
)

// Stream is one bidirectional stream of a Session. It is a net.Conn, with deadlines. Read
// and Write may be called concurrently with each other, but not each with itself.
//
// Closing: CloseWrite sends end-of-stream to the peer (its reads return io.EOF once they
// have consumed the data) and keeps the read side open. Close does the same and also
// closes the read side, and the stream is freed at once: data the peer still sends is
// discarded and answered with a reset, as is data left unread at Close, so that the
// peer's writes fail with ErrStreamReset instead of waiting for window (its reads still
// get everything this side wrote). Reset aborts the stream in both directions; a reset by
// the peer after its own end-of-stream leaves what it sent readable. A stream is freed, and its memory
// returned to the budget, as soon as it ends: both sides closed their write sides, either
// reset it, or this side closed it with Close.
type Stream struct {
	s       *Session
	readCh  chan struct{} // wakes a blocked Read
	writeCh chan struct{} // wakes a blocked Write
	rdl     deadline
	wdl     deadline
	id      uint32
	inbound bool

	waitingRead bool // a Read waits on readCh (guarded by the session's turn.mu)

	// The fields below are guarded by mu. They are ordered to pack (an idle stream is what a
	// node has most of), and grouped by meaning where that costs nothing.
	mu        sync.Mutex
	resetErr  error // non-nil once reset, by either side
	openTimer *time.Timer
	afterEnd  *endHook // AfterEnd's functions (a list), run once when the stream ends

	// Receive side: recvCredit + buf.Len() + consumed == recvWindow.
	buf   recvBuf
	epoch time.Time // start of the half window being read (window growth)
	// reserved is what the stream holds of the budget: at least its buffered chunks
	// (buf.held), and once its window has grown (grown), at least the whole window plus a
	// chunk (see Budget and floor).
	reserved   int64
	recvWindow uint32 // the window granted, auto-tuned
	recvCredit uint32 // bytes the peer may still send
	consumed   uint32 // bytes read and not yet granted back
	epochRead  uint32 // bytes read since epoch
	grant      uint32 // window to grant with the stream's next frame

	sendWindow uint32 // send side: what the peer lets this side send

	// What this side still has to tell the peer, sent with the stream's next frame.
	synPending bool // outbound: the peer has not heard of the stream yet
	ackPending bool // inbound: accepted, acknowledgement not sent yet
	finPending bool // CloseWrite called, FIN not written yet

	// The stream's life, as both sides see it.
	finSent    bool // this side closed its write side (FIN queued or sent)
	finRecv    bool // the peer closed its write side
	readClosed bool // Close: incoming data is discarded
	resetLate  bool // the peer reset the stream after its FIN: what it sent stays readable
	acked      bool // outbound: the peer acknowledged the stream
	removed    bool // no longer in the session's table
	grown      bool // the window has grown: it is reserved whole

	// What keeps the stream counted against MaxStreams (its slot): being in the session's
	// table, a Serve handler owning it, or a control frame of it waiting in the writer's
	// queue. A stream is retired, and its slot free, once none of the three holds, so that
	// streams the peer opens and resets at once still count while this side works on them.
	serving bool // Serve owns it: its handler runs, or it waits for one
	queued  bool // in the writer's control queue (queueStream)
	retired bool
}

var _ net.Conn = (*Stream)(nil)

// aLongTimeAgo is a deadline in the past, used to wake blocked calls.
var aLongTimeAgo = time.Unix(1, 0)

func newStream(s *Session, id uint32, inbound bool) *Stream {
	st := &Stream{
		s: s, id: id, inbound: inbound,
		readCh: make(chan struct{}, 1), writeCh: make(chan struct{}, 1),
		synPending: !inbound, ackPending: inbound,
		recvWindow: InitialStreamWindow, recvCredit: InitialStreamWindow,
		sendWindow: InitialStreamWindow, epoch: time.Now(),
	}
	st.rdl.owner, st.wdl.owner = st, st
	return st
}

func notify(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// signal wakes the Read or Write waiting on ch, also when it holds the read turn.
func (st *Stream) signal(ch chan struct{}) {
	notify(ch)
	st.s.wakeHolder(st)
}

func (st *Stream) wake() {
	notify(st.readCh)
	notify(st.writeCh)
	st.s.wakeHolder(st)
}

// Buffered returns the bytes received on the stream and not read yet.
func (st *Stream) Buffered() int {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.buf.Len()
}

// StreamID returns the yamux stream ID (odd for streams opened by the client side, even
// for the server side).
func (st *Stream) StreamID() uint32 { return st.id }

// Session returns the session the stream belongs to.
func (st *Stream) Session() *Session { return st.s }

// Read reads data. It returns io.EOF after the peer closed its write side and all data was
// read, ErrStreamReset after a reset, ErrStreamClosed after Close, ErrSessionClosed when
// the session ended without the peer closing the stream, and ErrTimeout when the read
// deadline passes.
func (st *Stream) Read(p []byte) (int, error) {
	if st.rdl.passed() {
		return 0, ErrTimeout
	}
	st.mu.Lock()
	for {
		if st.buf.Len() > 0 && (st.resetErr == nil || st.resetLate) && !st.readClosed {
			if len(p) == 0 {
				st.mu.Unlock()
				return 0, nil
			}
			n := st.buf.Read(p)
			grant := st.consumedLocked(n)
			st.trimLocked()
			st.mu.Unlock()
			if grant {
				if st.s.RTT() == 0 {
					// Windows grow only with a measured round trip: the first bulk
					// stream measures it, with a ping riding with its window update.
					st.s.startPing(false)
				}
				st.s.queueStream(st, true)
			}
			return n, nil
		}
		switch {
		case st.resetLate && !st.readClosed:
			st.mu.Unlock()
			return 0, io.EOF
		case st.resetErr != nil:
			err := st.resetErr
			st.mu.Unlock()
			return 0, err
		case st.readClosed:
			st.mu.Unlock()
			return 0, ErrStreamClosed
		case st.finRecv:
			st.mu.Unlock()
			return 0, io.EOF
		case st.s.IsClosed():
			st.mu.Unlock()
			return 0, ErrSessionClosed
		}
		announce := st.synPending
		st.mu.Unlock()
		if announce {
			// The peer cannot answer a stream it has not heard of.
			st.s.queueStream(st, true)
		}
		if err := st.s.await(st, st.readCh, &st.rdl, false); err != nil {
			return 0, err
		}
		st.mu.Lock()
	}
}

// maxCreditStep caps how much read data a window update returns: a quarter of a large
// window is megabytes the sender waits for, a round trip's worth on a long path, while one
// 12-byte update per MiB costs nothing. A stream whose 8 MiB window limits it then keeps
// fifteen sixteenths of it in flight on average instead of seven eighths.
const maxCreditStep = 1 << 20

// minWindowGrowth is the least a window grows by when the budget has less left than a
// doubling: less than one data frame of the default size is not worth a window update.
const minWindowGrowth = 64 << 10

// consumedLocked accounts for n bytes read and reports whether a window update is due:
// once a quarter of the window was read, or maxCreditStep of a large one, so that seven
// eighths of the window or more stay in flight on a long path (granting at half the window
// leaves three quarters).
//
// The window doubles (or takes what the budget has left, down to minWindowGrowth) when half of it was read within 1.5
// round trips: the window, not the reader, limits the stream (a window-limited stream reads
// half its window in well under a round trip; measured through a delay proxy). Behind a
// bottleneck of rate B the window stops at about 3·B·RTT, so a bulk stream keeps the link
// busy without queueing much more than two round trips of data in front of the session's
// other streams.
func (st *Stream) consumedLocked(n int) bool {
	if st.removed || st.finRecv {
		return false // nothing more comes: no update needed
	}
	st.consumed += uint32(n)
	st.epochRead += uint32(n)
	if st.consumed < min(st.recvWindow/4, maxCreditStep) {
		return false
	}
	grant := st.consumed
	st.consumed = 0
	if st.epochRead >= st.recvWindow/2 {
		now := time.Now()
		s := st.s
		if rtt := s.RTT(); rtt > 0 && st.recvWindow < s.cfg.MaxStreamWindow && now.Sub(st.epoch) < rtt*3/2 {
			// A stream whose window grows is moving bulk data: from now on its whole
			// window is reserved (its floor), so that it is never refused halfway.
			want := min(st.recvWindow, s.cfg.MaxStreamWindow-st.recvWindow)
			backing := max(int64(st.recvWindow)+chunkSize-st.reserved, 0)
			if got := s.budget.reserveUpTo(backing+int64(want), backing+minWindowGrowth); got > 0 {
				grow := uint32(got - backing)
				st.reserved += got
				st.recvWindow += grow
				st.grown = true
				grant += grow
			}
		}
		st.epoch, st.epochRead = now, 0
	}
	st.recvCredit += grant
	st.grant += grant
	return true
}

// Write writes data, blocking while the peer's window is full. It returns ErrStreamClosed
// after CloseWrite or Close, ErrStreamReset after a reset, ErrSessionClosed when the
// session is gone, and ErrTimeout when the write deadline passes (some of p may have been
// written).
func (st *Stream) Write(p []byte) (int, error) { return st.write(p, false) }

// WriteFinal writes p and then half-closes the stream as CloseWrite does, the end of the
// stream riding on p's last frame: a request and its end, or an answer and its end, are
// one frame instead of two.
func (st *Stream) WriteFinal(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, st.CloseWrite()
	}
	return st.write(p, true)
}

func (st *Stream) write(p []byte, final bool) (int, error) {
	total := 0
	for len(p) > 0 {
		n, err := st.s.writeStream(st, p, final)
		total += n
		p = p[n:]
		if err != nil {
			return total, err
		}
	}
	return total, nil
}

// writableLocked returns why the stream cannot be written, or nil.
func (st *Stream) writableLocked() error {
	switch {
	case st.resetErr != nil:
		return st.resetErr
	case st.finSent:
		return ErrStreamClosed
	case st.s.IsClosed():
		return ErrSessionClosed
	}
	return nil
}

// takeWindow waits until the peer's window is open and takes up to n bytes of it.
func (st *Stream) takeWindow(n int) (int, error) {
	st.mu.Lock()
	for {
		if err := st.writableLocked(); err != nil {
			st.mu.Unlock()
			return 0, err
		}
		if st.sendWindow > 0 {
			k := min(uint32(n), st.sendWindow)
			st.sendWindow -= k
			st.mu.Unlock()
			return int(k), nil
		}
		st.mu.Unlock()
		if err := st.s.await(st, st.writeCh, &st.wdl, true); err != nil {
			return 0, err
		}
		st.mu.Lock()
	}
}

// returnWindow gives back window taken for a write that did not happen.
func (st *Stream) returnWindow(n int) {
	st.mu.Lock()
	st.sendWindow += uint32(n)
	st.mu.Unlock()
	notify(st.writeCh)
}

// flagsLocked returns the flags the stream's next frame carries and clears them; a SYN
// starts the open timeout.
func (st *Stream) flagsLocked() uint16 {
	var f uint16
	if st.synPending {
		f |= flagSYN
		st.synPending = false
		if t := st.s.cfg.StreamOpenTimeout; t > 0 && !st.acked && !st.removed {
			st.openTimer = time.AfterFunc(t, st.s.openTimedOut)
		}
	}
	if st.ackPending {
		f |= flagACK
		st.ackPending = false
	}
	return f
}

// appendControl appends the stream's pending control frame, if any: a window update
// carrying its SYN, ACK and FIN flags and the window granted since the last one.
func (st *Stream) appendControl(dst []byte) []byte {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.queued = false
	st.retireLocked()
	if st.resetErr != nil {
		return dst // a reset says it all (or the peer never heard of the stream)
	}
	flags := st.flagsLocked()
	if st.finPending {
		flags |= flagFIN
		st.finPending = false
	}
	grant := st.grant
	st.grant = 0
	if flags == 0 && grant == 0 {
		return dst
	}
	return appendFrameHeader(dst, typeWindowUpdate, flags, st.id, grant)
}

// CloseWrite half-closes the stream: the peer reads io.EOF after the data already
// written; this side can still read.
func (st *Stream) CloseWrite() error {
	st.mu.Lock()
	if st.resetErr != nil {
		err := st.resetErr
		st.mu.Unlock()
		return err
	}
	if st.finSent {
		st.mu.Unlock()
		return nil
	}
	if st.s.IsClosed() {
		st.mu.Unlock()
		return ErrSessionClosed
	}
	st.finSent, st.finPending = true, true
	if st.finRecv {
		st.s.removeLocked(st)
	}
	st.mu.Unlock()
	st.signal(st.writeCh)
	st.s.queueStream(st, true)
	return nil
}

// Close closes both directions locally: it sends end-of-stream like CloseWrite, and
// blocked and later Reads and Writes fail with ErrStreamClosed. Data the peer still sends
// is discarded; the stream is freed at once.
func (st *Stream) Close() error {
	st.mu.Lock()
	if st.readClosed || st.resetErr != nil {
		st.mu.Unlock()
		return nil
	}
	st.readClosed = true
	// Data the peer sent that nobody will read gets the stream reset, as TCP resets a
	// connection closed with data unread: a peer waiting for window would wait for ever.
	// The reset follows this side's FIN, so the peer still reads what this side wrote.
	unread := !st.finRecv && st.buf.Len() > 0 && !st.synPending
	st.buf.free()
	send := !st.finSent && !st.s.IsClosed()
	if send {
		st.finSent, st.finPending = true, true
	}
	if !st.finRecv && st.consumed > 0 {
		// Read but not yet granted: returned with the FIN, so that a peer blocked on it
		// sends, and learns from the reset its data gets that nobody reads (noStream).
		st.grant += st.consumed
		st.recvCredit += st.consumed
		st.consumed = 0
		send = !st.s.IsClosed()
	}
	st.s.removeLocked(st)
	st.mu.Unlock()
	st.wake()
	st.rdl.stop()
	st.wdl.stop()
	if send {
		st.s.queueStream(st, true)
	}
	if unread && !st.s.IsClosed() {
		st.s.queueReset(st.id)
	}
	return nil
}

// Reset aborts the stream: the peer's reads and writes fail with ErrStreamReset, and so do
// this side's. Buffered data is dropped and the stream freed at once.
func (st *Stream) Reset() error {
	st.mu.Lock()
	if st.resetErr != nil {
		if st.resetLate { // this side gives up on what the peer sent, too
			st.resetLate = false
			st.buf.free()
			st.releaseIfDoneLocked()
		}
		st.mu.Unlock()
		return nil
	}
	st.resetErr = ErrStreamReset
	announced := !st.synPending
	ended := st.finSent && st.finRecv
	st.buf.free()
	st.s.removeLocked(st)
	st.mu.Unlock()
	st.wake()
	st.rdl.stop()
	st.wdl.stop()
	if announced && !ended && !st.s.IsClosed() {
		st.s.queueReset(st.id)
	}
	return nil
}

// remoteResetLocked handles the peer's RST. After the peer's FIN its data is complete, so
// the reset only stops this side's writes (the peer will not read them, as QUIC's
// STOP_SENDING says): what it sent stays readable, then io.EOF.
func (st *Stream) remoteResetLocked() {
	if st.resetErr != nil {
		return
	}
	st.resetErr = ErrStreamReset
	if st.finRecv && !st.readClosed && st.buf.Len() > 0 {
		st.resetLate = true
	} else {
		st.buf.free()
	}
	st.s.removeLocked(st)
}

// coverLocked makes the stream's reservation cover need bytes of chunks, reporting whether
// the budget had them.
func (st *Stream) coverLocked(need int64) bool {
	if need <= st.reserved {
		return true
	}
	if !st.s.budget.reserve(need - st.reserved) {
		return false
	}
	st.reserved = need
	return true
}

// floor is the reservation a stream keeps whatever it buffers: none until its window grows,
// then the whole window and a chunk.
func (st *Stream) floor() int64 {
	if !st.grown {
		return 0
	}
	return int64(st.recvWindow) + chunkSize
}

// trimLocked gives back what the stream holds reserved beyond its chunks and its floor,
// after a Read: a stream that is not moving bulk data holds only what it buffers.
func (st *Stream) trimLocked() {
	if st.removed {
		st.releaseIfDoneLocked()
		return
	}
	if excess := st.reserved - max(int64(st.buf.held), st.floor()); excess > 0 {
		st.s.budget.release(excess)
		st.reserved -= excess
	}
}

// releaseIfDoneLocked returns the stream's budget once it is out of the session's table
// and holds no data.
func (st *Stream) releaseIfDoneLocked() {
	if st.removed && st.buf.Len() == 0 && st.reserved > 0 {
		st.releaseLocked()
	}
}

// releaseLocked returns the stream's whole reservation to the budget.
func (st *Stream) releaseLocked() {
	st.s.budget.release(st.reserved)
	st.reserved = 0
	st.s.mu.Lock()
	delete(st.s.holding, st)
	st.s.mu.Unlock()
}

// overBudgetLocked resets a stream whose arriving data does not fit the memory budget: the
// peer sent what its window allowed, but this side cannot hold it now. The caller wakes
// the stream once it has let go of st.mu.
func (st *Stream) overBudgetLocked() {
	st.s.log.Debug("mux: resetting a stream: memory budget exhausted", "stream", st.id, "budget", st.s.budget.String())
	st.resetErr = errOverBudget
	st.buf.free()
	st.s.removeLocked(st)
	st.s.queueReset(st.id)
}

// SetDeadline sets the read and write deadlines.
func (st *Stream) SetDeadline(t time.Time) error {
	st.rdl.set(t)
	st.wdl.set(t)
	return nil
}

// SetReadDeadline sets the deadline for blocked and future Reads.
func (st *Stream) SetReadDeadline(t time.Time) error {
	st.rdl.set(t)
	return nil
}

// SetWriteDeadline sets the deadline for blocked and future Writes.
func (st *Stream) SetWriteDeadline(t time.Time) error {
	st.wdl.set(t)
	return nil
}

// LocalAddr returns the local address of the session's connection.
func (st *Stream) LocalAddr() net.Addr { return st.s.LocalAddr() }

// RemoteAddr returns the remote address of the session's connection.
func (st *Stream) RemoteAddr() net.Addr { return st.s.RemoteAddr() }

// retireLocked frees the stream's slot (see Stream.serving) once nothing holds it any more.
func (st *Stream) retireLocked() {
	if st.retired || !st.removed || st.serving || st.queued {
		return
	}
	st.retired = true
	st.s.mu.Lock()
	st.s.live--
	st.s.mu.Unlock()
}

// endHook is a function registered with AfterEnd.
type endHook struct {
	f    func()
	next *endHook
	done bool // run or stopped
}

// AfterEnd arranges for f to run on a goroutine of its own once the stream has ended: reset
// by either side, closed by both, closed here with Close, or its session closed. If the
// stream has ended already, f starts at once. Calling the returned stop prevents f from
// running if it has not started, and reports whether it did so; as context.AfterFunc, for
// code that serves a stream and must learn that the peer gave up on it (a handler blocked
// elsewhere than on the stream's own I/O).
func (st *Stream) AfterEnd(f func()) (stop func() bool) {
	h := &endHook{f: f}
	st.mu.Lock()
	if st.removed {
		h.done = true
		st.mu.Unlock()
		go f()
	} else {
		h.next, st.afterEnd = st.afterEnd, h
		st.mu.Unlock()
	}
	return func() bool {
		st.mu.Lock()
		defer st.mu.Unlock()
		stopped := !h.done
		h.done = true
		return stopped
	}
}

// endedLocked starts the stream's AfterEnd functions, once.
func (st *Stream) endedLocked() {
	for h := st.afterEnd; h != nil; h = h.next {
		if !h.done {
			h.done = true
			go h.f()
		}
	}
	st.afterEnd = nil
}
