//go:build linux

package lab

import (
	"net/netip"
	"testing"
)

func TestOwnerPID(t *testing.T) {
	for _, c := range []struct {
		name string
		pid  int // 0: not the lab's
	}{
		{"tl1234-1-a", 1234},
		{"tl1234-", 1234},
		{"tl4194304-12-router", 4194304},
		{"tl1234", 0},         // no dash after the PID
		{"tl-1-a", 0},         // no PID
		{"tl0123-1-a", 0},     // a leading zero is not how a PID is written
		{"tl12a4-1-a", 0},     // not digits
		{"tlx-1234-a", 0},     // prefix followed by something else
		{"xtl1234-1-a", 0},    // the prefix must start the name
		{"tl99999999999-", 0}, // longer than any PID
		{"docker0", 0},
		{"", 0},
	} {
		pid, ok := ownerPID(c.name, nsPrefix)
		if ok != (c.pid != 0) || pid != c.pid {
			t.Errorf("ownerPID(%q) = %d, %v; want %d", c.name, pid, ok, c.pid)
		}
	}
	if pid, ok := ownerPID("tendril-lab-77-abc", binPrefix); !ok || pid != 77 {
		t.Errorf("build directory: %d, %v", pid, ok)
	}
}

func TestHostAddr(t *testing.T) {
	for _, c := range []struct {
		prefix string
		n      int
		want   string // "" for an error
	}{
		{"10.3.0.0/24", 1, "10.3.0.1"},
		{"10.3.0.0/24", 254, "10.3.0.254"},
		{"10.3.0.0/24", 255, ""}, // the broadcast address
		{"10.3.0.0/24", 0, ""},
		{"10.3.0.0/23", 300, "10.3.1.44"},
		{"198.51.100.0/24", 2, "198.51.100.2"},
		{"fd00:0:0:7::/64", 1, "fd00:0:0:7::1"},
		{"fd00:0:0:7::/64", 256, "fd00:0:0:7::100"},
		{"2001:db8:0:1::/64", 70000, "2001:db8:0:1::1:1170"},
	} {
		got, err := hostAddr(netip.MustParsePrefix(c.prefix), c.n)
		if c.want == "" {
			if err == nil {
				t.Errorf("hostAddr(%s, %d) = %v, want an error", c.prefix, c.n, got)
			}
			continue
		}
		if err != nil || got != netip.MustParseAddr(c.want) {
			t.Errorf("hostAddr(%s, %d) = %v, %v; want %s", c.prefix, c.n, got, err, c.want)
		}
	}
}

// The public segments' addresses look public to net/netip, the LANs' private.
func TestSegmentRanges(t *testing.T) {
	l := New(t)
	lan, inet := l.LAN("lan0"), l.Public("inet")
	h := l.Host("h", lan, inet)
	for _, a := range []netip.Addr{h.Addr(lan), h.Link(lan).Addr6} {
		if !a.IsPrivate() {
			t.Errorf("LAN address %v is not private", a)
		}
	}
	for _, a := range []netip.Addr{h.Addr(inet), h.Link(inet).Addr6} {
		if a.IsPrivate() || !a.IsGlobalUnicast() {
			t.Errorf("public address %v: private %v, global unicast %v", a, a.IsPrivate(), a.IsGlobalUnicast())
		}
	}
	if h.Link(lan).Name != "eth0" || h.Link(inet).Name != "eth1" {
		t.Errorf("interfaces %s, %s; want eth0, eth1", h.Link(lan).Name, h.Link(inet).Name)
	}
}
