//go:build linux

package lab

import (
	"context"
	"fmt"
	"net/netip"
	"os/exec"
	"strings"
	"time"
)

// Mapping is how a NAT chooses the external port of an outgoing connection, in the terms
// of RFC 4787 section 4.1.
type Mapping int

const (
	// EndpointIndependentMapping keeps one external port for an internal address and port,
	// whatever the destination: the router masquerades, and Linux keeps the source port
	// whenever the connection's tuple with it is free, as it is unless two internal hosts
	// use the same port towards the same destination. This is what hole punching needs.
	EndpointIndependentMapping Mapping = iota
	// EndpointDependentMapping gives every new connection a random external port, even
	// from the same internal port to the same destination ("masquerade fully-random"):
	// the symmetric NAT that hole punching cannot cross.
	EndpointDependentMapping
)

// Filtering is which unsolicited inbound packets a NAT lets through to an internal host,
// in the terms of RFC 4787 section 5. A packet that no filter lets through is dropped,
// never answered with a reset or an ICMP error, as home routers do.
type Filtering int

const (
	// AddressAndPortDependentFiltering lets in only the packets of connections that the
	// internal host opened, from exactly the address and port it sent to: the connection
	// tracking of the Linux kernel as it is ("port-restricted cone" with endpoint-
	// independent mapping). A TCP SYN from that address and port while the host's own SYN
	// is out is the other half of a simultaneous open, and gets through.
	AddressAndPortDependentFiltering Filtering = iota
	// AddressDependentFiltering also lets a new connection in to an external port from any
	// port of an address that the port's internal host has sent to within the mapping's
	// lifetime ("restricted cone").
	AddressDependentFiltering
	// EndpointIndependentFiltering lets a new connection in to an external port from
	// anyone, within the mapping's lifetime ("full cone").
	EndpointIndependentFiltering
)

// MappingLifetime is how long an address-dependent or endpoint-independent filter
// remembers a mapping after its last outgoing packet. RFC 4787 asks for at least two
// minutes for UDP; TCP connections in the kernel's table live longer anyway.
const MappingLifetime = 2 * time.Minute

// NATConfig says how a NAT router behaves. The zero value is a router that masquerades
// as Linux does by default: endpoint-independent mapping that keeps ports, address- and
// port-dependent filtering, no UPnP.
type NATConfig struct {
	Mapping   Mapping
	Filtering Filtering
	// UPnP runs Debian's miniupnpd on the router as the LAN's UPnP IGD and NAT-PMP
	// gateway, which lets the LAN's hosts forward external ports to themselves.
	UPnP bool
}

// Symmetric is a NAT that hole punching cannot cross: a random external port for every
// connection, and only replies let in.
var Symmetric = NATConfig{Mapping: EndpointDependentMapping}

// FullCone is the most open NAT: one external port per internal port, and anyone may
// send to it once it is mapped.
var FullCone = NATConfig{Filtering: EndpointIndependentFiltering}

// Validate reports a configuration that is not one of the kinds above. Address- or
// endpoint-independent filtering needs endpoint-independent mapping: with a new port
// per connection there is no mapping to filter for.
func (c NATConfig) Validate() error {
	if c.Mapping < EndpointIndependentMapping || c.Mapping > EndpointDependentMapping {
		return fmt.Errorf("lab: NAT mapping %d unknown", c.Mapping)
	}
	if c.Filtering < AddressAndPortDependentFiltering || c.Filtering > EndpointIndependentFiltering {
		return fmt.Errorf("lab: NAT filtering %d unknown", c.Filtering)
	}
	if c.Mapping == EndpointDependentMapping && c.Filtering != AddressAndPortDependentFiltering {
		return fmt.Errorf("lab: NAT with endpoint-dependent mapping filters by address and port only")
	}
	return nil
}

// String names the kind in RFC 4787's terms, for messages.
func (c NATConfig) String() string {
	m := map[Mapping]string{EndpointIndependentMapping: "EIM", EndpointDependentMapping: "EDM"}[c.Mapping]
	f := map[Filtering]string{
		AddressAndPortDependentFiltering: "APDF", AddressDependentFiltering: "ADF", EndpointIndependentFiltering: "EIF",
	}[c.Filtering]
	s := m + "/" + f
	if c.UPnP {
		s += "+UPnP"
	}
	return s
}

// NAT is a router between a LAN and a public segment that translates the LAN's IPv4
// addresses to its own public one. Hosts on the LAN use it with DefaultVia(n.Host).
type NAT struct {
	*Host
	Config NATConfig
	LAN    *Link // the inside interface; its address is the LAN's gateway
	WAN    *Link // the outside interface; its address is the external address
	upnp   *Process
}

// natTable is the nftables table that holds a NAT router's rules; miniupnpd adds its
// rules to chains of the same table.
const natTable = "tendril_nat"

// NATRouter returns a router on lan (eth0) and wan (eth1) that masquerades the LAN's
// IPv4 traffic behind its address on wan and behaves as cfg says. It forwards no IPv6,
// as a home router with an IPv4-only provider, and drops every packet from wan that its
// filter does not let through, to it or through it, without an answer. It needs the nft
// command (Debian's nftables) and, with cfg.UPnP, miniupnpd: without them it skips the
// test, or fails it under TENDRIL_LAB=require.
func (l *Lab) NATRouter(name string, lan, wan *Segment, cfg NATConfig) *NAT {
	l.t.Helper()
	if err := cfg.Validate(); err != nil {
		l.t.Fatal(err)
	}
	if _, err := exec.LookPath("nft"); err != nil {
		unavailable(l.t, "no nft command (nftables)")
	}
	if cfg.UPnP {
		if _, err := exec.LookPath(miniupnpdPath); err != nil {
			unavailable(l.t, "no %s (Debian's miniupnpd)", miniupnpdPath)
		}
	}
	h := l.Host(name, lan, wan)
	n := &NAT{Host: h, Config: cfg, LAN: h.Link(lan), WAN: h.Link(wan)}
	h.Sysctl("net.ipv4.ip_forward", "1")
	ctx, cancel := context.WithTimeout(context.Background(), commandTimeout)
	defer cancel()
	if err := n.apply(ctx, natRuleset(cfg, n.LAN.Name, n.WAN.Name)); err != nil {
		l.t.Fatalf("lab: %v", err)
	}
	if cfg.UPnP {
		n.upnp = n.startMiniupnpd()
	}
	return n
}

// External returns the router's public IPv4 address: what the LAN's connections come
// from, as the outside sees them.
func (n *NAT) External() netip.Addr { return n.WAN.Addr }

// Gateway returns the router's IPv4 address on its LAN.
func (n *NAT) Gateway() netip.Addr { return n.LAN.Addr }

// apply loads an nftables ruleset into the router's namespace in one transaction.
func (n *NAT) apply(ctx context.Context, ruleset string) error {
	var out []byte
	var err error
	if derr := n.Do(func() {
		cmd := exec.CommandContext(ctx, "nft", "-f", "-")
		cmd.Stdin = strings.NewReader(ruleset)
		out, err = cmd.CombinedOutput()
	}); derr != nil {
		return derr
	}
	if err != nil {
		return fmt.Errorf("%s: nft -f: %w: %s\n%s", n.Host, err, out, ruleset)
	}
	return nil
}

// natRuleset returns the nftables ruleset of a NAT router with the given inside and
// outside interfaces.
//
// Mapping is the kernel's masquerade, which keeps the source port when it can, or with
// fully-random a fresh random port per connection. Filtering starts from a forward chain
// that drops everything from outside except the packets of known connections (the
// kernel's connection tracking recognises a SYN from the exact endpoint an inside host is
// dialling as the other half of a simultaneous open) and connections the router itself
// translated inbound ("ct status dnat"). Address-dependent and endpoint-independent
// filtering add such inbound translations: a chain after masquerade records, for each
// outgoing packet, external port -> internal address and port (the cone map) and
// destination address + external port (the peers set), each kept MappingLifetime after
// its last packet; a new inbound connection to an external port is translated through
// the cone map, for any sender (endpoint-independent) or only for a sender in the peers
// set (address-dependent). The input chain drops what comes from outside to the router
// itself, so that nothing it does not serve is answered with a reset either.
func natRuleset(cfg NATConfig, lan, wan string) string {
	var b strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&b, format+"\n", args...) }
	masq := "masquerade"
	if cfg.Mapping == EndpointDependentMapping {
		masq = "masquerade fully-random"
	}
	life := int(MappingLifetime / time.Second)
	// inet: miniupnpd adds its rules to an inet table.
	p("table inet %s {", natTable)
	if cfg.Filtering != AddressAndPortDependentFiltering {
		for _, proto := range []string{"tcp", "udp"} {
			p("  map cone_%s { typeof %s dport : ip saddr . %s dport; flags dynamic,timeout; timeout %ds; }", proto, proto, proto, life)
			p("  set peers_%s { typeof ip saddr . %s dport; flags dynamic,timeout; timeout %ds; }", proto, proto, life)
		}
	}
	// miniupnpd's chains: it fills them, the base chains below jump to them.
	p("  chain upnp_forward {}")
	p("  chain upnp_prerouting {}")
	p("  chain upnp_postrouting {}")
	p("  chain forward {")
	p("    type filter hook forward priority filter; policy drop;")
	p("    ct state established,related accept")
	p("    ct state invalid drop")
	// IPv4 only: an IPv4-only home, as the router does not forward IPv6 at all.
	p("    iifname %q oifname %q meta nfproto ipv4 accept", lan, wan)
	p("    iifname %q jump upnp_forward", wan)
	p("    iifname %q ct status dnat accept", wan)
	p("  }")
	p("  chain input {")
	p("    type filter hook input priority filter; policy accept;")
	p("    iifname %q ct state established,related accept", wan)
	p("    iifname %q drop", wan)
	p("  }")
	p("  chain prerouting {")
	p("    type nat hook prerouting priority dstnat; policy accept;")
	p("    iifname %q jump upnp_prerouting", wan)
	switch cfg.Filtering {
	case EndpointIndependentFiltering:
		for _, proto := range []string{"tcp", "udp"} {
			p("    iifname %q dnat ip to %s dport map @cone_%s", wan, proto, proto)
		}
	case AddressDependentFiltering:
		for _, proto := range []string{"tcp", "udp"} {
			p("    iifname %q ip saddr . %s dport @peers_%s dnat ip to %s dport map @cone_%s", wan, proto, proto, proto, proto)
		}
	}
	p("  }")
	p("  chain postrouting {")
	p("    type nat hook postrouting priority srcnat; policy accept;")
	p("    oifname %q jump upnp_postrouting", wan)
	p("    oifname %q meta nfproto ipv4 %s", wan, masq)
	p("  }")
	if cfg.Filtering != AddressAndPortDependentFiltering {
		// After masquerade, so that the connection's reply tuple holds the external port.
		p("  chain learn {")
		p("    type filter hook postrouting priority srcnat + 10; policy accept;")
		for _, proto := range []string{"tcp", "udp"} {
			p("    oifname %q ct status snat meta l4proto %s update @cone_%s { ct reply proto-dst : ct original ip saddr . ct original proto-src }", wan, proto, proto)
			p("    oifname %q ct status snat meta l4proto %s update @peers_%s { ip daddr . ct reply proto-dst }", wan, proto, proto)
		}
		p("  }")
	}
	p("}")
	return b.String()
}
