//go:build linux

package lab

import (
	"context"
	"crypto/rand"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"
)

// miniupnpdPath is where Debian's miniupnpd package puts the daemon.
const miniupnpdPath = "/usr/sbin/miniupnpd"

// miniupnpdReady is the line miniupnpd logs once it answers NAT-PMP (after UPnP's HTTP).
var miniupnpdReady = regexp.MustCompile(`Listening for NAT-PMP/PCP traffic on port 5351`)

// startMiniupnpd runs miniupnpd in the foreground on the router, as the LAN's UPnP IGD
// (SSDP and HTTP on the LAN interface) and NAT-PMP/PCP gateway (UDP 5351), and waits
// until it answers. It adds its forwarding rules to the chains upnp_* of the router's
// table, which the base chains jump to. Secure mode lets a host map ports only to
// itself, and only ports 1024-65535.
func (n *NAT) startMiniupnpd() *Process {
	l := n.lab
	l.t.Helper()
	for _, p := range publicV4 {
		if p.Contains(n.External()) {
			l.t.Fatalf("lab: %s: miniupnpd maps no ports behind a documentation address (%v): put the WAN on a Routable segment", n.Host, n.External())
		}
	}
	dir := l.t.TempDir()
	conf := miniupnpdConfig(n.LAN.Name, n.WAN.Name, n.LAN.Segment.Prefix().String(), newUUID(),
		filepath.Join(dir, "leases"))
	path := filepath.Join(dir, "miniupnpd.conf")
	if err := os.WriteFile(path, []byte(conf), 0o600); err != nil {
		l.t.Fatalf("lab: %v", err)
	}
	p := n.Start(context.Background(), miniupnpdPath, "-d", "-f", path, "-P", filepath.Join(dir, "pid"))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := p.WaitLine(ctx, miniupnpdReady); err != nil {
		l.t.Fatalf("lab: %s: miniupnpd did not start: %v\n%s", n.Host, err, p.Output())
	}
	return p
}

// UPnP returns the router's miniupnpd process (its log is its output), or nil if the
// router runs none.
func (n *NAT) UPnP() *Process { return n.upnp }

// miniupnpdConfig returns miniupnpd's configuration for a router between the interfaces
// lan and wan, whose LAN is the IPv4 prefix lanPrefix.
func miniupnpdConfig(lan, wan, lanPrefix, uuid, leases string) string {
	return strings.Join([]string{
		"ext_ifname=" + wan,
		"listening_ip=" + lan,
		"http_port=0",
		"enable_natpmp=yes",
		"enable_upnp=yes",
		"secure_mode=yes",
		"system_uptime=yes",
		// A lab has no STUN server: the WAN address is the external address.
		"ext_perform_stun=no",
		"notify_interval=30",
		"clean_ruleset_interval=600",
		"uuid=" + uuid,
		// Each router's own leases, not the package's shared file.
		"lease_file=" + leases,
		"upnp_table_name=" + natTable,
		"upnp_nat_table_name=" + natTable,
		"upnp_forward_chain=upnp_forward",
		"upnp_nat_chain=upnp_prerouting",
		"upnp_nat_postrouting_chain=upnp_postrouting",
		"allow 1024-65535 " + lanPrefix + " 1024-65535",
		"deny 0-65535 0.0.0.0/0 0-65535",
		"",
	}, "\n")
}

// newUUID returns a random (version 4) UUID: each gateway's identity in SSDP.
func newUUID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:])
}
