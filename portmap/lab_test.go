//go:build linux

package portmap_test

import (
	"context"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/tendril-p2p/tendril/internal/lab"
)

// TestRealGateway against the lab's miniupnpd, by each method: this test binary runs
// TestRealGateway as a process on a host behind the router (the whole process in the
// host's namespace, as the test expects of a machine behind a gateway), which must map
// its port (the external address is the router's) and remove the mapping without error;
// the router's rules hold no forwarding to the host before or after. (The node package's
// TestLabPortMapping also sees the rule while the mapping is held.)
func TestRealGatewayInLab(t *testing.T) {
	if os.Getenv("TENDRIL_PORTMAP_GATEWAY") != "" {
		t.Skip("running as TestRealGateway's child")
	}
	for _, method := range []string{"nat-pmp", "upnp"} {
		t.Run(method, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			l := lab.New(t)
			lan, inet := l.LAN("home"), l.Routable("inet")
			gw := l.NATRouter("gw", lan, inet, lab.NATConfig{UPnP: true})
			h := l.Host("h", lan)
			h.DefaultVia(gw.Host)
			rules := func() string {
				out, err := gw.Run(ctx, "nft", "list", "table", "inet", "tendril_nat")
				if err != nil {
					t.Fatal(err)
				}
				return string(out)
			}
			internal := h.Addr(lan).String() + ":"
			if strings.Contains(rules(), internal) {
				t.Fatalf("a rule to %s before the test:\n%s", h.Addr(lan), rules())
			}
			p := h.StartEnv(ctx, []string{"TENDRIL_PORTMAP_GATEWAY=" + gw.Gateway().String(), "TENDRIL_PORTMAP_METHOD=" + method},
				os.Args[0], "-test.run=^TestRealGateway$", "-test.v", "-test.count=1")
			line, err := p.WaitLine(ctx, regexp.MustCompile(`mapped: `+regexp.QuoteMeta(method)+` tcp (\d+) -> `+regexp.QuoteMeta(gw.External().String())+`:(\d+) via `))
			if err != nil {
				t.Fatal(err)
			}
			t.Log(strings.TrimSpace(line))
			if err := p.Wait(ctx); err != nil {
				t.Fatalf("TestRealGateway: %v\n%s", err, p.Output())
			}
			if _, err := p.WaitLine(ctx, regexp.MustCompile(`^--- PASS: TestRealGateway `)); err != nil {
				t.Fatalf("%v\n%s", err, p.Output())
			}
			if r := rules(); strings.Contains(r, internal) {
				t.Errorf("a rule to %s after the Mapper closed:\n%s", h.Addr(lan), r)
			}
		})
	}
}
