package memory

import (
	"sync"
	"time"
)

// deadline is a read or write deadline of one end of a connection, kept by the pipe it
// applies to and guarded by the pipe's lock. Its timer only wakes the waiters, which
// then compare the time themselves: a timer that fires for an earlier setting wakes them
// for nothing, and a deadline set again after it passed takes effect as set (net.Conn's
// deadlines can be extended after a timeout).
type deadline struct {
	t     time.Time
	timer *time.Timer // made by the first deadline in the future, reset after
	cond  *sync.Cond  // the waiters to wake (its L is the pipe's lock)
}

// passed reports whether the deadline is set and has passed.
func (d *deadline) passed() bool {
	return !d.t.IsZero() && !time.Now().Before(d.t)
}

// set sets the deadline to t (the zero time clears it) and arms the timer to wake the
// waiters when it passes. It reports whether t has passed already, in which case the
// caller wakes them itself.
func (d *deadline) set(t time.Time) bool {
	d.t = t
	if t.IsZero() {
		d.stop()
		return false
	}
	dur := time.Until(t)
	if dur <= 0 {
		d.stop()
		return true
	}
	if d.timer == nil {
		d.timer = time.AfterFunc(dur, d.fire)
	} else {
		d.timer.Reset(dur)
	}
	return false
}

// stop disarms the timer.
func (d *deadline) stop() {
	if d.timer != nil {
		d.timer.Stop()
	}
}

func (d *deadline) fire() {
	d.cond.L.Lock()
	d.cond.Broadcast()
	d.cond.L.Unlock()
}
