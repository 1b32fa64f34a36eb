package connmgr

import (
	"math"
	"time"
)

// Backoff returns how long an address waits after failures failed dials in a row: none
// for zero failures, else d = min(Base * Factor^(failures-1), Max), spread by the
// jitter to d * (1 + Jitter*(2u-1)), between (1-Jitter)*d and (1+Jitter)*d. u is a
// uniform draw from [0, 1), given by the caller so that the function is plain: the
// Manager draws it once per failure from Config.Rand.
func Backoff(failures int, c BackoffConfig, u float64) time.Duration {
	if failures <= 0 {
		return 0
	}
	d := float64(c.Max)
	// Stop multiplying once past Max: Factor^failures overflows for long outages.
	if e := float64(failures - 1); c.Factor <= 1 || e*math.Log(c.Factor) < math.Log(float64(c.Max)/float64(max(c.Base, 1))) {
		d = min(float64(c.Base)*math.Pow(c.Factor, e), float64(c.Max))
	}
	u = min(max(u, 0), 1)
	return time.Duration(d * (1 + c.Jitter*(2*u-1)))
}
