package pex

import (
	"slices"
	"testing"

	ma "github.com/multiformats/go-multiaddr"

	"github.com/tendril-p2p/tendril/secio"
)

func TestIsPublic(t *testing.T) {
	for a, want := range map[string]bool{
		"/ip4/8.8.8.8/tcp/1":              true,
		"/ip6/2a00:1450::1/tcp/1":         true,
		"/dns/example.com/tcp/443/wss":    true,
		"/ip4/127.0.0.1/tcp/1":            false,
		"/ip4/10.1.2.3/tcp/1":             false,
		"/ip4/172.16.5.4/tcp/1":           false,
		"/ip4/192.168.1.1/tcp/1":          false,
		"/ip4/169.254.1.1/tcp/1":          false,
		"/ip4/0.0.0.0/tcp/1":              false,
		"/ip4/100.64.1.1/tcp/1":           false,
		"/ip6/::1/tcp/1":                  false,
		"/ip6/::/tcp/1":                   false,
		"/ip6/fe80::1/tcp/1":              false,
		"/ip6/fd00::1/tcp/1":              false,
		"/ip6/::ffff:192.168.1.1/tcp/1":   false,
		"/ip6zone/eth0/ip6/fe80::1/tcp/1": false,
		"/dns/localhost/tcp/1":            false,
		"/memory/7":                       false,
		"/unix/tmp/sock":                  false,
		"/ip4/203.0.113.5/tcp/1":          false,
	} {
		if got := IsPublic(ma.StringCast(a)); got != want {
			t.Errorf("IsPublic(%s) = %v, want %v", a, got, want)
		}
	}
}

func TestAdmit(t *testing.T) {
	selfKey, _ := secio.GenerateKey()
	own := ownAddrs{string(ma.StringCast("/ip4/8.8.4.4/tcp/4001").Bytes()): {}}
	strs := func(as []ma.Multiaddr) []string {
		var out []string
		for _, a := range as {
			out = append(out, a.String())
		}
		return out
	}
	mine := newRecord(t, selfKey, "/ip4/8.8.8.8/tcp/1")
	if got := admit(mine, selfKey.PeerID(), own, false); got != nil {
		t.Fatalf("this node's own record admitted: %v", got)
	}
	rec := newRecord(t, nil, "/ip4/8.8.4.4/tcp/4001", "/ip4/9.9.9.9/tcp/1", "/ip4/127.0.0.1/tcp/1",
		"/ip4/192.168.1.1/tcp/1", "/ip4/10.0.0.1/tcp/1", "/ip4/169.254.3.3/tcp/1", "/ip4/0.0.0.0/tcp/1",
		"/ip6/::1/tcp/1", "/memory/3")
	if got := strs(admit(rec, selfKey.PeerID(), own, true)); !slices.Equal(got, []string{"/ip4/9.9.9.9/tcp/1"}) {
		t.Fatalf("from a public peer: %v", got)
	}
	got := strs(admit(rec, selfKey.PeerID(), own, false))
	if len(got) != 8 || slices.Contains(got, "/ip4/8.8.4.4/tcp/4001") {
		t.Fatalf("from a local peer: %v (own address dropped, the rest kept)", got)
	}
}
