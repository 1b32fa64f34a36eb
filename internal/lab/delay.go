//go:build linux

package lab

import (
	"context"
	"fmt"
	"regexp"
	"time"
)

// wirePkg is the delay line that Delay runs (see labwire).
const wirePkg = "github.com/tendril-p2p/tendril/internal/lab/labwire"

var wireUp = regexp.MustCompile(`^wire up$`)

// Delay makes every frame on the link wait d in each direction, so that a round trip
// over it takes 2d more; the frames of a direction stay in order. The kernel's netem
// would do this, but the test machines lack it: the link's bridge end moves into a
// namespace of its own ("wireN"), where the lab's delay line (the labwire program, built
// with Build) copies frames between it and a new port of the bridge. It may be called
// once per link, and before Shape; the test fails if the delay line cannot start.
func (lk *Link) Delay(d time.Duration) {
	l := lk.Host.lab
	l.t.Helper()
	if d <= 0 {
		l.t.Fatalf("lab: %s on %s: delay %v, want a positive one", lk.Host, lk.Segment.name, d)
	}
	l.mu.Lock()
	if lk.wire != nil {
		l.mu.Unlock()
		l.t.Fatalf("lab: %s on %s is delayed already", lk.Host, lk.Segment.name)
	}
	l.wires++
	n := l.wires
	l.mu.Unlock()
	bin := Build(l.t, wirePkg)
	w := &Host{lab: l, name: fmt.Sprintf("wire%d", n)}
	w.ns = l.newNamespace(w.name)
	// Frames pass through the wire, which has nothing to say on either side: no IPv6
	// link-local addresses, router solicitations or multicast reports of its own.
	w.Sysctl("net.ipv6.conf.default.disable_ipv6", "1")
	w.Sysctl("net.ipv6.conf.all.disable_ipv6", "1")
	seg, old, port := lk.Segment.ns, lk.port, lk.port+"w"
	for _, args := range [][]string{
		{"-n", seg, "link", "set", old, "nomaster"},
		{"-n", seg, "link", "set", old, "netns", w.ns},
		{"-n", seg, "link", "add", port, "type", "veth", "peer", "name", "bridge", "netns", w.ns},
		{"-n", seg, "link", "set", port, "master", "br0", "up"},
		{"-n", w.ns, "link", "set", old, "name", "host", "up"},
		{"-n", w.ns, "link", "set", "bridge", "up"},
	} {
		if err := ip(args...); err != nil {
			l.t.Fatalf("lab: %v", err)
		}
	}
	p := w.Start(context.Background(), bin, "-delay", d.String(), "host", "bridge")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := p.WaitLine(ctx, wireUp); err != nil {
		l.t.Fatalf("lab: %s on %s: the delay line did not start: %v\n%s", lk.Host, lk.Segment.name, err, p.Output())
	}
	l.mu.Lock()
	lk.port, lk.wire = port, p
	l.mu.Unlock()
}
