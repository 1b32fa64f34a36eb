//go:build linux

package lab

import (
	"net"
	"testing"
	"time"
)

// mDNS between two hosts of a LAN without a router: a datagram to the mDNS group (sent
// without choosing an interface, for IPv4) reaches a host that joined the group on its link, over
// IPv4 and IPv6, as discovery needs.
func TestLANMulticast(t *testing.T) {
	l := New(t)
	lan := l.LAN("lan0")
	a, b := l.Host("a", lan), l.Host("b", lan)
	for _, c := range []struct {
		network string
		group   *net.UDPAddr
		from    string
	}{
		{"udp4", &net.UDPAddr{IP: net.ParseIP("224.0.0.251"), Port: 5353}, b.Addr(lan).String()},
		{"udp6", &net.UDPAddr{IP: net.ParseIP("ff02::fb"), Port: 5353}, ""}, // from b's link-local address
	} {
		var rc, sc *net.UDPConn
		var err error
		if derr := a.Do(func() {
			var ifi *net.Interface
			if ifi, err = net.InterfaceByName(a.Link(lan).Name); err == nil {
				rc, err = net.ListenMulticastUDP(c.network, ifi, c.group)
			}
		}); derr != nil || err != nil {
			t.Fatal(c.network, derr, err)
		}
		defer rc.Close()
		to := *c.group
		if c.network == "udp6" {
			to.Zone = b.Link(lan).Name // link-local scope needs one, on any machine
		}
		if derr := b.Do(func() { sc, err = net.DialUDP(c.network, nil, &to) }); derr != nil || err != nil {
			t.Fatal(c.network, derr, err)
		}
		defer sc.Close()
		if _, err := sc.Write([]byte("query")); err != nil {
			t.Fatal(c.network, err)
		}
		rc.SetReadDeadline(time.Now().Add(10 * time.Second))
		buf := make([]byte, 64)
		n, from, err := rc.ReadFromUDP(buf)
		if err != nil {
			t.Fatal(c.network, err)
		}
		if string(buf[:n]) != "query" || c.from != "" && from.IP.String() != c.from {
			t.Errorf("%s: got %q from %v, want query from %v", c.network, buf[:n], from, c.from)
		}
	}
}
