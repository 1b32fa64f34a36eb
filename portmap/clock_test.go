package portmap_test

import (
	"sync"
	"testing"
	"time"

	"github.com/tendril-p2p/tendril/portmap"
)

// fakeClock is a Clock that moves only when the test advances it. Every timer the
// Mapper creates is announced on waits, so a test knows what the Mapper waits for.
type fakeClock struct {
	mu     sync.Mutex
	now    time.Time
	timers []*fakeTimer
	waits  chan time.Duration
}

type fakeTimer struct {
	c        chan time.Time
	deadline time.Time
	stopped  bool
}

func newFakeClock() *fakeClock {
	return &fakeClock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), waits: make(chan time.Duration, 64)}
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) NewTimer(d time.Duration) portmap.Timer {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := &fakeTimer{c: make(chan time.Time, 1), deadline: c.now.Add(d)}
	c.timers = append(c.timers, t)
	c.waits <- d
	return &fakeTimerHandle{c: c, t: t}
}

type fakeTimerHandle struct {
	c *fakeClock
	t *fakeTimer
}

func (h *fakeTimerHandle) C() <-chan time.Time { return h.t.c }
func (h *fakeTimerHandle) Stop() bool {
	h.c.mu.Lock()
	defer h.c.mu.Unlock()
	was := !h.t.stopped
	h.t.stopped = true
	return was
}

// Advance moves the clock and fires the timers due.
func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	keep := c.timers[:0]
	for _, t := range c.timers {
		if t.stopped {
			continue
		}
		if !t.deadline.After(c.now) {
			t.stopped = true
			t.c <- c.now
			continue
		}
		keep = append(keep, t)
	}
	c.timers = keep
}

// nextWait returns the wait the Mapper scheduled after its latest attempt.
func (c *fakeClock) nextWait(t *testing.T) time.Duration {
	t.Helper()
	select {
	case d := <-c.waits:
		return d
	case <-time.After(10 * time.Second):
		t.Fatal("the Mapper scheduled nothing")
		return 0
	}
}
