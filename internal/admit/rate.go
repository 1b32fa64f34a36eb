package admit

// The handshake rate per subnet. A handshake whose first message has arrived costs the
// listener its key exchange and a signature (about 380 us for the default hybrid), so a
// subnet that replays ClientHellos is held to HandshakeRate of them per second, with
// HandshakeBurst at once. Silent sockets are not charged: they cost nothing but a slot,
// which they give up to anyone who needs it (handshake.go), and charging them would let a
// subnet's silent sockets lock its other addresses out.
//
// Each subnet's bucket is kept as the one time at which it will be full again (the
// generic cell rate algorithm): a handshake is allowed while that time is at most Burst
// intervals ahead of now, and moves it one interval on. A full bucket is the same as none,
// so only subnets that started a handshake in the last Burst intervals have an entry, and
// a sweep every Burst intervals drops the others. An attacker with more subnets than
// MaxRateBuckets gets, when the book is full, the fullest quarter of the book dropped
// (those subnets get back at most what they had nearly regained anyway): the book never
// holds more than MaxRateBuckets entries, whatever arrives.

import (
	"net/netip"
	"slices"
	"time"
)

// MaxRateBuckets bounds the subnets whose handshake rate the ledger remembers at once
// (a full book is 91 KiB of heap).
const MaxRateBuckets = 1024

// rateBook is the handshake rate of every subnet that started a handshake lately.
type rateBook struct {
	every   time.Duration              // 1 s / rate; 0: no limit
	span    time.Duration              // burst × every: how far ahead of now a bucket's full time may run
	full    map[netip.Prefix]time.Time // when each subnet's bucket is full again; absent: full
	sweepAt time.Time                  // the next sweep of full buckets
}

func newRateBook(rate, burst int) rateBook {
	if rate <= 0 {
		return rateBook{}
	}
	every := time.Second / time.Duration(rate)
	return rateBook{every: every, span: time.Duration(max(burst, 1)) * every, full: make(map[netip.Prefix]time.Time)}
}

// take charges one handshake to subnet at now, or reports false if its bucket is empty.
func (r *rateBook) take(now time.Time, subnet netip.Prefix) bool {
	if r.every == 0 {
		return true
	}
	if !now.Before(r.sweepAt) {
		r.dropFull(now)
		r.sweepAt = now.Add(r.span)
	}
	at, ok := r.full[subnet]
	if !ok || at.Before(now) {
		at = now
	}
	next := at.Add(r.every)
	if next.Sub(now) > r.span {
		return false
	}
	if !ok && len(r.full) >= MaxRateBuckets {
		r.shed(now)
	}
	r.full[subnet] = next
	return true
}

// dropFull forgets the buckets that are full at now.
func (r *rateBook) dropFull(now time.Time) {
	for k, at := range r.full {
		if !at.After(now) {
			delete(r.full, k)
		}
	}
}

// shed makes room for a new subnet in a full book: it drops the full buckets, and if that
// frees nothing, the fullest quarter.
func (r *rateBook) shed(now time.Time) {
	r.dropFull(now)
	if len(r.full) < MaxRateBuckets {
		return
	}
	ats := make([]time.Time, 0, len(r.full))
	for _, at := range r.full {
		ats = append(ats, at)
	}
	slices.SortFunc(ats, time.Time.Compare)
	cut := ats[len(ats)/4]
	for k, at := range r.full {
		if at.Before(cut) {
			delete(r.full, k)
		}
	}
	for k, at := range r.full {
		if len(r.full) <= MaxRateBuckets*3/4 {
			break
		}
		if at.Equal(cut) {
			delete(r.full, k)
		}
	}
}
