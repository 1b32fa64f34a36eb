package mux

import (
	"errors"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// The read turn: which goroutine reads the connection.
//
// One goroutine at a time reads the session's frames: the holder of the read turn. When a
// Read finds its stream empty and nobody is reading, it reads the frames itself: what is
// for other streams it hands to them, and it gives the turn up once its own data is there.
// A request/response exchange then wakes one goroutine per message, the one the network
// poller wakes with the data, where a dedicated frame reader wakes two (itself, then the
// stream's reader); between two threads each wake-up is a cross-CPU signal, and it is
// what a small round trip costs most (docs/PERFORMANCE.md, "Round trips").
//
// The session's own frame reader, recvLoop, holds the turn otherwise: from the start,
// while several goroutines wait for frames, while a stream receives bulk data (it then
// decrypts while the stream's reader copies), after a Write waited for window (so that
// the peer's pings are answered while the writer writes), and whenever the turn has been
// free for turnIdle. The connection is never left unread for longer than that, so pings
// are answered, new streams accepted and a peer's close noticed. recvLoop leaves the turn
// only right after handing small data to the one goroutine waiting for frames, which is
// about to come back for more.
//
// A goroutine that holds the turn must be able to stop waiting when its stream is closed or
// its deadline passes, while the frame it waits for may never come, or come slowly: it is
// woken by moving the connection's read deadline into the past, while it reads a header or
// a body. What the wake-up cut short (part of a header, the rest of a body) is kept for the
// next reader, so that no frame is lost (a connection below, such as secio.Conn, keeps a
// record cut by a deadline likewise). A connection whose read deadline cannot be set is
// read by recvLoop alone.
const (
	// turnIdle bounds how long the connection may go unread while the session is open.
	turnIdle = time.Millisecond

	// turnBulkFrame is the smallest data frame that makes recvLoop keep the turn (and a
	// holder hand it to recvLoop): the reader of a bulk stream gains from the decryption
	// running beside it, a request/response exchange from reading its answer itself.
	turnBulkFrame = 16 << 10
)

// turn is the state of the read turn; mu guards it. A stream's mu may be taken while
// turn.mu is held (mayLeave), never turn.mu while a stream's mu is.
type turn struct {
	mu      sync.Mutex
	held    bool    // a goroutine is reading frames
	loop    bool    // ... and it is recvLoop
	holder  *Stream // ... or a Read or Write of this stream
	waiters int     // goroutines blocked on a channel until frames satisfy them
	direct  bool    // the connection's read deadline can be set: Reads may hold the turn
	closed  bool    // the session is closed: recvLoop is not started again

	atRead  bool // the holder is reading the connection: it may be woken
	kicked  bool // the read deadline was moved to wake the holder
	wakeDue bool // wake the holder before it reads its next header

	idle      *time.Timer // starts recvLoop when the turn stays free for idleAfter
	idleArmed bool
	idleAfter time.Duration // turnIdle (tests that need a turn to stay free lengthen it)

	holding atomic.Pointer[Stream] // holder, for a lock-free check in wakeHolder
}

// startTurn sets up the read turn and starts recvLoop.
func (s *Session) startTurn() {
	t := &s.turn
	t.direct = s.conn.SetReadDeadline(time.Time{}) == nil
	t.mu.Lock()
	t.idleAfter = turnIdle
	s.startLoopLocked()
	t.mu.Unlock()
}

// startLoopLocked gives the free turn to a new recvLoop; s.turn.mu is held.
func (s *Session) startLoopLocked() {
	t := &s.turn
	if t.held || t.closed {
		return
	}
	t.held, t.loop = true, true
	s.wg.Add(1)
	go s.recvLoop()
}

// releaseTurnLocked gives the turn up. recvLoop takes it over at once if handOver is set or
// more than woken goroutines wait for frames (woken: those just handed what they waited
// for); otherwise the idle timer starts it later unless a Read takes the turn first.
// s.turn.mu is held.
func (s *Session) releaseTurnLocked(handOver bool, woken int) {
	t := &s.turn
	t.held, t.loop, t.holder, t.wakeDue = false, false, nil, false
	t.holding.Store(nil)
	if t.closed {
		s.dropInput() // nobody parses the rest of the record now
		return
	}
	if handOver || t.waiters > woken {
		s.startLoopLocked()
		return
	}
	if !t.idleArmed {
		t.idleArmed = true
		if t.idle == nil {
			t.idle = time.AfterFunc(t.idleAfter, s.turnIdled)
		} else {
			t.idle.Reset(t.idleAfter)
		}
	}
}

// turnIdled runs from the idle timer: a turn still free goes to recvLoop.
func (s *Session) turnIdled() {
	t := &s.turn
	t.mu.Lock()
	t.idleArmed = false
	s.startLoopLocked()
	t.mu.Unlock()
}

// stopTurn keeps recvLoop from starting again once the session is closed. A record left
// unparsed by the last holder lets go of its slab now (or when a holder gives the turn up):
// nobody will take the turn to parse it.
func (s *Session) stopTurn() {
	t := &s.turn
	t.mu.Lock()
	t.closed = true
	if t.idle != nil {
		t.idle.Stop()
	}
	if !t.held {
		s.dropInput()
	}
	t.mu.Unlock()
}

// await blocks until ch is signalled, the deadline dl passes (ErrTimeout) or the session
// closes (nil: the caller looks at the stream's state again). If nobody reads the
// connection, the caller reads frames itself while it waits. write marks a Write waiting
// for window, after which recvLoop takes the turn over.
func (s *Session) await(st *Stream, ch chan struct{}, dl *deadline, write bool) error {
	t := &s.turn
	t.mu.Lock()
	if !t.held && t.direct && !t.closed {
		t.held, t.holder = true, st
		t.holding.Store(st)
		t.mu.Unlock()
		return s.readFor(st, ch, dl, write)
	}
	t.waiters++
	if !write {
		st.waitingRead = true
	}
	if !t.held {
		s.startLoopLocked() // a closed session, or no direct reads
	}
	t.mu.Unlock()
	var err error
	select {
	case <-ch:
	case <-dl.wait():
		err = ErrTimeout
	case <-s.done:
	}
	t.mu.Lock()
	t.waiters--
	st.waitingRead = false
	t.mu.Unlock()
	return err
}

// expect registers a goroutine about to wait for frames it does not read itself (a stream's
// acknowledgement, an inbound stream, a ping's answer) and makes sure somebody reads them;
// the caller calls expected when it stops waiting.
func (s *Session) expect() {
	t := &s.turn
	t.mu.Lock()
	t.waiters++
	s.startLoopLocked()
	t.mu.Unlock()
}

func (s *Session) expected() {
	t := &s.turn
	t.mu.Lock()
	t.waiters--
	t.mu.Unlock()
}

// readFor reads frames while st, which holds the turn, waits for ch or its deadline; then
// it gives the turn up.
func (s *Session) readFor(st *Stream, ch chan struct{}, dl *deadline, write bool) error {
	t := &s.turn
	var err error
	bulk := write
	for {
		select {
		case <-ch:
		case <-dl.wait():
			err = ErrTimeout
		case <-s.done:
		default:
			ok, got, size, ferr := s.readStepFor(st)
			if !ok {
				continue // woken: look at ch and the deadline again
			}
			if ferr != nil {
				s.readFailed(ferr)
				break
			}
			if got == st && size >= turnBulkFrame {
				bulk = true
			}
			continue
		}
		break
	}
	t.mu.Lock()
	s.releaseTurnLocked(bulk, 0)
	t.mu.Unlock()
	return err
}

// readStepFor reads the next piece of input (readStep) for the holder st, which may be woken
// while it reads (ok false, nothing lost).
func (s *Session) readStepFor(st *Stream) (ok bool, got *Stream, size uint32, err error) {
	t := &s.turn
	t.mu.Lock()
	if t.wakeDue {
		t.wakeDue = false
		t.mu.Unlock()
		return false, nil, 0, nil
	}
	t.atRead = true
	t.mu.Unlock()
	got, size, err = s.readStep()
	t.mu.Lock()
	t.atRead = false
	kicked := t.kicked
	if kicked {
		t.kicked = false
		_ = s.conn.SetReadDeadline(time.Time{})
	}
	t.mu.Unlock()
	if kicked && err != nil && errors.Is(err, os.ErrDeadlineExceeded) {
		return false, nil, 0, nil
	}
	return true, got, size, err
}

// wakeHolder wakes st's Read or Write if it holds the turn and waits for the connection.
func (s *Session) wakeHolder(st *Stream) {
	t := &s.turn
	if t.holding.Load() != st {
		return
	}
	t.mu.Lock()
	if t.holder == st {
		if !t.atRead {
			t.wakeDue = true
		} else if !t.kicked {
			t.kicked = true
			_ = s.conn.SetReadDeadline(aLongTimeAgo)
		}
	}
	t.mu.Unlock()
}

// mayLeave reports whether recvLoop, having just handed small data to got, gives the turn
// up: when got's Read is the only goroutine waiting for frames (it reads the next frames
// itself when it comes back for them). It releases the turn if so.
//
// The waiting Read must be the one the data wakes. A woken Read takes turn.mu before it
// takes the data, so while the data is still buffered it has not come back; once the
// buffer is empty, the Read waiting may be its caller's next one, which found nothing to
// read, and a turn left free would leave it waiting for the idle timer.
func (s *Session) mayLeave(got *Stream) bool {
	t := &s.turn
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.direct || t.closed || t.waiters != 1 || !got.waitingRead {
		return false
	}
	got.mu.Lock()
	unread := got.buf.Len() > 0
	got.mu.Unlock()
	if !unread {
		return false
	}
	s.releaseTurnLocked(false, 1)
	return true
}
