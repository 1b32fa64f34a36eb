package memory

import (
	"io"
	"math"
	"sync"
	"testing"
	"time"
)

// within fails the test if got is not within frac of want.
func within(t *testing.T, what string, got, want time.Duration, frac float64) {
	t.Helper()
	lo, hi := time.Duration(float64(want)*(1-frac)), time.Duration(float64(want)*(1+frac))
	if got < lo || got > hi {
		t.Errorf("%s: %v, want %v ± %.0f%%", what, got, want, frac*100)
	} else {
		t.Logf("%s: %v (want %v)", what, got, want)
	}
}

// TestRoundTripTime: over 25 ms one-way links, small messages take 50 ms there and back,
// and never less.
func TestRoundTripTime(t *testing.T) {
	a, b := pair(t, Link{Delay: 25 * time.Millisecond})
	median, least := roundTrip(t, a, b, 21)
	within(t, "median round trip", median, 50*time.Millisecond, 0.10)
	if least < 50*time.Millisecond {
		t.Errorf("a round trip took %v, less than the links' 50 ms", least)
	}
}

// TestRate: 1 MB over a 1 MB/s link takes a second, with the default buffer.
func TestRate(t *testing.T) {
	const size = 1_000_000
	a, b := pair(t, Link{Rate: 1_000_000})
	start := time.Now()
	go func() {
		a.Write(make([]byte, size))
		a.CloseWrite()
	}()
	n, err := io.Copy(io.Discard, b)
	elapsed := time.Since(start)
	if n != size || err != nil {
		t.Fatalf("read %d bytes, %v", n, err)
	}
	if elapsed < 800*time.Millisecond || elapsed > 1300*time.Millisecond {
		t.Errorf("1 MB over 1 MB/s took %v, want about 1 s", elapsed)
	} else {
		t.Logf("1 MB over 1 MB/s: %v", elapsed)
	}
}

// TestRateShared: the connections between two hosts share their links' rate.
func TestRateShared(t *testing.T) {
	const size = 500_000
	n := NewNetwork(NetworkConfig{Link: Link{Rate: 1_000_000}})
	x, y := n.NewTransport(), n.NewTransport()
	a1, b1 := connect(t, x, y)
	a2, b2 := connect(t, x, y)
	start := time.Now()
	var wg sync.WaitGroup
	for _, c := range [][2]*Conn{{a1, b1}, {a2, b2}} {
		wg.Add(2)
		go func() { defer wg.Done(); c[0].Write(make([]byte, size)); c[0].CloseWrite() }()
		go func() { defer wg.Done(); io.Copy(io.Discard, c[1]) }()
	}
	wg.Wait()
	if elapsed := time.Since(start); elapsed < 800*time.Millisecond || elapsed > 1300*time.Millisecond {
		t.Errorf("2 × 500 kB over one 1 MB/s link took %v, want about 1 s", elapsed)
	}
}

// TestFlowControl: a writer over a slow link is held back by the peer's reading, not
// buffered without bound: with a 10 kB buffer over a 100 kB/s link, 30 kB takes the time
// of 20 kB before its last Write returns.
func TestFlowControl(t *testing.T) {
	a, b := pair(t, Link{Rate: 100_000, Buffer: 10_000})
	go io.Copy(io.Discard, b)
	start := time.Now()
	if _, err := a.Write(make([]byte, 30_000)); err != nil {
		t.Fatal(err)
	}
	within(t, "writing 30 kB through a 10 kB buffer at 100 kB/s", time.Since(start), 200*time.Millisecond, 0.25)
}

// TestSetLink: a pair's link overrides the default, both ways with SetLink, one way with
// SetLinkOneWay, and applies to open connections.
func TestSetLink(t *testing.T) {
	n := NewNetwork(NetworkConfig{Link: Link{Delay: 40 * time.Millisecond}})
	x, y, z := n.NewTransport(), n.NewTransport(), n.NewTransport()
	n.SetLink(x, y, Link{Delay: 5 * time.Millisecond})
	n.SetLinkOneWay(x, z, Link{Delay: 15 * time.Millisecond})

	xy, yx := connect(t, x, y)
	rtt, _ := roundTrip(t, xy, yx, 5)
	within(t, "round trip x-y (5 ms each way)", rtt, 10*time.Millisecond, 0.5)
	xz, zx := connect(t, x, z)
	rtt, _ = roundTrip(t, xz, zx, 5)
	within(t, "round trip x-z (15 ms there, 40 ms back)", rtt, 55*time.Millisecond, 0.15)
	yz, zy := connect(t, y, z)
	rtt, _ = roundTrip(t, yz, zy, 5)
	within(t, "round trip y-z (the default, 40 ms each way)", rtt, 80*time.Millisecond, 0.15)

	// A change applies to an open connection, and bytes written after it never overtake
	// those written before.
	a, b := connect(t, x, y)
	n.SetLink(x, y, Link{Delay: 100 * time.Millisecond})
	a.Write([]byte("slow "))
	n.SetLink(x, y, Link{})
	a.Write([]byte("fast"))
	a.CloseWrite()
	start := time.Now()
	got, err := io.ReadAll(b)
	if string(got) != "slow fast" || err != nil {
		t.Fatalf("read %q, %v; want %q", got, err, "slow fast")
	}
	if d := time.Since(start); d < 90*time.Millisecond {
		t.Fatalf("bytes written before a link change arrived after %v, want 100 ms", d)
	}
}

// TestEndTravels: the end of a stream (Close, CloseWrite) reaches the peer after the
// link's delay, as a FIN does, not at once.
func TestEndTravels(t *testing.T) {
	a, b := pair(t, Link{Delay: 30 * time.Millisecond})
	start := time.Now()
	a.Close()
	if _, err := b.Read(make([]byte, 1)); err != io.EOF {
		t.Fatalf("read after the peer's Close: %v, want io.EOF", err)
	}
	if d := time.Since(start); d < 30*time.Millisecond {
		t.Fatalf("the peer's Close arrived after %v, before the link's 30 ms", d)
	}
}

// TestArrival: the link's time is booked write after write, then the delay added; a rate
// near the largest int64 does not overflow.
func TestArrival(t *testing.T) {
	l := Link{Rate: 1000, Delay: 7}
	p := newPath(l)
	if at := p.arrival(100, 500, &l); at != 100+5e8+7 {
		t.Fatalf("500 bytes at 1000 B/s: arrive at %d", at)
	}
	if at := p.arrival(200, 1, &l); at != 100+5e8+1e6+7 {
		t.Fatalf("a byte behind them: arrives at %d", at)
	}
	l = Link{Rate: math.MaxInt64}
	if at := newPath(l).arrival(100, 64<<10, &l); at != 101 {
		t.Fatalf("64 KiB at MaxInt64 B/s: arrive at %d, want 101", at)
	}
}

func TestLinkBuffer(t *testing.T) {
	for _, tc := range []struct {
		link Link
		want int
	}{
		{Link{}, DefaultBuffer},
		{Link{Buffer: 1000, Rate: 1 << 30, Delay: time.Second}, 1000},
		{Link{Delay: time.Second}, DefaultBuffer},                          // no rate: nothing to cover
		{Link{Rate: 10_000_000, Delay: 100 * time.Millisecond}, 2_000_000}, // 2·Rate·Delay
		{Link{Rate: 1 << 40, Delay: time.Hour}, maxAutoBuffer},
	} {
		if got := tc.link.buffer(); got != tc.want {
			t.Errorf("%+v: buffer %d, want %d", tc.link, got, tc.want)
		}
	}
}

// TestInvalidLink: a negative field is a programming error, and panics.
func TestInvalidLink(t *testing.T) {
	n := NewNetwork(NetworkConfig{})
	x := n.NewTransport()
	for _, f := range []func(){
		func() { NewNetwork(NetworkConfig{Link: Link{Delay: -1}}) },
		func() { NewNetwork(NetworkConfig{Backlog: -1}) },
		func() { n.SetLink(x, x, Link{Rate: -1}) },
		func() { n.SetLink(x, NewNetwork(NetworkConfig{}).NewTransport(), Link{}) },
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Error("no panic")
				}
			}()
			f()
		}()
	}
}
