//go:build linux

package lab

import (
	"net"
	"net/netip"
	"slices"
	"testing"
	"time"
)

// A link delayed by D in each direction adds 2D to every round trip, to the TCP handshake
// as to the data after it, and still carries bulk data: large segments and checksums left
// to the hardware pass the delay line.
//
// The lower bound is exact (no frame can cross sooner); the upper bound only catches a
// delay applied twice, as a loaded machine may add milliseconds.
func TestDelayRoundTrip(t *testing.T) {
	ctx := testContext(t)
	l := New(t)
	lan := l.LAN("lan0")
	a, b := l.Host("a", lan), l.Host("b", lan)
	const d = 25 * time.Millisecond
	b.Link(lan).Delay(d)

	ln := listen(t, a, netip.AddrPortFrom(a.Addr(lan), 7000).String())
	serveEcho(ln)
	start := time.Now()
	c, err := dial(ctx, b, ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// The handshake waits for ARP too: one round trip more.
	handshake := time.Since(start)
	rtts := make([]time.Duration, 0, 10)
	for range 10 {
		start := time.Now()
		echoOnce(t, c, "ping")
		rtts = append(rtts, time.Since(start))
	}
	slices.Sort(rtts)
	t.Logf("delay %v each way: handshake %v, echo round trips min %v median %v max %v", d, handshake, rtts[0], rtts[5], rtts[9])
	if handshake < 2*d || rtts[0] < 2*d {
		t.Errorf("round trips of %v and %v through a link delayed %v each way, want at least %v", handshake, rtts[0], d, 2*d)
	}
	if rtts[5] > 4*d {
		t.Errorf("median round trip %v, want about %v", rtts[5], 2*d)
	}

	// Bulk data both ways over the same link: it arrives whole.
	const size = 16 << 20
	for _, dir := range []struct {
		name     string
		from, to *Host
	}{{"up", b, a}, {"down", a, b}} {
		ln := listen(t, dir.to, net.JoinHostPort(dir.to.Addr(lan).String(), "0"))
		took := transfer(ctx, t, dir.from, ln, size)
		t.Logf("%s: %d MiB in %v (%.0f Mbit/s)", dir.name, size>>20, took, float64(size*8)/took.Seconds()/1e6)
	}
}
