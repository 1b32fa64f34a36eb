package identify

import "time"

// rate is a token bucket's shape: burst messages at once, then one every interval.
type rate struct {
	burst    int
	interval time.Duration
}

// bucket is a token bucket kept as one instant (the generic cell rate algorithm): due
// is when the bucket would be full again. A message is allowed when the bucket, refilled
// up to now, holds a token; it then takes one, pushing due an interval further. The zero
// bucket is full. Both directions use it: received updates are checked against it before
// any parsing, and this node paces its own pushes with it so that they stay within what
// a peer with the same configuration accepts.
type bucket struct {
	due time.Time
}

// allow reports whether a message may pass at now, and takes its token if so.
func (b *bucket) allow(now time.Time, r rate) bool {
	if now.Before(b.next(r)) {
		return false
	}
	if b.due.Before(now) {
		b.due = now
	}
	b.due = b.due.Add(r.interval)
	return true
}

// next returns the earliest instant at which allow would succeed.
func (b *bucket) next(r rate) time.Time {
	return b.due.Add(-time.Duration(r.burst-1) * r.interval)
}
