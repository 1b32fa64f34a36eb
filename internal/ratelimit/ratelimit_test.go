package ratelimit

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"
)

var t0 = time.Date(2026, 12, 4, 10, 0, 0, 0, time.UTC)

func at(d time.Duration) time.Time { return t0.Add(d) }

// drain takes every token the bucket has at now and returns how many there were.
func drain(b *Bucket, now time.Time, r Rate) int {
	n := 0
	for b.Allow(now, r) {
		n++
		if n > 1_000_000 {
			panic("bucket never runs dry")
		}
	}
	return n
}

func TestBurstThenOnePerInterval(t *testing.T) {
	r := Rate{Burst: 3, Interval: 5 * time.Second}
	var b Bucket
	if n := drain(&b, t0, r); n != 3 {
		t.Fatalf("a new bucket gave %d at once, want the burst 3", n)
	}
	if got, want := b.Next(r), at(5*time.Second); !got.Equal(want) {
		t.Fatalf("Next = %v, want %v", got, want)
	}
	if b.Allow(at(5*time.Second-time.Nanosecond), r) {
		t.Fatal("a token a nanosecond before it was due")
	}
	if !b.Allow(at(5*time.Second), r) {
		t.Fatal("the token due after one interval was refused")
	}
	if b.Allow(at(5*time.Second), r) {
		t.Fatal("two tokens after one interval")
	}
	// Two intervals idle from empty: two tokens, not the burst.
	if n := drain(&b, at(15*time.Second), r); n != 2 {
		t.Fatalf("%d tokens after two idle intervals, want 2", n)
	}
}

// TestRefused: a refused Allow leaves the bucket as it was.
func TestRefused(t *testing.T) {
	r := Rate{Burst: 2, Interval: time.Second}
	var b Bucket
	drain(&b, t0, r)
	before := b
	for i := range 100 {
		b.Allow(at(time.Duration(i)*time.Millisecond), r)
	}
	if b != before {
		t.Fatalf("refusals moved the bucket from %v to %v", before.FullAt(), b.FullAt())
	}
}

// TestFloodRate: over a long flood the bucket lets through its burst plus one per
// interval elapsed, whatever the offered rate.
func TestFloodRate(t *testing.T) {
	for _, c := range []struct {
		r     Rate
		every time.Duration // between offered events
		span  time.Duration
	}{
		{Rate{Burst: 8, Interval: 5 * time.Second}, time.Millisecond, time.Minute},
		{Rate{Burst: 1, Interval: 250 * time.Millisecond}, 10 * time.Millisecond, 10 * time.Second},
		{Rate{Burst: 50, Interval: 20 * time.Millisecond}, time.Microsecond, time.Second},
		{Rate{Burst: 3, Interval: 333_333_333}, 7 * time.Millisecond, time.Hour},
	} {
		var b Bucket
		passed := 0
		for d := time.Duration(0); d < c.span; d += c.every {
			if b.Allow(at(d), c.r) {
				passed++
			}
		}
		// The last offered event is at span-every; the burst, then one at each interval
		// up to it.
		if want := c.r.Burst + int((c.span-c.every)/c.r.Interval); passed != want {
			t.Errorf("%+v offered every %v for %v: %d passed, want %d", c.r, c.every, c.span, passed, want)
		}
	}
}

// TestLongIdle: however long a bucket is left alone, it holds its burst and no more.
func TestLongIdle(t *testing.T) {
	r := Rate{Burst: 4, Interval: time.Minute}
	var b Bucket
	drain(&b, t0, r)
	for _, idle := range []time.Duration{4 * time.Minute, time.Hour, 100 * 365 * 24 * time.Hour} {
		if n := drain(&b, at(idle), r); n != 4 {
			t.Fatalf("after %v idle: %d tokens, want the burst 4", idle, n)
		}
	}
}

// TestClockBack: a clock that goes back refills nothing; the bucket holds what it held
// at that earlier instant, and gives its tokens again when the clock comes forward.
func TestClockBack(t *testing.T) {
	r := Rate{Burst: 2, Interval: 10 * time.Second}
	var b Bucket
	now := at(time.Hour)
	drain(&b, now, r)
	for _, back := range []time.Duration{time.Nanosecond, time.Second, time.Hour, 24 * time.Hour} {
		if b.Allow(now.Add(-back), r) {
			t.Fatalf("a token from a clock going back %v", back)
		}
	}
	if !b.Allow(now.Add(10*time.Second), r) {
		t.Fatal("no token an interval after the clock came forward")
	}
	// A full bucket asked at an earlier instant than its last use still holds its burst
	// there: going back takes away at most the refill of the time gone back.
	var f Bucket
	f.Allow(now, r)
	if n := drain(&f, now.Add(-time.Hour), r); n != 0 {
		t.Fatalf("%d tokens an hour before a bucket's last use, want 0", n)
	}
	var g Bucket
	if n := drain(&g, now.Add(-time.Hour), r); n != 2 {
		t.Fatalf("an unused bucket gave %d at an earlier instant, want the burst 2", n)
	}
}

// TestOutOfOrderBound: whatever order events arrive in (a clock read before a lock,
// used after it), the bucket never lets through more than Burst plus one per Interval of
// the span the events cover.
func TestOutOfOrderBound(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for trial := range 200 {
		r := Rate{Burst: 1 + rng.IntN(5), Interval: time.Duration(1+rng.IntN(1000)) * time.Millisecond}
		var b Bucket
		base := at(0)
		lo, hi := time.Duration(math.MaxInt64), time.Duration(0)
		passed := 0
		for i := range 500 {
			// Mostly forward, every event up to 50 ms early or late.
			d := time.Duration(i)*5*time.Millisecond + time.Duration(rng.IntN(100_000_001)) - 50*time.Millisecond
			lo, hi = min(lo, d), max(hi, d)
			if b.Allow(base.Add(d), r) {
				passed++
			}
		}
		if bound := r.Burst + int((hi-lo)/r.Interval); passed > bound {
			t.Fatalf("trial %d, %+v: %d passed over %v, bound %d", trial, r, passed, hi-lo, bound)
		}
	}
}

// credit is the reference token bucket the GCRA must match on a clock that does not go
// back: a count of nanoseconds of credit (Interval of them a token), refilled by elapsed
// time up to Burst tokens. It is the exact form of the float token-and-last-refill bucket
// pex and relay used to keep.
type credit struct {
	ns   int64
	last time.Time
}

func (c *credit) allow(now time.Time, r Rate) bool {
	c.ns = min(c.ns+int64(now.Sub(c.last)), int64(r.Burst)*int64(r.Interval))
	c.last = now
	if c.ns < int64(r.Interval) {
		return false
	}
	c.ns -= int64(r.Interval)
	return true
}

func (c *credit) refund(r Rate) {
	c.ns = min(c.ns+int64(r.Interval), int64(r.Burst)*int64(r.Interval))
}

// TestMatchesTokenCount: on a forward clock, Allow and Refund answer exactly as the
// token-count bucket does, event for event.
func TestMatchesTokenCount(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for trial := range 300 {
		r := Rate{Burst: 1 + rng.IntN(8), Interval: time.Duration(1+rng.IntN(5000)) * time.Microsecond}
		var b Bucket
		c := credit{ns: int64(r.Burst) * int64(r.Interval), last: t0}
		now := t0
		for i := range 2000 {
			now = now.Add(time.Duration(rng.Int64N(int64(2 * r.Interval))))
			if rng.IntN(10) == 0 {
				now = now.Add(time.Duration(rng.Int64N(int64(10 * r.Interval)))) // idle
			}
			got, want := b.Allow(now, r), c.allow(now, r)
			if got != want {
				t.Fatalf("trial %d, %+v, event %d: Allow %v, token count %v", trial, r, i, got, want)
			}
			if got && rng.IntN(4) == 0 {
				b.Refund(r)
				c.refund(r)
			}
		}
	}
}

func TestRefund(t *testing.T) {
	r := Rate{Burst: 3, Interval: time.Second}
	var b Bucket
	b.Refund(r) // a full bucket: nothing to give back
	if n := drain(&b, t0, r); n != 3 {
		t.Fatalf("a refund to a full bucket made it %d, want the burst 3", n)
	}
	b.Refund(r)
	if !b.Allow(t0, r) || b.Allow(t0, r) {
		t.Fatal("a refund to an empty bucket is not one token")
	}
	// Refunds beyond what was taken leave it full, never fuller.
	for range 10 {
		b.Refund(r)
	}
	if n := drain(&b, t0, r); n != 3 {
		t.Fatalf("ten refunds made it %d, want the burst 3", n)
	}
	// Refunds before a long idle: still the burst after it.
	for range 10 {
		b.Refund(r)
	}
	if n := drain(&b, at(time.Hour), r); n != 3 {
		t.Fatalf("refunds and an hour made it %d, want the burst 3", n)
	}
}

func TestNoLimit(t *testing.T) {
	for _, r := range []Rate{{Burst: 1}, {Burst: 1, Interval: -time.Second}, PerSecond(0, 5), PerSecond(-3, 5)} {
		var b Bucket
		for i := range 1000 {
			if !b.Allow(at(-time.Duration(i)), r) {
				t.Fatalf("%+v refused event %d", r, i)
			}
		}
		if (b != Bucket{}) || !b.Next(r).IsZero() {
			t.Fatalf("%+v: no limit changed the bucket", r)
		}
		b.Refund(r)
	}
}

// TestBurstBelowOne: a burst of 0 or less is a burst of 1, not a bucket that refuses all.
func TestBurstBelowOne(t *testing.T) {
	for _, burst := range []int{0, -5} {
		r := Rate{Burst: burst, Interval: time.Second}
		var b Bucket
		if n := drain(&b, t0, r); n != 1 {
			t.Fatalf("burst %d: %d at once, want 1", burst, n)
		}
		if !b.Allow(at(time.Second), r) {
			t.Fatalf("burst %d: no token after an interval", burst)
		}
	}
}

// TestHugeRate: a burst and interval whose product overflows int64 neither wraps round
// into a refusal nor panics.
func TestHugeRate(t *testing.T) {
	r := Rate{Burst: math.MaxInt, Interval: time.Hour}
	var b Bucket
	for i := range 1000 {
		if !b.Allow(t0, r) {
			t.Fatalf("refused at %d of a burst of MaxInt", i)
		}
	}
	if !b.Next(r).Before(t0) {
		t.Fatalf("Next = %v with tokens left", b.Next(r))
	}
}

func TestPerSecond(t *testing.T) {
	for _, c := range []struct {
		n    int
		want time.Duration
	}{{4, 250 * time.Millisecond}, {3, 333_333_333}, {1, time.Second}, {3_000_000_000, 1}} {
		if r := PerSecond(c.n, 7); r.Interval != c.want || r.Burst != 7 {
			t.Fatalf("PerSecond(%d, 7) = %+v, want interval %v", c.n, r, c.want)
		}
	}
}

func TestFullAndDropFull(t *testing.T) {
	r := Rate{Burst: 2, Interval: time.Second}
	var b Bucket
	if !b.Full(t0) || !b.FullAt().IsZero() {
		t.Fatal("the zero bucket is not full")
	}
	b.Allow(t0, r)
	if b.Full(t0) || !b.FullAt().Equal(at(time.Second)) || !b.Full(at(time.Second)) {
		t.Fatalf("one token used at t0: full at %v", b.FullAt())
	}
	m := map[string]Bucket{"used": b, "new": {}}
	drained := Bucket{}
	drain(&drained, t0, r)
	m["drained"] = drained
	DropFull(m, at(time.Second))
	if _, ok := m["drained"]; len(m) != 1 || !ok {
		t.Fatalf("after DropFull at 1 s: %v", m)
	}
	DropFull(m, at(2*time.Second))
	if len(m) != 0 {
		t.Fatalf("after DropFull at 2 s: %v", m)
	}
}
