//go:build linux

package node

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"os/signal"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	ma "github.com/multiformats/go-multiaddr"

	"github.com/tendril-p2p/tendril"
	"github.com/tendril-p2p/tendril/addrbook"
	"github.com/tendril-p2p/tendril/connmgr"
	"github.com/tendril-p2p/tendril/internal/lab"
	"github.com/tendril-p2p/tendril/portmap"
	"github.com/tendril-p2p/tendril/reach"
	"github.com/tendril-p2p/tendril/secio"
)

// The lab tests run each node as a process of its own (this test binary, as runLabNode)
// on a host of the lab: a whole process inside the host's network namespace, so that
// everything the node does (its dials, its listeners, the interface addresses identify
// reads, the Mapper's default route, SSDP and NAT-PMP) happens there, as on a machine.

func init() { labChild = runLabNode }

// labNodeConfig is what a lab node is told, as JSON in labChildEnv.
type labNodeConfig struct {
	Listen    string   // the listen address
	Dial      []string // addresses (with /p2p/) dialled once started, in order
	Bootstrap []string // Config.Bootstrap
	PortMap   string   // "" (off), "nat-pmp" or "upnp": Config.PortMap with that method alone
}

// labGroup groups IPv4 addresses by /24: the lab's segments are /24s of one /16
// (100.128.N.0/24), which addrbook.GroupOf would make one group, as if every peer in the
// lab were one operator's.
func labGroup(m ma.Multiaddr) addrbook.Group {
	if ip, ok := ipOf(m); ok && ip.Is4() {
		p, _ := ip.Prefix(24)
		return addrbook.Group("lab:" + p.String())
	}
	return addrbook.GroupOf(m)
}

// runLabNode is the program a lab node runs. It prints, one per line:
//
//	listening ADDR/p2p/ID
//	session PEER inbound|outbound REMOTE        each session opened
//	peers 2                                     when two peers are connected the first time
//	reach STATE DURATION                        the node's reachability changed, DURATION
//	                                            after "peers 2" (or "-" before it)
//	addr ADDR STATE SOURCE                      an address's state changed
//	mapped MAPPING                              the port mapping changed
//	own record SEQ [ADDR ...]                   this node's record changed
//	| LINE                                      the report, on "report"; then "end report"
//	record PEER ADDR...                         on "record PEER": the record PEER last sent
//	                                            this node (identify)
//	dial ADDR failed: ERR                       a dial that failed
//	closed in DURATION                          after "close" or SIGTERM; then it exits 0
//
// and reads commands on stdin: "report", "record PEER", "dial ADDR", "close".
func runLabNode(arg string) int {
	var c labNodeConfig
	if err := json.Unmarshal([]byte(arg), &c); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	var mu sync.Mutex
	say := func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		fmt.Printf(format+"\n", args...)
	}
	cfg := Config{
		Listen:  []tendril.Addr{tendril.MustParseAddr(c.Listen)},
		Reach:   reach.Config{Group: labGroup},
		Connect: connmgr.Config{MaxPerGroup: -1}, // one /16 for the whole lab
		Logger:  slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo})),
	}
	for _, b := range c.Bootstrap {
		cfg.Bootstrap = append(cfg.Bootstrap, tendril.MustParseAddr(b))
	}
	switch c.PortMap {
	case "":
	case "nat-pmp":
		cfg.PortMap, cfg.PortMapConfig.Methods = true, []portmap.Method{portmap.NATPMP}
	case "upnp":
		cfg.PortMap, cfg.PortMapConfig.Methods = true, []portmap.Method{portmap.UPnP}
	default:
		fmt.Fprintf(os.Stderr, "unknown PortMap %q\n", c.PortMap)
		return 2
	}
	n, err := New(cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	sub := n.Service().Subscribe(256)
	if err := n.Start(context.Background()); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	for _, a := range n.Service().Addrs() {
		say("listening %s/p2p/%s", a.Transport, n.ID())
	}

	var twoPeers struct {
		sync.Mutex
		at time.Time
	}
	since := func() string {
		twoPeers.Lock()
		defer twoPeers.Unlock()
		if twoPeers.at.IsZero() {
			return "-"
		}
		return time.Since(twoPeers.at).String()
	}
	var wg sync.WaitGroup
	wg.Go(func() {
		peers := map[secio.PeerID]bool{}
		for ev := range sub.C() {
			if ev.Type != tendril.EventSessionOpened {
				continue
			}
			say("session %s %s %s", ev.Peer, ev.Direction, ev.Addr.Transport)
			peers[ev.Peer] = true
			twoPeers.Lock()
			if len(peers) == 2 && twoPeers.at.IsZero() {
				twoPeers.at = ev.Time
				say("peers 2")
			}
			twoPeers.Unlock()
		}
	})
	stop := make(chan struct{})
	wg.Go(func() {
		state := reach.Unknown
		addrs := map[string]string{}
		var mapped portmap.Mapping
		var own string
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			if rec := n.Identify().Record(); rec != nil && fmt.Sprint(rec.Addrs()) != own {
				own = fmt.Sprint(rec.Addrs())
				say("own record %d %s", rec.Seq(), own)
			}
			rep := n.Reachability()
			for _, a := range rep.Addrs {
				s := a.State.String() + " " + a.Source.String()
				if addrs[a.Addr.String()] != s {
					addrs[a.Addr.String()] = s
					say("addr %s %s", a.Addr, s)
				}
			}
			if rep.State != state {
				state = rep.State
				say("reach %s %s", state, since())
			}
			for _, m := range rep.Mappings {
				if m.Mapping.External != mapped.External {
					mapped = m.Mapping
					say("mapped %s", mapped)
				}
			}
		}
	})
	for _, d := range c.Dial {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		if _, err := n.Service().Dial(ctx, tendril.MustParseAddr(d)); err != nil {
			say("dial %s failed: %v", d, err)
		}
		cancel()
	}

	closing := make(chan struct{})
	var once sync.Once
	closeNode := func() {
		once.Do(func() {
			start := time.Now()
			n.Close()
			say("closed in %v", time.Since(start))
			close(closing)
		})
	}
	term := make(chan os.Signal, 1)
	signal.Notify(term, syscall.SIGTERM)
	go func() {
		<-term
		closeNode()
	}()
	go func() {
		sc := bufio.NewScanner(os.Stdin)
		for sc.Scan() {
			cmd, arg, _ := strings.Cut(sc.Text(), " ")
			switch cmd {
			case "record":
				var addrs []string
				if id, err := secio.ParsePeerID(arg); err == nil {
					if info, ok := n.Identify().Info(id); ok {
						for _, a := range info.Record.Addrs() {
							addrs = append(addrs, a.String())
						}
					}
				}
				say("record %s %s", arg, strings.Join(addrs, " "))
			case "dial":
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				if _, err := n.Service().Dial(ctx, tendril.MustParseAddr(arg)); err != nil {
					say("dial %s failed: %v", arg, err)
				}
				cancel()
			case "report":
				for _, line := range strings.Split(n.Reachability().String(), "\n") {
					say("| %s", line)
				}
				say("end report")
			case "close":
				closeNode()
			}
		}
	}()
	<-closing
	close(stop)
	sub.Close()
	wg.Wait()
	return 0
}

// labNode is a node running on a lab host.
type labNode struct {
	p    *lab.Process
	addr string // its listen address with /p2p/
	id   string
}

var listeningRE = regexp.MustCompile(`^listening (\S+/p2p/(\S+))$`)

// startLabNode runs a node on h and waits until it listens.
func startLabNode(ctx context.Context, t *testing.T, h *lab.Host, c labNodeConfig) *labNode {
	t.Helper()
	arg, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	p := h.StartEnv(ctx, []string{labChildEnv + "=" + string(arg)}, os.Args[0])
	line, err := p.WaitLine(ctx, listeningRE)
	if err != nil {
		t.Fatal(err)
	}
	m := listeningRE.FindStringSubmatch(line)
	return &labNode{p: p, addr: m[1], id: m[2]}
}

// wait waits for a line matching re after the last one wait (or report) returned, and
// returns its submatches: for the answers to commands, which come in order.
func (n *labNode) wait(ctx context.Context, t *testing.T, re string) []string {
	t.Helper()
	rx := regexp.MustCompile(re)
	line, err := n.p.WaitLine(ctx, rx)
	if err != nil {
		t.Fatal(err)
	}
	return rx.FindStringSubmatch(line)
}

// find waits for a line matching re anywhere in the output, and returns the first one's
// submatches: for what the node reports as it happens, in whatever order (a mapping and
// the dial-backs it lets through can be seen in one look).
func (n *labNode) find(ctx context.Context, t *testing.T, re string) []string {
	t.Helper()
	m, _ := n.findAt(ctx, t, re)
	return m
}

// findAt is find, and also returns when the line was printed.
func (n *labNode) findAt(ctx context.Context, t *testing.T, re string) ([]string, time.Time) {
	t.Helper()
	rx := regexp.MustCompile(re)
	for exited := false; ; {
		for _, ln := range n.p.Lines() {
			if m := rx.FindStringSubmatch(ln.Text); m != nil {
				return m, ln.At
			}
		}
		if exited { // every line was in before Done closed
			t.Fatalf("%s exited without a line matching %q", n.p, re)
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%s printed no line matching %q: %v", n.p, re, ctx.Err())
		case <-n.p.Done():
			exited = true
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// reachedIn waits for the node's reachability to become state and returns how long
// after its second peer that was.
func (n *labNode) reachedIn(ctx context.Context, t *testing.T, state reach.State) time.Duration {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 6*reachBound) // a failure sooner than the test's end
	defer cancel()
	m := n.find(ctx, t, `^reach `+state.String()+` (\S+)$`)
	d, err := time.ParseDuration(m[1])
	if err != nil {
		t.Fatalf("%s: reach %s before two peers were connected (%s)", n.p, state, m[1])
	}
	return d
}

// report asks the node for its reachability report and returns its lines.
func (n *labNode) report(ctx context.Context, t *testing.T) string {
	t.Helper()
	if _, err := io.WriteString(n.p.Stdin, "report\n"); err != nil {
		t.Fatal(err)
	}
	var lines []string
	rx := regexp.MustCompile(`^(\| .*|end report)$`)
	for {
		line, err := n.p.WaitLine(ctx, rx)
		if err != nil {
			t.Fatal(err)
		}
		if line == "end report" {
			return strings.Join(lines, "\n")
		}
		lines = append(lines, strings.TrimPrefix(line, "| "))
	}
}

// waitFor polls cond every 100 ms until it holds, or fails the test after limit.
func waitFor(ctx context.Context, t *testing.T, what string, limit time.Duration, cond func() bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	for !cond() {
		select {
		case <-ctx.Done():
			t.Fatalf("waiting for %s: %v", what, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// labContext bounds a lab test.
func labContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// reachBound is the acceptance's bound on learning reachability: 5 s after the second
// peer connected. The race detector slows every handshake several times over; what
// takes the time (a NAT's dropped dial-back running to reach's DialBackTimeout, 3 s)
// does not grow with it, so the bound holds there too.
const reachBound = 5 * time.Second

// twoInternets is the lab's Internet: two routable segments (100.128.1.0/24 and
// 100.128.2.0/24, two address groups by labGroup) joined by a router, with a home LAN
// behind a NAT router whose outside is on the first.
type twoInternets struct {
	l            *lab.Lab
	inet1, inet2 *lab.Segment
	lan          *lab.Segment
	nat          *lab.NAT
	router       *lab.Host
}

func newTwoInternets(t *testing.T, natCfg lab.NATConfig) *twoInternets {
	t.Helper()
	l := lab.New(t)
	w := &twoInternets{l: l, inet1: l.Routable("inet1"), inet2: l.Routable("inet2"), lan: l.LAN("home")}
	w.router = l.Router("r", w.inet1, w.inet2)
	w.nat = l.NATRouter("nat", w.lan, w.inet1, natCfg)
	w.nat.Route(w.inet2.Prefix(), w.router)
	return w
}

// host adds a host on seg, routed to the other segment through the router (behind the
// NAT for the LAN).
func (w *twoInternets) host(name string, seg *lab.Segment) *lab.Host {
	h := w.l.Host(name, seg)
	switch seg {
	case w.lan:
		h.DefaultVia(w.nat.Host)
	case w.inet1:
		h.Route(w.inet2.Prefix(), w.router)
	case w.inet2:
		h.Route(w.inet1.Prefix(), w.router)
	}
	return h
}

func listenOn(h *lab.Host, seg *lab.Segment) string {
	return "/ip4/" + h.Addr(seg).String() + "/tcp/4001"
}

// Issue 29's acceptance: public node A, node B behind a NAT (endpoint-independent
// mapping, address- and port-dependent filtering: Linux's masquerade), each connected to
// two peers (A to B and P2, B to A and P2; A and P2 on two segments, two address groups):
// B learns it is private and A that it is public within 5 s of its second peer.
func TestLabReachability(t *testing.T) {
	if testing.Short() {
		t.Skip("runs nodes in network namespaces")
	}
	ctx := labContext(t)
	w := newTwoInternets(t, lab.NATConfig{})
	ha, hp2, hb := w.host("a", w.inet1), w.host("p2", w.inet2), w.host("b", w.lan)

	a := startLabNode(ctx, t, ha, labNodeConfig{Listen: listenOn(ha, w.inet1)})
	p2 := startLabNode(ctx, t, hp2, labNodeConfig{Listen: listenOn(hp2, w.inet2), Dial: []string{a.addr}})
	p2.find(ctx, t, `^session `+a.id+` outbound`)
	b := startLabNode(ctx, t, hb, labNodeConfig{Listen: "/ip4/0.0.0.0/tcp/4001", Dial: []string{a.addr, p2.addr}})

	tb := b.reachedIn(ctx, t, reach.Private)
	ta := a.reachedIn(ctx, t, reach.Public)
	t.Logf("after the second peer: A public in %v, B private in %v", ta, tb)
	if ta > reachBound || tb > reachBound {
		t.Errorf("A public after %v, B private after %v: want both within %v", ta, tb, reachBound)
	}

	// B's address as the outside sees it: the NAT's, with B's listen port.
	ext := "/ip4/" + w.nat.External().String() + "/tcp/4001"
	rep := b.report(ctx, t)
	t.Logf("B's report:\n%s", rep)
	if !regexp.MustCompile(`(?m)^  ` + regexp.QuoteMeta(ext) + `: private \(observed\), 0 confirmed, 2 failed, .*observed by 2 peers in 2 groups`).MatchString(rep) {
		t.Errorf("B's report does not show %s private, failed from 2 groups, observed by both peers", ext)
	}
	rep = a.report(ctx, t)
	t.Logf("A's report:\n%s", rep)
	if !regexp.MustCompile(`(?m)^  ` + regexp.QuoteMeta(listenOn(ha, w.inet1)) + `: public \(observed\+listen\), 2 confirmed, 0 failed`).MatchString(rep) {
		t.Errorf("A's report does not show its listen address public from 2 groups")
	}
}

// Issue 29's acceptance: B behind the UPnP router (miniupnpd, which speaks NAT-PMP too:
// both are run): the mapping is made, confirmed by dial-back, B becomes public and
// advertises it in its record, and A, a public node that never met B, dials B directly
// at the mapped address; the mapping is removed from the router when B closes.
func TestLabPortMapping(t *testing.T) {
	if testing.Short() {
		t.Skip("runs nodes in network namespaces")
	}
	for _, method := range []string{"upnp", "nat-pmp"} {
		t.Run(method, func(t *testing.T) {
			ctx := labContext(t)
			w := newTwoInternets(t, lab.NATConfig{UPnP: true})
			hs1, hs2, ha, hb := w.host("s1", w.inet1), w.host("s2", w.inet2), w.host("a", w.inet2), w.host("b", w.lan)
			ext := netip.AddrPortFrom(w.nat.External(), 4001)
			extAddr := "/ip4/" + ext.Addr().String() + "/tcp/4001"
			requireRules(ctx, t, w.nat, hb.Addr(w.lan), false, "before B started")

			s1 := startLabNode(ctx, t, hs1, labNodeConfig{Listen: listenOn(hs1, w.inet1)})
			s2 := startLabNode(ctx, t, hs2, labNodeConfig{Listen: listenOn(hs2, w.inet2), Dial: []string{s1.addr}})
			s2.find(ctx, t, `^session `+s1.id+` outbound`)
			start := time.Now()
			b := startLabNode(ctx, t, hb, labNodeConfig{Listen: "/ip4/0.0.0.0/tcp/4001", PortMap: method, Dial: []string{s1.addr, s2.addr}})
			m, at := b.findAt(ctx, t, `^mapped (\S+) tcp 4001 -> (\S+) via (\S+)`)
			mappedAfter := at.Sub(start)
			if m[1] != method || m[2] != ext.String() || m[3] != w.nat.Gateway().String() {
				t.Fatalf("B's mapping %q, want %s to %v via %v", m[0], method, ext, w.nat.Gateway())
			}
			requireRules(ctx, t, w.nat, hb.Addr(w.lan), true, "once B mapped its port")
			publicIn := b.reachedIn(ctx, t, reach.Public)
			t.Logf("mapped %v after B started; public %v after its second peer", mappedAfter.Round(time.Millisecond), publicIn)
			rep := b.report(ctx, t)
			t.Logf("B's report:\n%s", rep)
			if !regexp.MustCompile(`(?m)^  ` + regexp.QuoteMeta(extAddr) + `: public \(mapped\+observed\), 2 confirmed, 0 failed, .* reached [0-9.]+m?s ago; .*mapping ` + method + `, lease `).MatchString(rep) {
				t.Errorf("B's report does not show %s public by dial-back, with its mapping's lease", extAddr)
			}

			// What B advertises to public peers, as s1 received it (identify pushed it when
			// the mapping was confirmed): the mapped address, not B's LAN address. (Not as
			// s1's book has it: every lab address is in one /16, so the book's new table
			// puts them all in one bucket, where an address whose slot holds another live
			// one is refused, as Bitcoin Core's addrman does.)
			var rec []string
			waitFor(ctx, t, "B's record at s1 to list "+extAddr, 10*time.Second, func() bool {
				if _, err := io.WriteString(s1.p.Stdin, "record "+b.id+"\n"); err != nil {
					t.Fatal(err)
				}
				rec = strings.Fields(s1.wait(ctx, t, `^record `+b.id+`(.*)$`)[1])
				return slices.Contains(rec, extAddr)
			})
			if len(rec) != 1 {
				t.Errorf("B's record at s1 lists %v, want only %s", rec, extAddr)
			}
			// A, a public node that never met B, dials B there: directly, through the
			// mapping, and B sees A's own address.
			a := startLabNode(ctx, t, ha, labNodeConfig{Listen: listenOn(ha, w.inet2)})
			dialled := time.Now()
			if _, err := io.WriteString(a.p.Stdin, "dial "+extAddr+"/p2p/"+b.id+"\n"); err != nil {
				t.Fatal(err)
			}
			m, at = a.findAt(ctx, t, `^(session `+b.id+` outbound `+regexp.QuoteMeta(extAddr)+`|dial .* failed: .*)$`)
			if strings.HasPrefix(m[0], "dial") {
				t.Fatalf("A: %s", m[0])
			}
			b.find(ctx, t, `^session `+a.id+` inbound /ip4/`+regexp.QuoteMeta(ha.Addr(w.inet2).String())+`/tcp/`)
			t.Logf("A dialled B at %s in %v", extAddr, at.Sub(dialled).Round(time.Millisecond))

			if _, err := io.WriteString(b.p.Stdin, "close\n"); err != nil {
				t.Fatal(err)
			}
			closed := b.find(ctx, t, `^closed in (\S+)$`)
			t.Logf("B closed in %s", closed[1])
			if err := b.p.Wait(ctx); err != nil {
				t.Fatalf("B: %v", err)
			}
			requireRules(ctx, t, w.nat, hb.Addr(w.lan), false, "after B closed")
			// With the mapping, a SYN to the external port would reach B's host and be
			// refused (nothing listens there now); without it the router drops it.
			requireDropped(ctx, t, hs1, ext)
		})
	}
}

// requireRules checks whether the NAT router's nftables table holds a forwarding rule to
// host's port 4001 (miniupnpd's, in the upnp_* chains).
func requireRules(ctx context.Context, t *testing.T, n *lab.NAT, host netip.Addr, want bool, when string) {
	t.Helper()
	out, err := n.Run(ctx, "nft", "list", "table", "inet", "tendril_nat")
	if err != nil {
		t.Fatal(err)
	}
	to := netip.AddrPortFrom(host, 4001).String()
	if got := strings.Contains(string(out), to); got != want {
		t.Errorf("%s: a forwarding rule to %s: %v, want %v\n%s", when, to, got, want, out)
	}
}

// requireDropped dials addr from h and requires the dial to time out: neither a
// connection nor a refusal.
func requireDropped(ctx context.Context, t *testing.T, h *lab.Host, addr netip.AddrPort) {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 1500*time.Millisecond)
	defer cancel()
	var c net.Conn
	var err error
	if derr := h.Do(func() { c, err = (&net.Dialer{}).DialContext(ctx, "tcp4", addr.String()) }); derr != nil {
		t.Fatal(derr)
	}
	if err == nil {
		c.Close()
		t.Errorf("%s reached %v: the mapping is still there", h, addr)
		return
	}
	if ne := net.Error(nil); !errors.As(err, &ne) || !ne.Timeout() {
		t.Errorf("dial %v from %s: %v, want a timeout (the router drops it)", addr, h, err)
	}
}
