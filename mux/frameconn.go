package mux

import (
	"encoding/binary"
	"math/bits"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// yamux wire constants (hashicorp/yamux spec.md).
const (
	protoVersion     = 0
	typeData         = 0
	typeWindowUpdate = 1
	typePing         = 2

	flagSYN = 1
	flagACK = 2
	flagFIN = 4
	flagRST = 8

	// maxPendingRST bounds the reset frames waiting for a frame boundary.
	maxPendingRST = 4096

	// maxEarly bounds the stream opening and acceptance frames held back to
	// travel with the next frame.
	maxEarly = 4

	// earlyFlushDelay is how long such a frame may wait for a next frame, when
	// nothing else sends it first (a stream opened and left unused, an
	// accepted stream whose reader waits).
	earlyFlushDelay = 500 * time.Microsecond

	// maxPendingPings bounds the peer's pings that yamux is answering: yamux
	// starts a goroutine per ping request, each waiting up to
	// ConnectionWriteTimeout to send its answer. Requests beyond this are
	// dropped (their SYN flag cleared, which yamux ignores).
	maxPendingPings = 64
)

// frameConn is the connection handed to yamux. It understands yamux's framing
// in both directions:
//
//   - Writes: the header of a data frame is held until its body is complete,
//     then header and body go out in one Write to the underlying conn.
//     A stream's opening or acceptance (a window update with SYN or ACK) is
//     held until the next frame, which is usually that stream's first data,
//     and goes out in the same Write; a Read on the session's streams sends
//     a held opening at once, and a timer sends whatever is still held after
//     earlyFlushDelay. Other header-only frames are written at once. Frames
//     larger than maxHold are passed through (header, then body as it comes).
//     Reset frames queued by the session are written only between frames.
//   - Reads: each inbound header is inspected in place before yamux sees it; a
//     stream opening (SYN) beyond the limits has its SYN flag cleared, so that
//     yamux ignores the stream, and a reset is queued to the peer.
//   - Both: stream openings, closes and resets update the tracker.
//
// yamux calls Write from its single send goroutine and Read from its single
// receive goroutine.
type frameConn struct {
	net.Conn
	tr      *tracker
	maxHold int

	// Write side; wmu is held while writing to the wire.
	wmu   sync.Mutex
	whdr  [FrameHeaderSize]byte
	whdrN int     // bytes of a header accumulated in whdr
	hold  *[]byte // held header and partial body (coalescing), or nil
	wleft int     // body bytes of the current frame still to come
	wpass bool    // the current frame's header is already on the wire
	werr  error   // sticky write error

	// Held opening and acceptance frames (see above), in order. earlySyn says
	// whether an opening is among them; earlyArmed (under pmu) whether the
	// timer that flushes them is running.
	early      []byte
	earlyArr   [maxEarly * FrameHeaderSize]byte
	earlySyn   atomic.Bool
	earlyArmed bool
	earlyTimer *time.Timer
	earlyDelay time.Duration // earlyFlushDelay; tests change it

	// Reset frames to send, guarded by pmu (never held while writing).
	pmu      sync.Mutex
	pending  []byte
	flushing bool
	closed   bool
	wg       sync.WaitGroup

	// Ping requests received and not yet answered.
	pings atomic.Int32

	// onClose runs when yamux closes the connection, which it does right after it starts
	// shutting the session down.
	onClose func()

	// onArrive runs on the receive goroutine for each inbound stream admitted, before
	// yamux sees its opening frame.
	onArrive func()

	// Read side.
	rcarry  [FrameHeaderSize]byte // a header split across reads
	rcarryN int
	rout    []byte // bytes ready for the caller (a header read aside)
	rleft   int    // body bytes of the current inbound frame
	rerr    error  // error to return once rout is delivered
}

func newFrameConn(conn net.Conn, tr *tracker, maxHold int) *frameConn {
	return &frameConn{Conn: conn, tr: tr, maxHold: maxHold, earlyDelay: earlyFlushDelay}
}

// bodyLen returns the number of body bytes following header h.
func bodyLen(h []byte) int {
	if h[1] != typeData {
		return 0
	}
	return int(binary.BigEndian.Uint32(h[8:12]))
}

func appendRST(dst []byte, id uint32) []byte {
	dst = append(dst, protoVersion, typeWindowUpdate)
	dst = binary.BigEndian.AppendUint16(dst, flagRST)
	dst = binary.BigEndian.AppendUint32(dst, id)
	return binary.BigEndian.AppendUint32(dst, 0)
}

// Write implements io.Writer for yamux's send loop.
func (c *frameConn) Write(p []byte) (int, error) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if c.werr != nil {
		return 0, c.werr
	}
	total := len(p)
	for len(p) > 0 {
		if c.wleft > 0 { // inside a body
			k := min(c.wleft, len(p))
			if c.wpass {
				if err := c.writeLocked(p[:k]); err != nil {
					return 0, err
				}
			} else {
				*c.hold = append(*c.hold, p[:k]...)
			}
			c.wleft -= k
			p = p[k:]
			if c.wleft == 0 {
				if err := c.endFrameLocked(); err != nil {
					return 0, err
				}
			}
			continue
		}
		if c.whdrN == 0 {
			if err := c.flushPendingLocked(); err != nil {
				return 0, err
			}
			// A whole frame at the start of p goes out as it is.
			if len(p) >= FrameHeaderSize {
				if n := FrameHeaderSize + bodyLen(p); len(p) >= n {
					c.sent(p[:FrameHeaderSize])
					if err := c.frameLocked(p[:n]); err != nil {
						return 0, err
					}
					p = p[n:]
					continue
				}
			}
		}
		k := copy(c.whdr[c.whdrN:], p)
		c.whdrN += k
		p = p[k:]
		if c.whdrN < FrameHeaderSize {
			break // the rest of the header comes with the next Write
		}
		c.whdrN = 0
		h := c.whdr[:]
		c.sent(h)
		switch body := bodyLen(h); {
		case body == 0:
			if err := c.frameLocked(h); err != nil {
				return 0, err
			}
		case FrameHeaderSize+body <= c.maxHold:
			n := FrameHeaderSize + body
			if len(c.early)+n > c.maxHold {
				if err := c.flushEarlyLocked(); err != nil {
					return 0, err
				}
			}
			c.hold = getBuf(len(c.early) + n)
			*c.hold = append(append((*c.hold)[:0], c.early...), h...)
			c.dropEarlyLocked()
			c.wleft, c.wpass = body, false
		default:
			if err := c.frameLocked(h); err != nil {
				return 0, err
			}
			c.wleft, c.wpass = body, true
		}
	}
	return total, nil
}

// isEarly reports whether header-only frame h opens or accepts a stream (and
// does not also close or reset it).
func isEarly(h []byte) bool {
	if h[0] != protoVersion || h[1] != typeWindowUpdate {
		return false
	}
	flags := binary.BigEndian.Uint16(h[2:4])
	return flags&(flagSYN|flagACK) != 0 && flags&(flagFIN|flagRST) == 0
}

// frameLocked writes a whole frame (or the header of a passed-through one),
// preceded by the held frames in the same Write; an opening or acceptance is
// held instead.
func (c *frameConn) frameLocked(f []byte) error {
	if len(f) == FrameHeaderSize && isEarly(f) {
		if len(c.early) == len(c.earlyArr) {
			if err := c.flushEarlyLocked(); err != nil {
				return err
			}
		}
		if len(c.early) == 0 {
			c.early = c.earlyArr[:0]
		}
		c.early = append(c.early, f...)
		if binary.BigEndian.Uint16(f[2:4])&flagSYN != 0 {
			c.earlySyn.Store(true)
		}
		c.armEarly()
		return nil
	}
	if len(c.early) == 0 {
		return c.writeLocked(f)
	}
	if len(f) > FrameHeaderSize {
		if err := c.flushEarlyLocked(); err != nil {
			return err
		}
		return c.writeLocked(f)
	}
	var buf [(maxEarly + 1) * FrameHeaderSize]byte
	b := append(append(buf[:0], c.early...), f...)
	c.dropEarlyLocked()
	return c.writeLocked(b)
}

// flushEarlyLocked writes the held frames, if any.
func (c *frameConn) flushEarlyLocked() error {
	if len(c.early) == 0 {
		return nil
	}
	err := c.writeLocked(c.early)
	c.dropEarlyLocked()
	return err
}

func (c *frameConn) dropEarlyLocked() {
	c.early = c.early[:0]
	c.earlySyn.Store(false)
}

// armEarly starts the timer that sends held frames nothing else sent.
func (c *frameConn) armEarly() {
	c.pmu.Lock()
	defer c.pmu.Unlock()
	if c.earlyArmed || c.closed {
		return
	}
	c.earlyArmed = true
	c.wg.Add(1)
	if c.earlyTimer == nil {
		c.earlyTimer = time.AfterFunc(c.earlyDelay, c.earlyTimeout)
	} else {
		c.earlyTimer.Reset(c.earlyDelay)
	}
}

func (c *frameConn) earlyTimeout() {
	defer c.wg.Done()
	c.pmu.Lock()
	c.earlyArmed = false
	c.pmu.Unlock()
	c.wmu.Lock()
	defer c.wmu.Unlock()
	c.flushAtBoundaryLocked()
}

// flushOpening sends a held stream opening before a Read waits for the
// peer, who cannot answer a stream it has not heard of. It never blocks: if
// a Write is in progress, that Write or the timer sends the held frames.
func (c *frameConn) flushOpening() {
	if !c.earlySyn.Load() || !c.wmu.TryLock() {
		return
	}
	defer c.wmu.Unlock()
	c.flushAtBoundaryLocked()
}

// sent accounts for a header yamux writes.
func (c *frameConn) sent(h []byte) {
	if h[0] == protoVersion && h[1] == typePing && binary.BigEndian.Uint16(h[2:4])&flagACK != 0 {
		c.pings.Add(-1)
		return
	}
	c.tr.frame(h, true)
}

// endFrameLocked completes the current frame and sends queued resets.
func (c *frameConn) endFrameLocked() error {
	if !c.wpass {
		err := c.writeLocked(*c.hold)
		putBuf(c.hold)
		c.hold = nil
		if err != nil {
			return err
		}
	}
	c.wpass = false
	return c.flushPendingLocked()
}

// midFrameLocked reports whether yamux is in the middle of a frame (part of
// it held or on the wire), so that nothing may be written in between.
func (c *frameConn) midFrameLocked() bool {
	return c.wleft > 0 || c.whdrN > 0
}

func (c *frameConn) writeLocked(b []byte) error {
	if _, err := c.Conn.Write(b); err != nil {
		c.werr = err
		return err
	}
	return nil
}

func (c *frameConn) flushPendingLocked() error {
	c.pmu.Lock()
	out := c.pending
	c.pending = nil
	c.pmu.Unlock()
	if len(out) == 0 {
		return nil
	}
	// Our own resets are accounted for when queued (tracker.reset), not here.
	return c.writeLocked(out)
}

// queueRST queues a reset of stream id, written at the next frame boundary
// by yamux's next Write or by a short-lived flusher goroutine. It never
// blocks on the network.
func (c *frameConn) queueRST(id uint32) {
	c.pmu.Lock()
	defer c.pmu.Unlock()
	if c.closed || len(c.pending) >= maxPendingRST*FrameHeaderSize {
		return
	}
	c.pending = appendRST(c.pending, id)
	if !c.flushing {
		c.flushing = true
		c.wg.Add(1)
		go c.flusher()
	}
}

func (c *frameConn) flusher() {
	defer c.wg.Done()
	c.wmu.Lock()
	defer c.wmu.Unlock()
	c.pmu.Lock()
	c.flushing = false
	c.pmu.Unlock()
	c.flushAtBoundaryLocked()
}

// flushAtBoundaryLocked writes what waits for a frame boundary (queued resets, then held
// openings and acceptances) unless yamux is in the middle of a frame, whose end will send
// them. A write failure is sticky and ends the session.
func (c *frameConn) flushAtBoundaryLocked() {
	if c.werr == nil && !c.midFrameLocked() && c.flushPendingLocked() == nil {
		_ = c.flushEarlyLocked()
	}
}

// Close closes the underlying connection first, so that a blocked write
// returns, then stops the flusher.
func (c *frameConn) Close() error {
	if c.onClose != nil {
		c.onClose()
	}
	err := c.Conn.Close()
	c.pmu.Lock()
	c.closed = true
	c.pending = nil
	if c.earlyArmed && c.earlyTimer.Stop() {
		c.earlyArmed = false
		c.wg.Done()
	}
	c.pmu.Unlock()
	return err
}

// wait waits for the flusher goroutine after Close.
func (c *frameConn) wait() { c.wg.Wait() }

// Read implements io.Reader for yamux's receive loop.
func (c *frameConn) Read(p []byte) (int, error) {
	if len(c.rout) > 0 {
		n := copy(p, c.rout)
		c.rout = c.rout[n:]
		return n, nil
	}
	if c.rerr != nil {
		return 0, c.rerr
	}
	if len(p) == 0 {
		return 0, nil
	}
	for {
		if len(p) <= FrameHeaderSize && c.rleft == 0 {
			// A small buffer at a frame start: assemble the header aside.
			for c.rcarryN < FrameHeaderSize {
				n, err := c.Conn.Read(c.rcarry[c.rcarryN:])
				c.rcarryN += n
				if err != nil && c.rcarryN < FrameHeaderSize {
					// the session ends: deliver what there is, then err
					c.rerr = err
					c.rout = c.rcarry[:c.rcarryN]
					c.rcarryN = 0
					n := copy(p, c.rout)
					c.rout = c.rout[n:]
					return n, nil
				}
			}
			c.rcarryN = 0
			c.inspect(c.rcarry[:])
			n := copy(p, c.rcarry[:])
			c.rout = c.rcarry[n:]
			return n, nil
		}
		k := copy(p, c.rcarry[:c.rcarryN])
		c.rcarryN = 0
		n, err := c.Conn.Read(p[k:])
		end := c.scan(p[:n+k])
		if err != nil {
			// the session ends: deliver everything, a cut header included
			c.rcarryN = 0
			return n + k, err
		}
		if end > 0 {
			return end, nil
		}
	}
}

// scan walks the frames in b, inspecting each complete header. A header cut
// at the end of b is moved aside; scan returns how many bytes may be
// delivered.
func (c *frameConn) scan(b []byte) int {
	i := 0
	for i < len(b) {
		if c.rleft > 0 {
			s := min(c.rleft, len(b)-i)
			i += s
			c.rleft -= s
			continue
		}
		if len(b)-i < FrameHeaderSize {
			c.rcarryN = copy(c.rcarry[:], b[i:])
			return i
		}
		c.inspect(b[i : i+FrameHeaderSize])
		i += FrameHeaderSize
	}
	return len(b)
}

// inspect handles one inbound header, possibly clearing its SYN flag.
func (c *frameConn) inspect(h []byte) {
	c.rleft = bodyLen(h)
	if h[0] != protoVersion || h[1] > typePing {
		return
	}
	flags := binary.BigEndian.Uint16(h[2:4])
	if h[1] == typePing {
		if flags&flagSYN != 0 && c.pings.Add(1) > maxPendingPings {
			c.pings.Add(-1)
			binary.BigEndian.PutUint16(h[2:4], flags&^flagSYN)
		}
		return
	}
	if flags&flagSYN != 0 {
		id := binary.BigEndian.Uint32(h[4:8])
		admit, fresh := c.tr.admitInbound(id)
		if !admit {
			binary.BigEndian.PutUint16(h[2:4], flags&^flagSYN)
			c.queueRST(id)
			return
		}
		if fresh && c.onArrive != nil {
			c.onArrive()
		}
	}
	if flags&(flagACK|flagFIN|flagRST) != 0 {
		c.tr.frame(h, false)
	}
}

// Pools of coalescing buffers, so that an idle session holds none. A class
// holds a header and a body of up to a power of two, the usual body sizes (a
// full 1 MiB window is a 1 MiB + 12 byte frame).
const (
	minBufClass = 12 // bodies up to 4 KiB
	maxBufClass = 24 // bodies up to 16 MiB (MaxStreamWindowLimit)
)

var bufPools [maxBufClass - minBufClass + 1]sync.Pool

// bufClass returns the class of a frame of n bytes (n > FrameHeaderSize).
func bufClass(n int) int {
	return max(bits.Len(uint(n-FrameHeaderSize-1)), minBufClass)
}

func getBuf(n int) *[]byte {
	c := bufClass(n)
	if c > maxBufClass {
		b := make([]byte, 0, n)
		return &b
	}
	if p, ok := bufPools[c-minBufClass].Get().(*[]byte); ok {
		return p
	}
	b := make([]byte, 0, 1<<c+FrameHeaderSize)
	return &b
}

func putBuf(p *[]byte) {
	c := bufClass(cap(*p))
	if c > maxBufClass || cap(*p) != 1<<c+FrameHeaderSize {
		return
	}
	*p = (*p)[:0]
	bufPools[c-minBufClass].Put(p)
}

// Stream states in the tracker.
const (
	stInbound    = 1 << iota
	stUnaccepted // inbound, waiting in the accept queue
	stUnacked    // outbound, not yet acknowledged by the peer
	stFinSent
	stFinRecv
)

// tracker follows the streams of a session from the frames on the wire.
//
// A stream lives from its SYN until FIN went both ways or a RST went either
// way, which is exactly when yamux forgets it; live streams count against
// maxStreams. Inbound streams count against backlog until accepted.
//
// unacked mirrors yamux's semaphore of outbound opens awaiting the peer's ACK
// (sized by yamux's AcceptBacklog; yamux's OpenStream blocks while it is
// full): a token is taken by an outbound SYN and returned by an inbound ACK,
// an inbound RST, the closing FINs, or a RST that yamux itself sends (after
// StreamCloseTimeout). A stream reset locally before its ACK keeps its token
// (a ghost) until one of those, as in yamux.
type tracker struct {
	// onRefused runs (without mu) when yamux resets an inbound stream it never queued for
	// AcceptStream: after a local GoAway it refuses the peer's new streams.
	onRefused func()

	mu          sync.Mutex
	maxStreams  int
	backlog     int
	live        map[uint32]uint8
	ghosts      map[uint32]struct{}
	unaccepted  int
	unacked     int // live streams with stUnacked, plus ghosts
	reservedOut int
}

func newTracker(maxStreams, backlog int) *tracker {
	return &tracker{maxStreams: maxStreams, backlog: backlog, live: make(map[uint32]uint8)}
}

// reserve takes a slot for an outbound open, or reports the limit. It also
// reports whether yamux's open semaphore may be full, i.e. whether yamux's
// OpenStream may block.
func (t *tracker) reserve() (ok, mayBlock bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.live)+t.reservedOut >= t.maxStreams {
		return false, false
	}
	t.reservedOut++
	return true, t.unacked+t.reservedOut > t.backlog
}

// unreserve releases a reservation once the open is done (the stream's SYN,
// if it was sent, has been counted by frame).
func (t *tracker) unreserve() {
	t.mu.Lock()
	t.reservedOut--
	t.mu.Unlock()
}

// admitInbound decides whether an inbound SYN for id may create a stream; fresh is false for
// a duplicate, which yamux answers by closing the session.
func (t *tracker) admitInbound(id uint32) (admit, fresh bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, ok := t.live[id]; ok {
		return true, false
	}
	if len(t.live)+t.reservedOut >= t.maxStreams || t.unaccepted >= t.backlog {
		return false, false
	}
	t.live[id] = stInbound | stUnaccepted
	t.unaccepted++
	return true, true
}

// frame updates the state of a stream from a header sent by yamux (outbound)
// or received (inbound; SYNs are handled by admitInbound).
func (t *tracker) frame(h []byte, outbound bool) {
	if h[0] != protoVersion || h[1] > typeWindowUpdate {
		return
	}
	flags := binary.BigEndian.Uint16(h[2:4])
	if flags&(flagSYN|flagACK|flagFIN|flagRST) == 0 {
		return
	}
	id := binary.BigEndian.Uint32(h[4:8])
	if t.frameLocked(id, flags, outbound) && t.onRefused != nil {
		t.onRefused()
	}
}

// frameLocked does frame's work under t.mu; it reports whether yamux refused an inbound
// stream that was waiting to be accepted.
func (t *tracker) frameLocked(id uint32, flags uint16, outbound bool) (refused bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, ok := t.ghosts[id]; ok && (flags&flagRST != 0 || !outbound && flags&(flagACK|flagFIN) != 0) {
		delete(t.ghosts, id)
		t.unacked--
	}
	st, ok := t.live[id]
	if outbound && flags&flagSYN != 0 && !ok {
		st, ok = stUnacked, true
		t.live[id] = st
		t.unacked++
	}
	if !ok {
		return false
	}
	if flags&flagRST != 0 {
		t.removeLocked(id, st)
		return outbound && st&stUnaccepted != 0
	}
	if !outbound && flags&flagACK != 0 && st&stUnacked != 0 {
		st &^= stUnacked
		t.unacked--
	}
	if outbound && flags&flagACK != 0 && st&stUnaccepted != 0 {
		// yamux acknowledges a stream as it hands it to AcceptStream. The peer may
		// open another as soon as it sees the ACK, so the stream leaves the backlog
		// now, not when AcceptStream returns.
		st &^= stUnaccepted
		t.unaccepted--
	}
	if flags&flagFIN != 0 {
		if outbound {
			st |= stFinSent
		} else {
			st |= stFinRecv
		}
		if st&(stFinSent|stFinRecv) == stFinSent|stFinRecv {
			t.removeLocked(id, st)
			return false
		}
	}
	t.live[id] = st
	return false
}

// accepted records that an inbound stream left the accept queue.
func (t *tracker) accepted(id uint32) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if st, ok := t.live[id]; ok && st&stUnaccepted != 0 {
		t.live[id] = st &^ stUnaccepted
		t.unaccepted--
	}
}

// reset forgets a stream reset locally; an unacknowledged one stays a ghost.
func (t *tracker) reset(id uint32) {
	t.mu.Lock()
	defer t.mu.Unlock()
	st, ok := t.live[id]
	if !ok {
		return
	}
	if st&stUnacked != 0 {
		if t.ghosts == nil {
			t.ghosts = make(map[uint32]struct{})
		}
		t.ghosts[id] = struct{}{}
		st &^= stUnacked // the token moves to the ghost
		t.live[id] = st
	}
	t.removeLocked(id, st)
}

func (t *tracker) removeLocked(id uint32, st uint8) {
	if st&stUnaccepted != 0 {
		t.unaccepted--
	}
	if st&stUnacked != 0 {
		t.unacked--
	}
	delete(t.live, id)
}

// finReceived reports whether the peer ended stream id: its FIN arrived, or
// the stream is gone (after FINs both ways or a reset).
func (t *tracker) finReceived(id uint32) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	st, ok := t.live[id]
	return !ok || st&stFinRecv != 0
}

func (t *tracker) count() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.live)
}
