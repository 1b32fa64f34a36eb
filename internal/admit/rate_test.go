package admit

import (
	"net/netip"
	"testing"
	"time"
)

// TestRateBucket: the generic cell rate algorithm is a token bucket: Burst at once, then
// one per interval; a bucket left alone refills, and a full bucket is forgotten by the
// next sweep.
func TestRateBucket(t *testing.T) {
	r := newRateBook(4, 2) // one per 250 ms, two at once
	p := Subnet(v4(1, 2, 3))
	for i, want := range []bool{true, true, false} {
		if got := r.take(t0, p); got != want {
			t.Fatalf("take %d at t0: %v, want %v", i, got, want)
		}
	}
	if r.take(at(249*time.Millisecond), p) {
		t.Fatal("a token before its interval")
	}
	for i, want := range []bool{true, false} {
		if got := r.take(at(250*time.Millisecond), p); got != want {
			t.Fatalf("take %d after one interval: %v, want %v", i, got, want)
		}
	}
	// Left alone for burst intervals, it is full again (both tokens), and once full the
	// sweep drops it.
	for i, want := range []bool{true, true, false} {
		if got := r.take(at(750*time.Millisecond), p); got != want {
			t.Fatalf("take %d after burst intervals: %v, want %v", i, got, want)
		}
	}
	other := Subnet(v4(9, 9, 9))
	r.take(at(10*time.Second), other) // the sweep runs on the next take after span
	if _, ok := r.full[p]; ok || len(r.full) != 1 {
		t.Fatalf("a full bucket was kept: %d entries", len(r.full))
	}
	for _, rate := range []int{0, -1} {
		none := newRateBook(rate, 1)
		for range 100 {
			if !none.take(t0, p) {
				t.Fatalf("rate %d limited", rate)
			}
		}
	}
}

// TestRateBookBounded: a peer with more subnets than the book holds (an IPv6 /48 has
// 65,536 /64s) never makes it hold more than MaxRateBuckets; when full, the fullest
// quarter goes, and a subnet that has used its bucket up stays refused.
func TestRateBookBounded(t *testing.T) {
	r := newRateBook(1, 2) // span 2 s
	drained := Subnet(v4(1, 1, 1))
	r.take(t0, drained)
	r.take(t0, drained)
	if r.take(t0, drained) {
		t.Fatal("drained subnet allowed")
	}
	for i := range 100_000 {
		now := at(time.Duration(i) * time.Microsecond) // 100 ms in all: nothing refills
		if !r.take(now, netip.PrefixFrom(v6(uint16(i), 0), 64)) && i < 65536 {
			t.Fatalf("a new subnet (%d) refused", i)
		}
		if len(r.full) > MaxRateBuckets {
			t.Fatalf("%d buckets after %d subnets, bound %d", len(r.full), i, MaxRateBuckets)
		}
		if i%997 == 0 && r.take(now, drained) {
			t.Fatalf("the drained subnet got a token back after %d others", i)
		}
	}
}

// TestRateShedFullest: shedding a full book drops the quarter closest to full and keeps
// the rest.
func TestRateShedFullest(t *testing.T) {
	r := newRateBook(1, 100) // span 100 s: nothing is full during the test
	for i := range MaxRateBuckets {
		// Subnet i takes 1 + i%4 tokens: the fullest are those with i%4 == 0.
		for range 1 + i%4 {
			r.take(t0, netip.PrefixFrom(v6(uint16(i), 0), 64))
		}
	}
	r.take(t0, Subnet(v4(1, 1, 1))) // a new subnet in a full book
	if n := len(r.full); n > MaxRateBuckets*3/4+1 {
		t.Fatalf("%d buckets after shedding, want at most %d", n, MaxRateBuckets*3/4+1)
	}
	for i := range MaxRateBuckets {
		_, kept := r.full[netip.PrefixFrom(v6(uint16(i), 0), 64)]
		if kept == (i%4 == 0) {
			t.Fatalf("subnet %d (%d tokens used): kept %v", i, 1+i%4, kept)
		}
	}
}
