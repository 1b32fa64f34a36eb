package portmap

import (
	"math"
	"time"
)

// renewAfter is the wait before renewing a mapping: half the lease granted (RFC 6886
// section 3.7 renews at half; UPnP has no rule, the same is used), half the lease asked
// when the gateway granted a permanent one (0) so that a lost mapping or a new external
// address is still noticed, and never less than minRenew.
func renewAfter(granted, asked, minRenew time.Duration) time.Duration {
	if granted <= 0 {
		granted = asked
	}
	return max(granted/2, minRenew)
}

// retryAfter is the wait after failures failed attempts in a row: base after the first,
// doubling up to max, spread by ±20% with u, a uniform draw from [0, 1) that the caller
// makes (so that this stays a plain function).
func retryAfter(failures int, base, maxWait time.Duration, u float64) time.Duration {
	if failures <= 0 {
		return 0
	}
	d := float64(maxWait)
	if e := float64(failures - 1); e*math.Ln2 < math.Log(float64(maxWait)/float64(max(base, 1))) {
		d = float64(base) * math.Pow(2, e)
	}
	u = min(max(u, 0), 1)
	return time.Duration(d * (1 + 0.2*(2*u-1)))
}

// failedWait is the wait after a failed attempt while a mapping is held until deadline:
// the backoff, but never past the deadline, so that one more try is made before the
// mapping is given up; and at least a second, so a deadline already reached cannot make
// the Mapper spin.
func failedWait(backoff time.Duration, now, deadline time.Time) time.Duration {
	if deadline.IsZero() {
		return backoff
	}
	return max(min(backoff, deadline.Sub(now)), time.Second)
}
