//go:build linux

package lab

import (
	"bytes"
	"context"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// Host is a network namespace of its own: a machine of the lab, or a router.
type Host struct {
	lab  *Lab
	name string
	ns   string

	// Guarded by lab.mu.
	links []*Link
}

// Link is a host's interface on a segment: one end of a veth pair in the host, the
// other a port of the segment's bridge.
type Link struct {
	Host    *Host
	Segment *Segment
	Name    string     // the interface in the host: eth0, eth1, ... in order of attachment
	Addr    netip.Addr // IPv4, in Segment.Prefix()
	Addr6   netip.Addr // IPv6, in Segment.Prefix6()
	port    string     // the bridge's end, in the segment's namespace

	wire *Process // the delay line, if Delay was called; guarded by lab.mu
}

// Host returns a new host attached to the given segments in order (eth0 on the first).
func (l *Lab) Host(name string, segs ...*Segment) *Host {
	l.t.Helper()
	h := &Host{lab: l, name: name, ns: l.newNamespace(name)}
	for _, s := range segs {
		h.Attach(s)
	}
	return h
}

// Router returns a new host attached to the given segments that forwards IPv4 and IPv6
// between its interfaces; hosts use it with DefaultVia or Route. It does no address
// translation: Run iptables in it for that.
func (l *Lab) Router(name string, segs ...*Segment) *Host {
	l.t.Helper()
	h := l.Host(name, segs...)
	h.Sysctl("net.ipv4.ip_forward", "1")
	h.Sysctl("net.ipv6.conf.all.forwarding", "1")
	return h
}

// Name returns the name the host was created with.
func (h *Host) Name() string { return h.name }

// String returns the host's name, for messages.
func (h *Host) String() string { return h.name }

// Attach joins h to s and returns the new link, up and addressed. The first link also
// carries the host's IPv4 multicast route (224.0.0.0/4).
func (h *Host) Attach(s *Segment) *Link {
	l := h.lab
	l.t.Helper()
	if s.lab != l {
		l.t.Fatalf("lab: %s: segment %s belongs to another lab", h, s.name)
	}
	l.mu.Lock()
	s.attached++
	n := s.attached
	lk := &Link{Host: h, Segment: s, Name: fmt.Sprintf("eth%d", len(h.links)), port: fmt.Sprintf("p%d", n)}
	h.links = append(h.links, lk)
	l.mu.Unlock()
	var err error
	if lk.Addr, err = hostAddr(s.v4, n); err != nil {
		l.t.Fatalf("lab: %s on %s: %v", h, s.name, err)
	}
	if lk.Addr6, err = hostAddr(s.v6, n); err != nil {
		l.t.Fatalf("lab: %s on %s: %v", h, s.name, err)
	}
	// The pair is created directly in the two namespaces: no name ever appears in the
	// root namespace, and names need only be unique within each namespace.
	cmds := [][]string{
		{"-n", s.ns, "link", "add", lk.port, "type", "veth", "peer", "name", lk.Name, "netns", h.ns},
		{"-n", s.ns, "link", "set", lk.port, "master", "br0", "up"},
		{"-n", h.ns, "addr", "add", netip.PrefixFrom(lk.Addr, s.v4.Bits()).String(), "dev", lk.Name},
		{"-n", h.ns, "addr", "add", netip.PrefixFrom(lk.Addr6, s.v6.Bits()).String(), "dev", lk.Name},
		{"-n", h.ns, "link", "set", lk.Name, "up"},
	}
	if lk.Name == "eth0" {
		// What a machine's default route does for a program that sends to a multicast
		// group without choosing an interface (mDNS): on a LAN without a router, there
		// is no default route to do it.
		cmds = append(cmds, []string{"-n", h.ns, "route", "add", "224.0.0.0/4", "dev", lk.Name})
	}
	for _, args := range cmds {
		if err := ip(args...); err != nil {
			l.t.Fatalf("lab: %v", err)
		}
	}
	return lk
}

// Link returns h's link on s; the test fails if h is not attached to s.
func (h *Host) Link(s *Segment) *Link {
	h.lab.t.Helper()
	h.lab.mu.Lock()
	defer h.lab.mu.Unlock()
	for _, lk := range h.links {
		if lk.Segment == s {
			return lk
		}
	}
	h.lab.t.Fatalf("lab: %s is not on %s", h, s.name)
	return nil
}

// Addr returns h's IPv4 address on s.
func (h *Host) Addr(s *Segment) netip.Addr {
	h.lab.t.Helper()
	return h.Link(s).Addr
}

// Route sends h's traffic for dst through via, which must share a segment with h.
func (h *Host) Route(dst netip.Prefix, via *Host) {
	l := h.lab
	l.t.Helper()
	gw, ok := h.gateway(via, dst.Addr().Is4())
	if !ok {
		l.t.Fatalf("lab: %s and %s share no segment", h, via)
	}
	family := "-4"
	if !dst.Addr().Is4() {
		family = "-6"
	}
	if err := ip("-n", h.ns, family, "route", "replace", dst.Masked().String(), "via", gw.String()); err != nil {
		l.t.Fatalf("lab: %v", err)
	}
}

// DefaultVia makes via h's default router for IPv4 and IPv6.
func (h *Host) DefaultVia(via *Host) {
	h.lab.t.Helper()
	h.Route(netip.MustParsePrefix("0.0.0.0/0"), via)
	h.Route(netip.MustParsePrefix("::/0"), via)
}

// gateway returns via's address on the first segment h shares with it.
func (h *Host) gateway(via *Host, v4 bool) (netip.Addr, bool) {
	h.lab.mu.Lock()
	defer h.lab.mu.Unlock()
	for _, mine := range h.links {
		for _, theirs := range via.links {
			if mine.Segment == theirs.Segment {
				if v4 {
					return theirs.Addr, true
				}
				return theirs.Addr6, true
			}
		}
	}
	return netip.Addr{}, false
}

// Sysctl sets a kernel network setting of h's namespace, such as "net.ipv4.ip_forward".
func (h *Host) Sysctl(key, value string) {
	h.lab.t.Helper()
	if !strings.HasPrefix(key, "net.") || strings.Contains(key, "..") || strings.Contains(key, "/") {
		h.lab.t.Fatalf("lab: sysctl %q: only net.* settings belong to a namespace", key)
	}
	path := filepath.Join("/proc/sys", strings.ReplaceAll(key, ".", "/"))
	var err error
	// /proc/sys/net is the namespace of the thread that opens it.
	if derr := h.Do(func() { err = os.WriteFile(path, []byte(value), 0) }); derr != nil {
		err = derr
	}
	if err != nil {
		h.lab.t.Fatalf("lab: %s: sysctl %s=%s: %v", h, key, value, err)
	}
}

// Do runs f on a thread inside h's namespace and returns when f does: sockets f opens
// (net.Listen, net.Dial) and processes it starts belong to h, and stay there after Do
// returns. Goroutines f starts do not run in h. It returns an error only if it cannot
// enter the namespace; a panic in f is re-raised in the caller.
func (h *Host) Do(f func()) error { return inNetns(h.ns, f) }

// Run runs a command inside h's namespace (ip, tc, iptables, ...) and returns its
// combined output; the error, if the command fails, includes that output.
func (h *Host) Run(ctx context.Context, name string, args ...string) ([]byte, error) {
	var out []byte
	var err error
	if derr := h.Do(func() { out, err = exec.CommandContext(ctx, name, args...).CombinedOutput() }); derr != nil {
		return nil, derr
	}
	if err != nil {
		return out, fmt.Errorf("lab: %s: %s %s: %w: %s", h, name, strings.Join(args, " "), err, bytes.TrimSpace(out))
	}
	return out, nil
}
