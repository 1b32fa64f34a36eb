//go:build linux

package holepunch

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tendril-p2p/tendril/internal/lab"
)

var (
	listeningRE = regexp.MustCompile(`^LISTENING (\S+)`)
	circuitRE   = regexp.MustCompile(`^CIRCUIT (\S+)`)
	resultRE    = regexp.MustCompile(`^RESULT (.*)`)
	tookRE      = regexp.MustCompile(`^direct took=(\S+)`)
)

// TestLabPunch: B and C each behind a home router of the kind under test, A public as
// the relay both know. B reserves a slot on A; C (a new process, a new port, each try)
// dials B through A, and B punches. Endpoint-independent NATs must let every try through,
// endpoint-dependent filtering at least 18 of 20; a symmetric NAT keeps the session
// relayed, and the report says why. The links to the routers add 10 ms each way (20 ms
// round trips to the relay, 40 ms between B and C), so that the timing of the two ends
// matters.
func TestLabPunch(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs nodes in network namespaces")
	}
	for _, c := range []struct {
		name   string
		b, c   lab.NATConfig
		tries  int
		needOK int // tries that must end direct; with need 0, none may
	}{
		{"EIM-full-cone", lab.FullCone, lab.FullCone, 20, 20},
		{"EIM-address-dependent-filtering", lab.NATConfig{Filtering: lab.AddressDependentFiltering}, lab.NATConfig{Filtering: lab.AddressDependentFiltering}, 20, 18},
		{"EIM-port-dependent-filtering", lab.NATConfig{}, lab.NATConfig{}, 20, 18},
		{"symmetric", lab.Symmetric, lab.NATConfig{}, 1, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			defer cancel()
			l := lab.New(t)
			bin := lab.Build(t, "github.com/tendril-p2p/tendril/holepunch/internal/punchnode")
			inet := l.Public("inet")
			a := l.Host("a", inet)
			a.Link(inet).Delay(5 * time.Millisecond)
			hosts := map[string]*lab.Host{}
			for name, kind := range map[string]lab.NATConfig{"b": c.b, "c": c.c} {
				lan := l.LAN("lan-" + name)
				n := l.NATRouter("nat-"+name, lan, inet, kind)
				n.WAN.Delay(10 * time.Millisecond)
				h := l.Host(name, lan)
				h.DefaultVia(n.Host)
				hosts[name] = h
			}
			relayNode := a.Start(ctx, bin, "-relay", "-listen", "/ip4/0.0.0.0/tcp/4001")
			relayAddr := waitMatch(t, ctx, relayNode, listeningRE)
			relayAddr = strings.Replace(relayAddr, "/ip4/0.0.0.0/", "/ip4/"+a.Addr(inet).String()+"/", 1)
			bNode := hosts["b"].Start(ctx, bin, "-listen", "/ip4/0.0.0.0/tcp/4001", "-reserve", relayAddr)
			circuit := waitMatch(t, ctx, bNode, circuitRE)

			var took []time.Duration
			var failures []string
			for try := range c.tries {
				cNode := hosts["c"].Start(ctx, bin, "-listen", fmt.Sprintf("/ip4/0.0.0.0/tcp/%d", 5000+try),
					"-bootstrap", relayAddr, "-dial", circuit, "-wait", "30s")
				res := waitMatch(t, ctx, cNode, resultRE)
				if m := tookRE.FindStringSubmatch(res); m != nil {
					d, err := time.ParseDuration(m[1])
					if err != nil {
						t.Fatal(err)
					}
					took = append(took, d)
				} else {
					failures = append(failures, res)
				}
				if err := cNode.Stop(); err != nil {
					t.Logf("stopping C: %v", err)
				}
			}
			ok := len(took)
			t.Logf("%s: %d of %d tries direct; failures: %q", c.name, ok, c.tries, failures)
			if len(took) > 0 {
				slices.Sort(took)
				t.Logf("relayed session to direct session: median %s, worst %s, best %s",
					took[len(took)/2], took[len(took)-1], took[0])
			}
			if c.needOK == 0 {
				if ok != 0 {
					t.Fatalf("%d tries went direct through a symmetric NAT", ok)
				}
				if !strings.Contains(failures[0], "symmetric") {
					t.Fatalf("the report does not say why: %q", failures[0])
				}
				return
			}
			if ok < c.needOK {
				t.Fatalf("%d of %d tries direct, want at least %d", ok, c.tries, c.needOK)
			}
		})
	}
}

func waitMatch(t *testing.T, ctx context.Context, p *lab.Process, re *regexp.Regexp) string {
	t.Helper()
	line, err := p.WaitLine(ctx, re)
	if err != nil {
		t.Fatalf("%s: %v\n%s", p, err, p.Output())
	}
	return re.FindStringSubmatch(line)[1]
}
