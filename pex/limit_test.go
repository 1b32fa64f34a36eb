package pex

import (
	"encoding/binary"
	"slices"
	"testing"
	"time"

	"github.com/tendril-p2p/tendril/internal/ratelimit"
	"github.com/tendril-p2p/tendril/secio"
)

var t0 = time.Date(2026, 12, 4, 10, 0, 0, 0, time.UTC)

// peerN returns a distinct, valid peer ID for n.
func peerN(n int) secio.PeerID {
	b := make([]byte, secio.PeerIDSize)
	b[0], b[1] = secio.MultihashBLAKE3, secio.PeerIDDigestSize
	binary.BigEndian.PutUint64(b[2:], uint64(n)+1)
	id, err := secio.PeerIDFromBytes(b)
	if err != nil {
		panic(err)
	}
	return id
}

func TestBucket(t *testing.T) {
	r := ratelimit.Rate{Burst: 2, Interval: 30 * time.Second}
	var b ratelimit.Bucket
	for i := range 2 {
		if !b.Allow(t0, r) {
			t.Fatalf("a full bucket of 2 refused take %d", i+1)
		}
	}
	if b.Allow(t0.Add(29*time.Second), r) {
		t.Fatal("a third take before the interval")
	}
	if !b.Allow(t0.Add(30*time.Second), r) {
		t.Fatal("no token after the interval")
	}
	// Idle for long: at most the burst.
	now := t0.Add(time.Hour)
	n := 0
	for b.Allow(now, r) {
		n++
	}
	if n != 2 {
		t.Fatalf("%d tokens after an hour, want the burst 2", n)
	}
	// A clock that goes back refills nothing.
	if b.Allow(t0, r) {
		t.Fatal("a token from a clock going back")
	}
}

func TestServeLimiter(t *testing.T) {
	c := DefaultConfig()
	c.MaxTrackedPeers = 4
	s := newServeLimiter(t0, &c)
	a := peerN(1)
	got := 0
	for i := range 100 {
		if s.allow(t0.Add(time.Duration(i)*time.Millisecond), a) {
			got++
		}
	}
	if got != 2 {
		t.Fatalf("one peer's flood got %d answers, want the burst 2", got)
	}
	if !s.allow(t0.Add(31*time.Second), a) || s.allow(t0.Add(32*time.Second), a) {
		t.Fatal("not one answer per 30 s after the burst")
	}
	// Many identities: the global bucket (10/s, five seconds deep) bounds them, however
	// the LRU forgets.
	s = newServeLimiter(t0, &c)
	got = 0
	for i := range 1000 {
		if s.allow(t0, peerN(i)) {
			got++
		}
	}
	if want := c.MaxAnswersPerSecond * globalBurstSeconds; got != want {
		t.Fatalf("1,000 identities at once got %d answers, want %d", got, want)
	}
	if n := s.peers.Len(); n != 4 {
		t.Fatalf("%d peers tracked, bound 4", n)
	}
	if !s.allow(t0.Add(time.Second), peerN(5000)) {
		t.Fatal("the global bucket did not refill")
	}
	// A request the global bucket refuses leaves the asker's own allowance whole.
	s = newServeLimiter(t0, &c)
	for i := range c.MaxAnswersPerSecond * globalBurstSeconds {
		s.allow(t0, peerN(10000+i))
	}
	b := peerN(99)
	if s.allow(t0, b) {
		t.Fatal("global bucket empty, yet an answer")
	}
	if !s.allow(t0.Add(100*time.Millisecond), b) || !s.allow(t0.Add(200*time.Millisecond), b) {
		t.Fatal("a request refused by the global bucket cost the asker its burst")
	}
}

func TestLRU(t *testing.T) {
	l := ratelimit.NewLRU[secio.PeerID, int](3)
	for i := range 3 {
		*l.GetOrAdd(peerN(i)) += 10 + i
	}
	l.Get(peerN(0)) // 1 is now the least recently used
	*l.GetOrAdd(peerN(3)) = 3
	if l.Len() != 3 || l.Get(peerN(1)) != nil || l.Get(peerN(0)) == nil || *l.Get(peerN(2)) != 12 {
		t.Fatalf("after an eviction: len %d, 1 kept %v, 0 kept %v", l.Len(), l.Get(peerN(1)) != nil, l.Get(peerN(0)) != nil)
	}
}

func TestStrikes(t *testing.T) {
	c := DefaultConfig()
	s := newStrikes(&c)
	p := peerN(1)
	if s.add(t0, p, c.BadRecordLimit-1) || s.ignored(t0, p) {
		t.Fatal("ignored below the limit")
	}
	if !s.add(t0, p, 1) || !s.ignored(t0.Add(c.IgnoreFor-time.Second), p) {
		t.Fatal("not ignored at the limit")
	}
	if s.ignored(t0.Add(c.IgnoreFor), p) {
		t.Fatal("still ignored after IgnoreFor")
	}
	// The count starts again after a sentence.
	if s.add(t0.Add(c.IgnoreFor), p, 1) {
		t.Fatal("one bad record after the sentence ignored the peer again")
	}
	if s.ignored(t0, peerN(2)) {
		t.Fatal("an unknown peer ignored")
	}
}

func TestNextAskDelay(t *testing.T) {
	const iv, max = 10 * time.Second, 10 * time.Minute
	if d := nextAskDelay(10, 1000, 5*time.Minute, iv, max); d != iv {
		t.Fatalf("small book: %v", d)
	}
	d := iv
	for range 10 {
		d = nextAskDelay(1000, 1000, d, iv, max)
	}
	if d != max {
		t.Fatalf("full book after 10 rounds: %v, want %v", d, max)
	}
	if d := nextAskDelay(1000, 1000, iv, iv, max); d != 2*iv {
		t.Fatalf("full book: %v, want %v", d, 2*iv)
	}
	// Warming up from FirstAsk: 1, 2, 4, 8, then 10 s, whatever the book holds.
	d = time.Second
	var got []time.Duration
	for range 5 {
		d = nextAskDelay(10, 1000, d, iv, max)
		got = append(got, d)
	}
	if want := []time.Duration{2 * time.Second, 4 * time.Second, 8 * time.Second, iv, iv}; !slices.Equal(got, want) {
		t.Fatalf("warm-up: %v, want %v", got, want)
	}
}
