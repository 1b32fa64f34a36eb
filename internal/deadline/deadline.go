// Package deadline holds what tendril's net.Conn implementations share about deadlines: a
// deadline kept beside the connection's own, for the calls that must fail once it has
// passed without reaching the connection (a Read served from a buffer, a Write that would
// spend a nonce), and the test of whether an error is a deadline's.
package deadline

import (
	"errors"
	"net"
	"os"
	"sync/atomic"
	"time"
)

// Deadline is a deadline the user set. Its methods are safe for concurrent use and take no
// lock. The zero value is no deadline.
type Deadline struct {
	// at is the deadline as nanoseconds since clockStart, 0 for none: compared on the
	// monotonic clock, as the runtime's network poller compares deadlines, whatever the
	// wall clock does.
	at atomic.Int64
}

// clockStart is the origin of Deadline.at.
var clockStart = time.Now()

// Set records t; the zero time clears the deadline.
func (d *Deadline) Set(t time.Time) {
	var v int64
	if !t.IsZero() {
		if v = int64(t.Sub(clockStart)); v == 0 {
			v = 1 // 0 is none
		}
	}
	d.at.Store(v)
}

// Passed reports whether the deadline is set and has passed.
func (d *Deadline) Passed() bool {
	v := d.at.Load()
	return v != 0 && int64(time.Since(clockStart)) >= v
}

// When returns the deadline, or the zero time if none is set.
func (d *Deadline) When() time.Time {
	v := d.at.Load()
	if v == 0 {
		return time.Time{}
	}
	return clockStart.Add(time.Duration(v))
}

// TimedOut reports whether err is a deadline's (os.ErrDeadlineExceeded, or a net.Error
// whose Timeout is true): on a net.Conn such an error leaves the connection usable.
func TimedOut(err error) bool {
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return true
	}
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}
