package secio

import (
	"net"
	"sync"
	"time"
)

// Write-behind: a large frame is sealed by the writing goroutine and handed
// to a short-lived goroutine that writes it to the connection, so that
// sealing the next frame overlaps the system call that sends this one.
// On a bulk transfer over loopback the two cost about the same, and a
// single goroutine doing both is the sender's bottleneck.
const (
	// writeBehindMin is the smallest frame plaintext that is written behind
	// when nothing is queued. Smaller frames (requests, window updates) are
	// written by the caller: handing them over would add a goroutine switch
	// to every round trip for no overlap worth having.
	writeBehindMin = 16 << 10

	// writeBehindDepth bounds the sealed frames waiting for the writer;
	// a Write blocks while that many are waiting.
	writeBehindDepth = 2
)

// closeDrainTimeout bounds how long Close waits for queued frames to reach
// the connection (as crypto/tls bounds its close_notify); tests shorten it.
var closeDrainTimeout = 5 * time.Second

// writeBehind is the queue of sealed frames and the goroutine draining it,
// made for a Conn at its first large frame. The goroutine exists only while
// frames are pending, so an idle Conn has none. Starting it allocates
// nothing (its function value is made once).
type writeBehind struct {
	q    chan *[]byte // sealed frames in wire order
	conn net.Conn     // where they go
	run  func()       // w.writeLoop, bound once

	mu      sync.Mutex
	pending int       // frames pushed and not yet written
	running bool      // a writer goroutine is draining q
	drained sync.Cond // signalled when running becomes false; L is &mu
	err     error     // first write error, sticky
}

func newWriteBehind(conn net.Conn) *writeBehind {
	w := &writeBehind{q: make(chan *[]byte, writeBehindDepth), conn: conn}
	w.run = w.writeLoop
	w.drained.L = &w.mu
	return w
}

// active reports whether frames are queued, in which case a new frame must
// be queued behind them to keep the order. It returns the writer's error,
// if any.
func (w *writeBehind) active() (bool, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.pending > 0, w.err
}

// push queues frame (a pooled buffer, owned by the queue from now on),
// starting the writer if none runs. It blocks while writeBehindDepth frames
// are waiting. Callers are serialised (outHalf.mu).
func (w *writeBehind) push(frame *[]byte) error {
	w.mu.Lock()
	if w.err != nil {
		w.mu.Unlock()
		putBuffer(frame)
		return w.err
	}
	w.pending++
	if !w.running {
		w.running = true
		go w.run()
	}
	w.mu.Unlock()
	// Counted before it is sent, so the writer cannot exit between the two.
	w.q <- frame
	return nil
}

// writeLoop writes queued frames until none is pending. After a write error
// it only gives the remaining buffers back.
func (w *writeBehind) writeLoop() {
	var failed bool
	for {
		frame := <-w.q
		if !failed {
			if _, err := w.conn.Write(*frame); err != nil {
				failed = true
				w.mu.Lock()
				w.err = err
				w.mu.Unlock()
			}
		}
		putBuffer(frame)
		w.mu.Lock()
		w.pending--
		if w.pending == 0 {
			w.running = false
			w.drained.Broadcast()
			w.mu.Unlock()
			return
		}
		w.mu.Unlock()
	}
}

// drain waits until the queued frames are written, bounded by
// closeDrainTimeout or the user's earlier write deadline (the zero time for
// none), after which the writer's blocked write fails and it exits.
// Close calls it with the Conn already marked closed.
func (w *writeBehind) drain(deadline time.Time) {
	conn := w.conn
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.running {
		return
	}
	limit := time.Now().Add(closeDrainTimeout)
	if !deadline.IsZero() && deadline.Before(limit) {
		limit = deadline
	}
	_ = conn.SetWriteDeadline(limit)
	_ = conn.SetReadDeadline(time.Unix(1, 0)) // a blocked Read returns ErrClosed now
	for w.running {
		w.drained.Wait()
	}
}
