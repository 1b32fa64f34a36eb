// Package ratelimit is the token bucket the protocols rate-limit with, and the bounded
// tables they keep buckets in.
//
// A Bucket holds up to Rate.Burst tokens and gains one every Rate.Interval; each allowed
// event takes one. It is kept as the one instant at which it is full again (the generic
// cell rate algorithm), not as a token count and a last-refill time: the arithmetic is in
// whole nanoseconds, so a bucket on a fixed clock gives the same answers every run and
// never drifts by rounding, and the state is one time.Time, which matters for tables of
// thousands of them. The rate is passed to every call rather than stored, for the same
// reason: a table's buckets all share one.
//
// Nothing here reads the clock or locks: callers pass now and serialise their calls.
package ratelimit

import (
	"math"
	"time"
)

// Rate is a token bucket's shape: Burst tokens at once, then one every Interval. A Burst
// below 1 counts as 1 (a bucket that could never hold a token would refuse everything,
// which no caller means). An Interval of 0 or less is no limit.
type Rate struct {
	Burst    int
	Interval time.Duration
}

// PerSecond returns the Rate of n tokens a second with burst at once; n of 0 or less is
// no limit. The interval is rounded down to whole nanoseconds (at least one), so the rate
// is at most a nanosecond a token fast.
func PerSecond(n, burst int) Rate {
	if n <= 0 {
		return Rate{Burst: burst}
	}
	return Rate{Burst: burst, Interval: max(time.Second/time.Duration(n), 1)}
}

// depth is how far beyond now a bucket's full instant may lie while it still holds a
// token: Burst-1 intervals, saturated rather than overflowed for absurd configurations.
func (r Rate) depth() time.Duration {
	n := int64(max(r.Burst, 1) - 1)
	if n > 0 && int64(r.Interval) > math.MaxInt64/n {
		return math.MaxInt64
	}
	return time.Duration(n) * r.Interval
}

// Bucket is one token bucket's state: the instant at which it is full again. The zero
// Bucket is full. It is plain data: copy it, keep it in a map by value, compare it.
//
// A clock that goes back refills nothing: the bucket holds what it held at that earlier
// instant, as if the events since had not yet happened, so out-of-order calls (now read
// before a lock, used after it) cost at most the tokens of the time they are out of
// order, and never grant extra ones.
type Bucket struct {
	full time.Time
}

// Allow reports whether an event at now may pass under r, and takes its token if so. A
// refused event changes nothing.
func (b *Bucket) Allow(now time.Time, r Rate) bool {
	if r.Interval <= 0 {
		return true
	}
	if now.Before(b.Next(r)) {
		return false
	}
	// A bucket full before now holds no more than Burst: its refill stops at now.
	if b.full.Before(now) {
		b.full = now
	}
	b.full = b.full.Add(r.Interval)
	return true
}

// Next returns the earliest instant at which Allow under r would pass: for a caller that
// waits for a token rather than dropping its event. It is in the past for a bucket that
// holds a token.
func (b *Bucket) Next(r Rate) time.Time {
	if r.Interval <= 0 {
		return time.Time{}
	}
	return b.full.Add(-r.depth())
}

// Refund gives back one token taken under r, for an event that was allowed but then not
// carried out for reasons not its own (a global limit refused it after the per-key one
// let it through). The bucket never holds more than Burst for it.
func (b *Bucket) Refund(r Rate) {
	if b.full.IsZero() || r.Interval <= 0 {
		return // already full
	}
	b.full = b.full.Add(-r.Interval)
}

// FullAt returns the instant from which the bucket is full again (the zero time for a
// bucket that has never been used). The buckets of a table compare by it: the earlier,
// the fuller.
func (b Bucket) FullAt() time.Time { return b.full }

// Full reports whether the bucket is full at now. A full bucket is the same as none, so a
// table may forget it.
func (b Bucket) Full(now time.Time) bool { return !b.full.After(now) }

// DropFull deletes from m the buckets that are full at now: a table's cheapest eviction,
// since a forgotten key comes back with the full bucket it had.
func DropFull[K comparable](m map[K]Bucket, now time.Time) {
	for k, b := range m {
		if b.Full(now) {
			delete(m, k)
		}
	}
}
