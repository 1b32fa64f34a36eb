package addrbook

import (
	"fmt"
	"testing"

	ma "github.com/multiformats/go-multiaddr"
)

func TestGroupOf(t *testing.T) {
	for _, tc := range []struct {
		addr string
		want Group
	}{
		{"/ip4/1.2.3.4/tcp/4001", "ip4:1.2.0.0/16"},
		{"/ip4/1.2.200.9/udp/1/quic-v1", "ip4:1.2.0.0/16"},
		{"/ip4/1.3.3.4/tcp/4001", "ip4:1.3.0.0/16"},
		{"/ip4/127.0.0.1/tcp/1", GroupLocal},
		{"/ip4/10.1.2.3/tcp/1", GroupLocal},
		{"/ip4/192.168.1.1/tcp/1", GroupLocal},
		{"/ip4/169.254.1.1/tcp/1", GroupLocal},
		{"/ip4/100.64.1.1/tcp/1", GroupLocal},
		{"/ip4/0.0.0.0/tcp/1", GroupLocal},
		{"/ip6/2a01:4f8:1:2::3/tcp/1", "ip6:2a01:4f8::/32"},
		{"/ip6/2a01:4f8:ffff::3/tcp/1", "ip6:2a01:4f8::/32"},
		{"/ip6/::1/tcp/1", GroupLocal},
		{"/ip6/fe80::1/tcp/1", GroupLocal},
		{"/ip6/fd00::1/tcp/1", GroupLocal},
		{"/ip6/2001:db8::1/tcp/1", GroupLocal},
		{"/ip6/::ffff:1.2.3.4/tcp/1", "ip4:1.2.0.0/16"},
		{"/ip6/2002:0102:0304::1/tcp/1", "ip4:1.2.0.0/16"},
		{"/dns/a.b.Example.COM./tcp/443/wss", "dns:example.com"},
		{"/dns4/example.com/tcp/1", "dns:example.com"},
		{"/dns6/localhost/tcp/1", GroupLocal},
		{"/dns/host/tcp/1", "dns:host"},
		{"/memory/7", GroupMemory},
		{"/ip6zone/eth0/ip6/fe80::1/tcp/1", GroupLocal},
		{"/unix/tmp/sock", "other:/unix"},
	} {
		if got := GroupOf(addr(tc.addr)); got != tc.want {
			t.Errorf("GroupOf(%s) = %q, want %q", tc.addr, got, tc.want)
		}
	}
	if got := GroupOf(nil); got != "other:" {
		t.Errorf("GroupOf(nil) = %q", got)
	}
}

// TestLocalAddrsSpread: the LAN and in-process groups are one group each, so their
// addresses from one source spread over the source's buckets instead of sharing one
// bucket: 200 of them from one source keep most of their places (one bucket of 32 slots
// held at most 32), while a public /16 from one source still shares one bucket.
func TestLocalAddrsSpread(t *testing.T) {
	for _, c := range []struct {
		name     string
		addr     func(i int) ma.Multiaddr
		min, max int
	}{
		{"memory", func(i int) ma.Multiaddr { return ma.StringCast(fmt.Sprintf("/memory/%d", 1000+i)) }, 120, 200},
		{"lan", func(i int) ma.Multiaddr { return ma.StringCast(fmt.Sprintf("/ip4/10.0.%d.%d/tcp/1", i/250, 1+i%250)) }, 120, 200},
		{"one /16", func(i int) ma.Multiaddr { return ip4(11, 1, i/250, 1+i%250) }, 1, 32},
	} {
		t.Run(c.name, func(t *testing.T) {
			b := newBook(t, nil)
			src := Source{Kind: SourceIdentify}
			for i := range 200 {
				b.Add(t0, peerN(i), []ma.Multiaddr{c.addr(i)}, src)
			}
			if n, _ := b.Len(); n < c.min || n > c.max {
				t.Fatalf("%d of 200 addresses held, want %d to %d", n, c.min, c.max)
			}
		})
	}
}
