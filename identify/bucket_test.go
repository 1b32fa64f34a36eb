package identify

import (
	"testing"
	"time"

	"github.com/tendril-p2p/tendril/internal/ratelimit"
)

func TestBucket(t *testing.T) {
	r := ratelimit.Rate{Burst: 3, Interval: 5 * time.Second}
	t0 := time.Unix(1000, 0)
	var b ratelimit.Bucket
	for i := range 3 {
		if !b.Allow(t0, r) {
			t.Fatalf("message %d of the burst refused", i)
		}
	}
	if b.Allow(t0, r) || b.Allow(t0.Add(4*time.Second), r) {
		t.Fatal("a fourth message passed before a token was due")
	}
	if got, want := b.Next(r), t0.Add(5*time.Second); !got.Equal(want) {
		t.Fatalf("next = %v, want %v", got, want)
	}
	if !b.Allow(t0.Add(5*time.Second), r) {
		t.Fatal("the token due after an interval was refused")
	}
	if b.Allow(t0.Add(5*time.Second), r) {
		t.Fatal("two tokens after one interval")
	}
	// A long pause refills the bucket to its burst, never beyond.
	later := t0.Add(time.Hour)
	n := 0
	for b.Allow(later, r) {
		n++
	}
	if n != 3 {
		t.Fatalf("after an hour %d messages passed at once, want the burst 3", n)
	}
}

// TestBucketRate: over a long flood, the bucket lets through its burst plus one per
// interval, whatever the offered rate.
func TestBucketRate(t *testing.T) {
	r := ratelimit.Rate{Burst: 8, Interval: 5 * time.Second}
	t0 := time.Unix(1000, 0)
	var b ratelimit.Bucket
	passed := 0
	for i := range 60_000 { // 1,000 a second for a minute
		if b.Allow(t0.Add(time.Duration(i)*time.Millisecond), r) {
			passed++
		}
	}
	if want := 8 + 11; passed != want { // the burst, then one at 5 s, 10 s, ... 55 s
		t.Fatalf("%d passed in a minute, want %d", passed, want)
	}
}

// TestPaceWithinAcceptance: pushes paced by pushRate never exceed what a receiver with
// updateRate accepts, even when each arrives early by up to a second of jitter.
func TestPaceWithinAcceptance(t *testing.T) {
	cfg := Config{}
	cfg.setDefaults()
	send, recv := cfg.pushRate(), cfg.updateRate()
	t0 := time.Unix(1000, 0)
	var out, in ratelimit.Bucket
	for i := range 10 * 60 * 10 { // a sender that wants to push every 100 ms, for 10 min
		now := t0.Add(time.Duration(i) * 100 * time.Millisecond)
		if !out.Allow(now, send) {
			continue
		}
		jitter := time.Duration(i%11) * 100 * time.Millisecond // 0..1 s early
		if !in.Allow(now.Add(-jitter+time.Second), recv) {
			t.Fatalf("push at %v refused by the receiver", now.Sub(t0))
		}
	}
}
