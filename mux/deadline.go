package mux

import (
	"sync"
	"time"
)

// deadline is a settable point in time with a channel closed when it passes, as
// net.Conn's deadlines need: setting it again re-arms or cancels it and wakes nobody
// wrongly. Its timer is made by the first deadline set and kept (re-armed with Reset,
// which allocates nothing) until the stream ends.
type deadline struct {
	owner *Stream // woken when the deadline passes, if it holds the read turn
	mu    sync.Mutex
	timer *time.Timer
	ch    chan struct{} // closed when the deadline passes; nil until a call waits
	// at is the deadline while it is pending, as nanoseconds since clockStart (on the
	// monotonic clock), 0 when none is set, and passedMark once it has passed (until it is
	// set again).
	at int64
}

// passedMark is deadline.at of a deadline that has passed.
const passedMark = -1

// clockStart is the origin of deadline.at: times kept as an offset from it compare on the
// monotonic clock, whatever the wall clock does.
var clockStart = time.Now()

// set arms the deadline; the zero time clears it.
func (d *deadline) set(t time.Time) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.at == passedMark {
		d.ch = nil // a new deadline, or none: a new channel when one is asked for
	}
	if t.IsZero() {
		d.at = 0
		if d.timer != nil {
			d.timer.Stop()
		}
		return
	}
	dur := time.Until(t)
	if dur <= 0 {
		d.at = 0
		if d.timer != nil {
			d.timer.Stop()
		}
		d.expireLocked()
		if d.owner != nil {
			d.owner.s.wakeHolder(d.owner)
		}
		return
	}
	d.at = int64(t.Sub(clockStart))
	if d.timer == nil {
		d.timer = time.AfterFunc(dur, d.expire)
	} else {
		d.timer.Reset(dur)
	}
}

// expire runs from the timer. A firing meant for an earlier setting (the timer was reset
// while its function was starting) finds the deadline not yet due and does nothing.
func (d *deadline) expire() {
	d.mu.Lock()
	if d.at <= 0 || int64(time.Since(clockStart)) < d.at {
		d.mu.Unlock()
		return
	}
	d.expireLocked()
	d.mu.Unlock()
	if d.owner != nil {
		d.owner.s.wakeHolder(d.owner)
	}
}

func (d *deadline) expireLocked() {
	if d.at == passedMark {
		return
	}
	d.at = passedMark
	if d.ch == nil {
		d.ch = make(chan struct{})
	}
	close(d.ch)
}

// wait returns a channel closed once the deadline has passed. It is made on the first wait
// even while no deadline is set, and kept until a passed deadline is set again: a call
// blocked with no deadline must wake when one is set later (to now, or to a time that then
// passes), and only a channel it already holds can wake it.
func (d *deadline) wait() <-chan struct{} {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.ch == nil {
		d.ch = make(chan struct{})
		if d.at == passedMark {
			close(d.ch)
		}
	}
	return d.ch
}

// passed reports whether the deadline has passed: calls made after that fail at once, as
// net.Conn's do, even when they could go through without blocking.
func (d *deadline) passed() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.at == passedMark || (d.at > 0 && int64(time.Since(clockStart)) >= d.at)
}

// when returns the deadline, if one is set (pending or passed; a passed one is reported as
// the zero time).
func (d *deadline) when() (time.Time, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	switch d.at {
	case 0:
		return time.Time{}, false
	case passedMark:
		return time.Time{}, true
	}
	return clockStart.Add(time.Duration(d.at)), true
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
