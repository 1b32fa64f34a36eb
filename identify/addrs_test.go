package identify

import (
	"fmt"
	"net/netip"
	"slices"
	"testing"

	ma "github.com/multiformats/go-multiaddr"
	"github.com/tendril-p2p/tendril/peerrecord"
)

func addrStrings(ms []ma.Multiaddr) []string {
	var s []string
	for _, m := range ms {
		s = append(s, m.String())
	}
	return s
}

func TestExpandUnspecified(t *testing.T) {
	ips := func(s ...string) []netip.Addr {
		var out []netip.Addr
		for _, a := range s {
			out = append(out, netip.MustParseAddr(a))
		}
		return out
	}
	mas := func(s ...string) []ma.Multiaddr {
		var out []ma.Multiaddr
		for _, a := range s {
			out = append(out, ma.StringCast(a))
		}
		return out
	}
	cases := []struct {
		name   string
		listen []ma.Multiaddr
		ifaces []netip.Addr
		want   []string
	}{
		{"specific addresses kept", mas("/ip4/127.0.0.1/tcp/1", "/memory/7", "/ip4/192.0.2.1/tcp/2/ws"),
			ips("10.0.0.5"), []string{"/ip4/127.0.0.1/tcp/1", "/memory/7", "/ip4/192.0.2.1/tcp/2/ws"}},
		{"ipv4 unspecified: interfaces, no loopback", mas("/ip4/0.0.0.0/tcp/4001"),
			ips("127.0.0.1", "10.0.0.5", "192.0.2.9", "fe80::1", "2001:db8::1"),
			[]string{"/ip4/10.0.0.5/tcp/4001", "/ip4/192.0.2.9/tcp/4001"}},
		{"ipv4 unspecified, only loopback", mas("/ip4/0.0.0.0/tcp/4001/ws"),
			ips("127.0.0.1", "::1"), []string{"/ip4/127.0.0.1/tcp/4001/ws"}},
		{"ipv6 unspecified: no link-local", mas("/ip6/::/tcp/4001"),
			ips("10.0.0.5", "fe80::1", "::1", "2001:db8::1"), []string{"/ip6/2001:db8::1/tcp/4001"}},
		{"no interfaces: dropped", mas("/ip4/0.0.0.0/tcp/4001", "/memory/3"), nil, []string{"/memory/3"}},
		{"duplicates once", mas("/ip4/10.0.0.5/tcp/1", "/ip4/0.0.0.0/tcp/1"), ips("10.0.0.5"),
			[]string{"/ip4/10.0.0.5/tcp/1"}},
	}
	for _, c := range cases {
		if got := addrStrings(expandUnspecified(c.listen, c.ifaces)); !slices.Equal(got, c.want) {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
	// Many interfaces: at most a record's worth.
	var many []netip.Addr
	for i := range 40 {
		many = append(many, netip.MustParseAddr(fmt.Sprintf("10.0.0.%d", i+1)))
	}
	if got := expandUnspecified(mas("/ip4/0.0.0.0/tcp/1"), many); len(got) != peerrecord.MaxAddrs {
		t.Fatalf("%d addresses, want %d", len(got), peerrecord.MaxAddrs)
	}
}
