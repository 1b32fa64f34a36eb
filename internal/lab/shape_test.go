//go:build linux

package lab

import (
	"context"
	"io"
	"net"
	"os/exec"
	"strings"
	"testing"
	"time"
)

func TestTbfArgs(t *testing.T) {
	for _, c := range []struct {
		lim  Limit
		want string // "" for no qdisc, "error" for a refusal
	}{
		{Limit{}, ""},
		{Limit{Rate: 1_000_000}, "tbf rate 1000000bit burst 8192 latency 100000us"},
		{Limit{Rate: 100_000_000}, "tbf rate 100000000bit burst 125000 latency 100000us"},
		{Limit{Rate: 512_000, Burst: 3000, Latency: 20 * time.Millisecond}, "tbf rate 512000bit burst 3000 latency 20000us"},
		{Limit{Burst: 3000}, "error"},
		{Limit{Rate: -1}, "error"},
		{Limit{Rate: 1000, Latency: -time.Second}, "error"},
	} {
		args, err := tbfArgs(c.lim)
		got := strings.Join(args, " ")
		if err != nil {
			got = "error"
		}
		if got != c.want {
			t.Errorf("tbfArgs(%+v) = %q, want %q", c.lim, got, c.want)
		}
	}
}

// A token bucket of R bits/s with a burst of B bytes lets at most B + R/8 x t bytes
// through in t seconds, whatever the load on the machine: 128 KiB at 512 kbit/s with an
// 8 KiB burst cannot arrive in less than 1.92 s. The test checks 1.5 s in each direction,
// a bound that only a missing limit can break, and no upper bound, which a loaded
// machine could break.
func TestShapeLimitsRate(t *testing.T) {
	ctx := testContext(t)
	l := New(t)
	lan := l.LAN("lan0")
	a, b := l.Host("a", lan), l.Host("b", lan)
	lim := Limit{Rate: 512_000}
	b.Link(lan).Shape(lim, lim)
	const size = 128 << 10
	const floor = 1500 * time.Millisecond

	for _, dir := range []struct {
		name     string
		from, to *Host
	}{{"up", b, a}, {"down", a, b}} {
		ln := listen(t, dir.to, net.JoinHostPort(dir.to.Addr(lan).String(), "0"))
		took := transfer(ctx, t, dir.from, ln, size)
		t.Logf("%s: %d bytes in %v (%.0f kbit/s)", dir.name, size, took, float64(size*8)/took.Seconds()/1000)
		if took < floor {
			t.Errorf("%s: %d bytes in %v through a 512 kbit/s link, want at least %v", dir.name, size, took, floor)
		}
	}

	// A zero Limit removes the qdisc on both ends.
	b.Link(lan).Shape(Limit{}, Limit{})
	for _, ns := range []string{b.ns, lan.ns} {
		out, err := exec.CommandContext(ctx, "tc", "-n", ns, "qdisc", "show").CombinedOutput()
		if err != nil {
			t.Fatalf("%v: %s", err, out)
		}
		if strings.Contains(string(out), "tbf") {
			t.Errorf("tbf left in %s after Shape with zero limits:\n%s", ns, out)
		}
	}
}

// transfer sends size bytes from a dial on h to ln and returns how long it took until the
// receiver had them all.
func transfer(ctx context.Context, t *testing.T, h *Host, ln net.Listener, size int) time.Duration {
	t.Helper()
	received := make(chan error, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			received <- err
			return
		}
		defer c.Close()
		_, err = io.CopyN(io.Discard, c, int64(size))
		received <- err
	}()
	c, err := dial(ctx, h, ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	start := time.Now()
	go func() { _, _ = c.Write(make([]byte, size)) }()
	select {
	case err := <-received:
		if err != nil {
			t.Fatal(err)
		}
	case <-ctx.Done():
		t.Fatal(ctx.Err())
	}
	return time.Since(start)
}
