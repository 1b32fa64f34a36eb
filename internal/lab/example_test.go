//go:build linux

package lab_test

import (
	"io"
	"regexp"
	"testing"
	"time"

	"github.com/tendril-p2p/tendril/internal/lab"
)

// Two chat peers on a LAN, in a test. (An example cannot be a test of its own here: the
// lab needs root, so this one is compiled but not run.)
func Example() {
	_ = func(t *testing.T) {
		ctx := t.Context()
		l := lab.New(t) // skips without root, unless TENDRIL_LAB=require
		chat := lab.Build(t, "github.com/tendril-p2p/tendril/examples/chat")
		lan := l.LAN("lan0")
		a, b := l.Host("a", lan), l.Host("b", lan)
		b.Link(lan).Shape(lab.Limit{Rate: 1_000_000}, lab.Limit{Rate: 4_000_000}) // 1 Mbit/s up, 4 down

		alice := a.Start(ctx, chat, "-listen", "/ip4/"+a.Addr(lan).String()+"/tcp/4001")
		line, err := alice.WaitLine(ctx, regexp.MustCompile(`^listening on `))
		if err != nil {
			t.Fatal(err)
		}
		bob := b.Start(ctx, chat, "-name", "bob", "-dial", line[len("listening on "):])
		io.WriteString(bob.Stdin, "hello\n")
		if _, err := alice.WaitLine(ctx, regexp.MustCompile(`<bob> hello$`)); err != nil {
			t.Fatal(err) // the cleanup logs both programs' output
		}
	}
}

// A router between a LAN and a public segment. It only forwards, so the server needs a
// route back to the LAN; behind a NAT router (see ExampleLab_NATRouter) it would not.
func ExampleLab_Router() {
	_ = func(t *testing.T) {
		l := lab.New(t)
		lan, inet := l.LAN("home"), l.Public("inet")
		r := l.Router("r", lan, inet)    // 10.1.0.1 and 198.51.100.1
		h := l.Host("h", lan)            // 10.1.0.2
		server := l.Host("server", inet) // 198.51.100.2: looks public to net/netip
		h.DefaultVia(r)
		server.Route(lan.Prefix(), r)
	}
}

// A home behind a NAT router that runs miniupnpd, with a delayed uplink, and a host on
// the internet.
func ExampleLab_NATRouter() {
	_ = func(t *testing.T) {
		l := lab.New(t)
		lan, inet := l.LAN("home"), l.Routable("inet") // miniupnpd needs a routable WAN
		gw := l.NATRouter("gw", lan, inet, lab.NATConfig{UPnP: true})
		gw.WAN.Delay(20 * time.Millisecond) // 40 ms more on every round trip outside
		h := l.Host("h", lan)
		h.DefaultVia(gw.Host)
		server := l.Host("server", inet) // sees h's connections come from gw.External()
		_ = server
		// Other kinds: lab.NATConfig{} (port-restricted cone), lab.FullCone, lab.Symmetric.
	}
}
