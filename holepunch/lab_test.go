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
			l, bin, inet, a := punchLab(t)
			hosts := map[string]*lab.Host{"b": behindNAT(l, inet, "b", c.b), "c": behindNAT(l, inet, "c", c.c)}
			relayAddr := startRelay(t, ctx, bin, a, inet)
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

// punchLab builds the punch tests' lab: a public segment inet with A on it, its link
// delayed 5 ms each way, and the punchnode program.
func punchLab(t *testing.T) (l *lab.Lab, bin string, inet *lab.Segment, a *lab.Host) {
	l = lab.New(t)
	bin = lab.Build(t, "github.com/tendril-p2p/tendril/holepunch/internal/punchnode")
	inet = l.Public("inet")
	a = l.Host("a", inet)
	a.Link(inet).Delay(5 * time.Millisecond)
	return l, bin, inet, a
}

// behindNAT adds a host named name on a LAN of its own behind a NAT router of the kind
// given, whose public link (on inet) delays each way by 10 ms.
func behindNAT(l *lab.Lab, inet *lab.Segment, name string, kind lab.NATConfig) *lab.Host {
	lan := l.LAN("lan-" + name)
	n := l.NATRouter("nat-"+name, lan, inet, kind)
	n.WAN.Delay(10 * time.Millisecond)
	h := l.Host(name, lan)
	h.DefaultVia(n.Host)
	return h
}

// startRelay starts a relay node on a (public, on inet) and returns its address.
func startRelay(t *testing.T, ctx context.Context, bin string, a *lab.Host, inet *lab.Segment) string {
	t.Helper()
	relayNode := a.Start(ctx, bin, "-relay", "-listen", "/ip4/0.0.0.0/tcp/4001")
	relayAddr := waitMatch(t, ctx, relayNode, listeningRE)
	return strings.Replace(relayAddr, "/ip4/0.0.0.0/", "/ip4/"+a.Addr(inet).String()+"/", 1)
}

var (
	pingRE   = regexp.MustCompile(`^PING median=(\S+) max=(\S+) n=(\d+)`)
	attackRE = regexp.MustCompile(`^ATTACK (.*)`)
)

// TestLabHostileRelay: from one host on the public side, an attacker floods the relay with
// reservations from 200 identities, asks for 40 circuits at once to B (behind a NAT, with a
// reservation), and pushes data into a circuit as fast as it can. The relay's limits hold
// (one address gets MaxReservationsPerIP reservations, one peer MaxCircuitsPerPeer
// circuits), a peer pinging the relay meanwhile keeps its round trips, and B, its
// reservation intact, is then reached through the relay and punched as before.
func TestLabHostileRelay(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs nodes in network namespaces")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	l := lab.New(t)
	bin := lab.Build(t, "github.com/tendril-p2p/tendril/holepunch/internal/punchnode")
	inet := l.Public("inet")
	a, h, m := l.Host("a", inet), l.Host("h", inet), l.Host("m", inet)
	hosts := map[string]*lab.Host{"b": behindNAT(l, inet, "b", lab.NATConfig{}), "c": behindNAT(l, inet, "c", lab.NATConfig{})}
	relayAddr := startRelay(t, ctx, bin, a, inet)
	bNode := hosts["b"].Start(ctx, bin, "-listen", "/ip4/0.0.0.0/tcp/4001", "-reserve", relayAddr)
	circuit := waitMatch(t, ctx, bNode, circuitRE)
	pinger := h.Start(ctx, bin, "-ping", relayAddr, "-every", "500ms")
	median := func(what string) time.Duration {
		mm := pingRE.FindStringSubmatch(waitLine(t, ctx, pinger, pingRE))
		d, err := time.ParseDuration(mm[1])
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%s: echo with the relay median %s, max %s (%s round trips)", what, mm[1], mm[2], mm[3])
		return d
	}
	median("before")
	before := median("before")

	var results []string
	for _, attack := range [][]string{
		{"-attack", "reservations", "-target", relayAddr, "-n", "200"},
		{"-attack", "circuits", "-dial", circuit, "-n", "40"},
		{"-attack", "data", "-dial", circuit},
	} {
		p := m.Start(ctx, bin, attack...)
		res := waitMatch(t, ctx, p, attackRE)
		t.Logf("attack: %s", res)
		results = append(results, res)
		during := median("during " + attack[1])
		if during > 10*before+20*time.Millisecond {
			t.Errorf("during the %s attack the relay's echo median went from %s to %s", attack[1], before, during)
		}
	}
	var held, open int
	if _, err := fmt.Sscanf(results[0], "reservations held=%d", &held); err != nil {
		t.Fatal(err)
	}
	if _, err := fmt.Sscanf(results[1], "circuits open=%d", &open); err != nil {
		t.Fatal(err)
	}
	if held > 4 || held == 0 {
		t.Errorf("one address held %d reservations, the per-IP cap is 4", held)
	}
	if open > 8 {
		t.Errorf("one peer held %d circuits at once, the per-peer cap is 8", open)
	}
	// The flood gets no further than the circuit's byte limit (1 MiB each way, plus what
	// the streams' windows hold) before the relay or the target stops it.
	var sent int64
	if _, err := fmt.Sscanf(results[2], "data sent=%d", &sent); err != nil {
		t.Fatal(err)
	}
	if sent > 2<<20 {
		t.Errorf("the data flood pushed %d bytes through one circuit", sent)
	}
	// B's reservation survived: a newcomer reaches B through the relay, and the punch
	// works as before.
	cNode := hosts["c"].Start(ctx, bin, "-listen", "/ip4/0.0.0.0/tcp/4001", "-bootstrap", relayAddr, "-dial", circuit, "-wait", "30s")
	if res := waitMatch(t, ctx, cNode, resultRE); !tookRE.MatchString(res) {
		t.Fatalf("after the attacks, C reached B: %s", res)
	}
}

func waitLine(t *testing.T, ctx context.Context, p *lab.Process, re *regexp.Regexp) string {
	t.Helper()
	line, err := p.WaitLine(ctx, re)
	if err != nil {
		t.Fatalf("%s: %v\n%s", p, err, p.Output())
	}
	return line
}

// TestLabRepunch: B (behind a NAT) and C punch, the direct session closes, and a second
// later C dials B through the relay again from the same listen port, as a chat peer that
// reconnects does, so that B punches again between the same two ports while the first
// connection's end is fresh; every round must go direct. The direct session is closed by
// the initiator B, by the responder C, or by C's process exiting (a restart: a new process
// on the same port). C is behind a NAT or public, B and C both public in the plain case.
//
// C uses no TCP timestamps, as Windows does by default: Linux lets a connect from a bound
// port reuse a four-tuple in TIME_WAIT only when the old connection had timestamps, so
// without them a side that closed first (the Service's close makes both sides send a FIN
// about at once: often both) kept the tuple for a minute, and its connect failed with
// EADDRNOTAVAIL (both sides' when both closed first, the initiator's or the responder's
// otherwise), every attempt of the round. secio's close now leaves no TIME_WAIT behind.
func TestLabRepunch(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs nodes in network namespaces")
	}
	nat := lab.NATConfig{} // endpoint-independent mapping, port-dependent filtering
	for _, c := range []struct {
		name   string
		b, c   *lab.NATConfig // nil: the host is on the public segment
		closer string         // peer: B closes each direct session; self: C does; restart: C's process exits
	}{
		{"NATs/initiator-closes", &nat, &nat, "peer"},
		{"NATs/responder-closes", &nat, &nat, "self"},
		{"NATs/responder-restarts", &nat, &nat, "restart"},
		{"public-responder/initiator-closes", &nat, nil, "peer"},
		{"public-responder/responder-closes", &nat, nil, "self"},
		{"public/initiator-closes", nil, nil, "peer"},
		{"public/responder-closes", nil, nil, "self"},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			l, bin, inet, a := punchLab(t)
			hosts := map[string]*lab.Host{}
			for name, kind := range map[string]*lab.NATConfig{"b": c.b, "c": c.c} {
				if kind != nil {
					hosts[name] = behindNAT(l, inet, name, *kind)
					continue
				}
				hosts[name] = l.Host(name, inet)
				hosts[name].Link(inet).Delay(10 * time.Millisecond)
			}
			hosts["c"].Sysctl("net.ipv4.tcp_timestamps", "0")
			relayAddr := startRelay(t, ctx, bin, a, inet)
			bNode := hosts["b"].Start(ctx, bin, "-debug", "-listen", "/ip4/0.0.0.0/tcp/4001", "-reserve", relayAddr)
			circuit := waitMatch(t, ctx, bNode, circuitRE)
			const rounds = 3
			args := []string{"-debug", "-listen", "/ip4/0.0.0.0/tcp/5000", "-bootstrap", relayAddr,
				"-dial", circuit, "-wait", "20s", "-pause", "1s"}
			var cNode *lab.Process
			for round := 1; round <= rounds; round++ {
				switch {
				case c.closer == "restart":
					if cNode != nil {
						if err := cNode.Wait(ctx); err != nil { // it exits after its RESULT
							t.Fatalf("C's process of round %d: %v", round-1, err)
						}
						time.Sleep(time.Second)
					}
					cNode = hosts["c"].Start(ctx, bin, args...)
				case cNode == nil:
					cNode = hosts["c"].Start(ctx, bin, append(args, "-rounds", fmt.Sprint(rounds), "-close", c.closer)...)
				}
				res := waitMatch(t, ctx, cNode, resultRE)
				t.Logf("round %d: %s", round, res)
				if !tookRE.MatchString(res) {
					t.Fatalf("round %d stayed relayed: %s", round, res)
				}
			}
		})
	}
}
