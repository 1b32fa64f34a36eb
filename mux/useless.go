package mux

import (
	"fmt"
	"time"
)

// A peer can make this side work with frames that cost it next to nothing and achieve
// nothing: a stream opened and reset before this side answered it (HTTP/2's "rapid reset",
// CVE-2023-44487: a yamux SYN is 12 bytes, and what serves a new stream costs far more),
// a stream opened when the limits refuse it, a frame for a stream that does not exist, an
// empty frame with no flags. Every session meters them, as HTTP/2 servers now do
// (nginx, Go's net/http2, HAProxy's "glitches"), and closes a session whose peer sends
// more than Config.UselessFrames per second on average: a peer following the protocol
// sends few or none.

// uselessMeter is a rate limit on useless frames in the form of a virtual clock (the
// generic cell rate algorithm): every frame moves due on by interval, and a frame that
// finds due more than burst ahead of now is one too many. It is used only by the holder of
// the read turn, which is one goroutine at a time.
type uselessMeter struct {
	interval time.Duration // 1/rate; 0: unmetered
	burst    time.Duration // how far ahead of now due may run: burst frames' worth
	due      time.Time
}

// uselessBurst is how many seconds' worth of useless frames may come at once.
const uselessBurst = 10

func newUselessMeter(perSecond int) uselessMeter {
	if perSecond <= 0 {
		return uselessMeter{}
	}
	iv := time.Second / time.Duration(perSecond)
	return uselessMeter{interval: iv, burst: uselessBurst * time.Second}
}

// add counts one useless frame (what describes them, for the error) at now, and returns a
// *misbehavingError if the peer has sent too many.
func (m *uselessMeter) add(now time.Time, what string) error {
	if m.interval == 0 {
		return nil
	}
	if m.due.Before(now) {
		m.due = now
	}
	m.due = m.due.Add(m.interval)
	if m.due.Sub(now) > m.burst {
		return &misbehavingError{what: what, rate: int(time.Second / m.interval)}
	}
	return nil
}

// misbehavingError is ErrPeerMisbehaving with what the peer sent too much of.
type misbehavingError struct {
	what string
	rate int
}

func (e *misbehavingError) Error() string {
	return fmt.Sprintf("%s: useless frames (%s) beyond %d per second", ErrPeerMisbehaving.Error(), e.what, e.rate)
}

func (e *misbehavingError) Unwrap() error { return ErrPeerMisbehaving }
