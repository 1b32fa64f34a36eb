package admit

// The handshake rate per subnet. A handshake whose first message has arrived costs the
// listener its key exchange and a signature (about 380 us for the default hybrid), so a
// subnet that replays ClientHellos is held to HandshakeRate of them per second, with
// HandshakeBurst at once. Silent sockets are not charged: they cost nothing but a slot,
// which they give up to anyone who needs it (handshake.go), and charging them would let a
// subnet's silent sockets lock its other addresses out.
//
// Each subnet's bucket is a ratelimit.Bucket: the one time at which it will be full again
// (the generic cell rate algorithm). A full bucket is the same as none, so only subnets
// that started a handshake in the last Burst intervals have an entry, and a sweep every
// Burst intervals drops the others. An attacker with more subnets than
// MaxRateBuckets gets, when the book is full, the fullest quarter of the book dropped
// (those subnets get back at most what they had nearly regained anyway): the book never
// holds more than MaxRateBuckets entries, whatever arrives.

import (
	"net/netip"
	"slices"
	"time"

	"github.com/tendril-p2p/tendril/internal/ratelimit"
)

// MaxRateBuckets bounds the subnets whose handshake rate the ledger remembers at once
// (a full book is 91 KiB of heap).
const MaxRateBuckets = 1024

// rateBook is the handshake rate of every subnet that started a handshake lately.
type rateBook struct {
	rate    ratelimit.Rate                    // Interval 0: no limit
	span    time.Duration                     // Burst intervals: a bucket left alone that long is full
	full    map[netip.Prefix]ratelimit.Bucket // each subnet's bucket; absent: full
	sweepAt time.Time                         // the next sweep of full buckets
}

func newRateBook(rate, burst int) rateBook {
	if rate <= 0 {
		return rateBook{}
	}
	r := ratelimit.PerSecond(rate, max(burst, 1))
	return rateBook{rate: r, span: time.Duration(r.Burst) * r.Interval, full: make(map[netip.Prefix]ratelimit.Bucket)}
}

// take charges one handshake to subnet at now, or reports false if its bucket is empty.
func (r *rateBook) take(now time.Time, subnet netip.Prefix) bool {
	if r.rate.Interval == 0 {
		return true
	}
	if !now.Before(r.sweepAt) {
		ratelimit.DropFull(r.full, now)
		r.sweepAt = now.Add(r.span)
	}
	b, ok := r.full[subnet]
	if !b.Allow(now, r.rate) {
		return false
	}
	if !ok && len(r.full) >= MaxRateBuckets {
		r.shed(now)
	}
	r.full[subnet] = b
	return true
}

// shed makes room for a new subnet in a full book: it drops the full buckets, and if that
// frees nothing, the fullest quarter.
func (r *rateBook) shed(now time.Time) {
	ratelimit.DropFull(r.full, now)
	if len(r.full) < MaxRateBuckets {
		return
	}
	ats := make([]time.Time, 0, len(r.full))
	for _, b := range r.full {
		ats = append(ats, b.FullAt())
	}
	slices.SortFunc(ats, time.Time.Compare)
	cut := ats[len(ats)/4]
	for k, b := range r.full {
		if b.FullAt().Before(cut) {
			delete(r.full, k)
		}
	}
	for k, b := range r.full {
		if len(r.full) <= MaxRateBuckets*3/4 {
			break
		}
		if b.FullAt().Equal(cut) {
			delete(r.full, k)
		}
	}
}
