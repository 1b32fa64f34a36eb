package mux

import (
	"sync"
	"time"
)

// deadline is a settable point in time with a channel closed when it passes, as
// net.Conn's deadlines need: setting it again re-arms or cancels it and wakes nobody
// wrongly. Its timer exists only while a deadline is set.
type deadline struct {
	owner  *Stream // woken when the deadline passes, if it holds the read turn
	mu     sync.Mutex
	timer  *time.Timer
	ch     chan struct{} // closed when the deadline passed; nil until needed
	passed bool
}

// set arms the deadline; the zero time clears it.
func (d *deadline) set(t time.Time) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.timer != nil {
		d.timer.Stop()
		d.timer = nil
	}
	if t.IsZero() {
		if d.passed {
			d.passed, d.ch = false, nil
		}
		return
	}
	dur := time.Until(t)
	if dur <= 0 {
		d.expireLocked()
		if d.owner != nil {
			d.owner.s.wakeHolder(d.owner)
		}
		return
	}
	if d.passed {
		d.passed, d.ch = false, nil
	}
	d.timer = time.AfterFunc(dur, d.expire)
}

func (d *deadline) expire() {
	d.mu.Lock()
	d.expireLocked()
	d.mu.Unlock()
	if d.owner != nil {
		d.owner.s.wakeHolder(d.owner)
	}
}

func (d *deadline) expireLocked() {
	if d.passed {
		return
	}
	d.passed = true
	if d.ch == nil {
		d.ch = make(chan struct{})
	}
	close(d.ch)
}

// wait returns a channel closed once the deadline has passed (nil, which blocks forever,
// while no deadline is set).
func (d *deadline) wait() <-chan struct{} {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.ch == nil && (d.timer != nil || d.passed) {
		d.ch = make(chan struct{})
		if d.passed {
			close(d.ch)
		}
	}
	return d.ch
}

// armed reports whether a deadline is set (pending or passed).
func (d *deadline) armed() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.timer != nil || d.passed
}

// stop releases the timer.
func (d *deadline) stop() {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.timer != nil {
		d.timer.Stop()
		d.timer = nil
	}
}
