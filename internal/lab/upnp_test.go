//go:build linux

package lab

import (
	"net"
	"net/netip"
	"strings"
	"testing"

	natpmp "github.com/jackpal/go-nat-pmp"
)

// miniupnpd's configuration names the router's interfaces, its LAN, its own chains and
// lease file, and secure mode.
func TestMiniupnpdConfig(t *testing.T) {
	conf := miniupnpdConfig("eth0", "eth1", "10.1.0.0/24", "u", "/tmp/x/leases")
	for _, want := range []string{
		"ext_ifname=eth1\n", "listening_ip=eth0\n", "enable_natpmp=yes\n", "enable_upnp=yes\n",
		"secure_mode=yes\n", "upnp_table_name=tendril_nat\n", "upnp_forward_chain=upnp_forward\n",
		"lease_file=/tmp/x/leases\n", "allow 1024-65535 10.1.0.0/24 1024-65535\ndeny 0-65535 0.0.0.0/0 0-65535\n",
	} {
		if !strings.Contains(conf, want) {
			t.Errorf("config lacks %q:\n%s", want, conf)
		}
	}
}

// A host behind the UPnP router learns the external address by NAT-PMP and maps a TCP
// port to itself; a public host then connects to it from outside and is seen with its own
// address; once the mapping is deleted, the port drops connections again.
func TestNATPMPMapping(t *testing.T) {
	ctx := testContext(t)
	l := New(t)
	lan, inet := l.LAN("home"), l.Routable("inet")
	n := l.NATRouter("gw", lan, inet, NATConfig{UPnP: true})
	b := l.Host("b", lan)
	b.DefaultVia(n.Host)
	s := l.Host("s", inet)
	const port = 7000
	accepted := serveEcho(listen(t, b, netip.AddrPortFrom(b.Addr(lan), port).String()))
	target := netip.AddrPortFrom(n.External(), port).String()
	requireDropped(ctx, t, s, target, "before the mapping")

	client := natpmp.NewClient(net.IP(n.Gateway().AsSlice()))
	var ext *natpmp.GetExternalAddressResult
	var mapped *natpmp.AddPortMappingResult
	var err error
	// The client's UDP socket must be b's: each call opens one.
	if derr := b.Do(func() { ext, err = client.GetExternalAddress() }); derr != nil || err != nil {
		t.Fatalf("NAT-PMP external address: %v %v\n%s", derr, err, n.UPnP().Output())
	}
	if got := netip.AddrFrom4(ext.ExternalIPAddress); got != n.External() {
		t.Errorf("NAT-PMP external address %v, want %v", got, n.External())
	}
	if derr := b.Do(func() { mapped, err = client.AddPortMapping("tcp", port, port, 60) }); derr != nil || err != nil {
		t.Fatalf("NAT-PMP mapping: %v %v\n%s", derr, err, n.UPnP().Output())
	}
	if mapped.MappedExternalPort != port || mapped.PortMappingLifetimeInSeconds == 0 {
		t.Fatalf("mapping %+v, want external port %d with a lifetime", mapped, port)
	}
	c, err := dial(ctx, s, target)
	if err != nil {
		t.Fatalf("through the mapping: %v\n%s", err, n.UPnP().Output())
	}
	echoOnce(t, c, "mapped")
	c.Close()
	if got := netip.MustParseAddrPort((<-accepted).String()).Addr(); got != s.Addr(inet) {
		t.Errorf("b saw %v, want s's own %v", got, s.Addr(inet))
	}

	// A lifetime of 0 deletes the mapping (RFC 6886 section 3.4).
	if derr := b.Do(func() { _, err = client.AddPortMapping("tcp", port, 0, 0) }); derr != nil || err != nil {
		t.Fatalf("NAT-PMP delete: %v %v", derr, err)
	}
	requireDropped(ctx, t, s, target, "after the mapping was deleted")
}
