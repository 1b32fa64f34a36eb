//go:build !js

// Command chat is a peer-to-peer chat over tendril.
//
//	go run ./examples/chat -demo                              # several peers in one process
//	go run ./examples/chat -listen /ip4/127.0.0.1/tcp/0       # prints its full address
//	go run ./examples/chat -dial /ip4/127.0.0.1/tcp/PORT/p2p/PEERID -name bob
//	go run ./examples/chat -web 127.0.0.1:8080 -name alice     # and open http://127.0.0.1:8080/
//	go run ./examples/chat -listen /ip4/0.0.0.0/tcp/0 -mdns -book chat.book   # finds peers on the LAN
//
// A peer joins the swarm through -bootstrap addresses (or -dial), learns of further peers
// from those it meets (identify, peer exchange) and, with -mdns, from the LAN, and keeps
// up to -target outbound sessions; -book FILE keeps what it learned for the next run.
// Typing /peers lists the connected peers and what the address book knows.
//
// Lines typed on stdin go to every connected peer and are relayed once by each peer, so in a
// chain A-B-C a line typed at A reaches C. -key FILE keeps an identity between runs;
// -legacy-tea KEYHEX speaks the insecure TEA legacy mode instead of secio.
//
// -web HOST:PORT also serves a browser peer there: a page that runs this same chat,
// compiled to WebAssembly, and dials this node over a WebSocket on that port (the node's
// address there is /ip4/HOST/tcp/PORT/ws/p2p/ID, which native peers may dial too). The
// wasm binary is built when the node starts (web.go), so -web needs the Go toolchain,
// which `go run` implies; browser.go is the browser peer's main.
package main

import (
	"bufio"
	"context"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/netip"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/tendril-p2p/tendril"
	tnode "github.com/tendril-p2p/tendril/node"
	"github.com/tendril-p2p/tendril/secio"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdin, os.Stdout); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return // -h asked for the usage, which is not a failure
		}
		fmt.Fprintln(os.Stderr, "chat:", err)
		os.Exit(1)
	}
}

type multiFlag []string

func (m *multiFlag) String() string     { return strings.Join(*m, ",") }
func (m *multiFlag) Set(s string) error { *m = append(*m, s); return nil }

type options struct {
	listen    string
	dials     multiFlag
	keyFile   string
	name      string
	demo      bool
	peers     int
	legacyKey []byte
	web       string
	bootstrap multiFlag
	book      string
	mdns      bool
	target    int
	relay     bool
	punchNets []netip.Prefix
}

func parseFlags(args []string, stderr io.Writer) (*options, error) {
	o := &options{}
	fs := flag.NewFlagSet("chat", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.listen, "listen", "", "multiaddr to listen on, e.g. /ip4/127.0.0.1/tcp/0")
	fs.Var(&o.dials, "dial", "multiaddr of a peer to join (repeatable), e.g. /ip4/127.0.0.1/tcp/4001/p2p/PEERID")
	fs.StringVar(&o.keyFile, "key", "", "identity key file (created if missing); default: a fresh identity")
	fs.StringVar(&o.name, "name", "", "nick shown to others (default: from the peer ID)")
	fs.BoolVar(&o.demo, "demo", false, "run several peers in this process on loopback and check every line arrives")
	fs.IntVar(&o.peers, "peers", 4, "number of peers for -demo")
	fs.StringVar(&o.web, "web", "", "also serve the browser peer on this HOST:PORT (the page, its wasm built at start with the Go toolchain, and this node's WebSocket listener), e.g. 127.0.0.1:8080")
	fs.Var(&o.bootstrap, "bootstrap", "multiaddr of a peer to join the swarm through (repeatable); without /p2p/ID it is dialled once")
	fs.StringVar(&o.book, "book", "", "address book file: what this peer learned, loaded at start and saved as it runs")
	fs.BoolVar(&o.mdns, "mdns", false, "find peers on the LAN with multicast DNS (and announce this one); needs -listen")
	fs.IntVar(&o.target, "target", 8, "outbound sessions to keep up from the address book")
	fs.BoolVar(&o.relay, "relay", false, "serve as a relay for peers behind NATs (run it on a peer others can dial)")
	punchNets := fs.String("punch-nets", "", "comma-separated networks (CIDR) a hole punch may dial besides public IPs, e.g. a test network's or a carrier NAT's 100.64.0.0/10")
	legacy := fs.String("legacy-tea", "", "speak the INSECURE TEA legacy mode with this 16-byte key (32 hex digits)")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments: %v", fs.Args())
	}
	for _, s := range strings.Split(*punchNets, ",") {
		if s = strings.TrimSpace(s); s == "" {
			continue
		}
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return nil, fmt.Errorf("-punch-nets: %w", err)
		}
		o.punchNets = append(o.punchNets, p.Masked())
	}
	if *legacy != "" {
		k, err := hex.DecodeString(*legacy)
		if err != nil || len(k) != 16 {
			return nil, fmt.Errorf("-legacy-tea wants 32 hex digits (16 bytes)")
		}
		o.legacyKey = k
	}
	if o.demo && o.peers < 2 {
		return nil, fmt.Errorf("-peers must be at least 2")
	}
	if o.web != "" && (o.demo || o.legacyKey != nil) {
		return nil, fmt.Errorf("-web serves a browser peer, which speaks secio only: it goes with neither -demo nor -legacy-tea")
	}
	if o.legacyKey != nil && (len(o.bootstrap) > 0 || o.book != "" || o.mdns || o.relay) {
		return nil, fmt.Errorf("-bootstrap, -book, -mdns and -relay need secio peers: they do not go with -legacy-tea")
	}
	if o.relay && o.listen == "" {
		return nil, fmt.Errorf("-relay serves peers that dial this one: give -listen too")
	}
	if o.mdns && o.listen == "" {
		return nil, fmt.Errorf("-mdns announces this peer's listen addresses: give -listen too")
	}
	if o.target < 1 {
		return nil, fmt.Errorf("-target must be at least 1")
	}
	if !o.demo && o.listen == "" && len(o.dials) == 0 && o.web == "" && len(o.bootstrap) == 0 && o.book == "" {
		return nil, fmt.Errorf("nothing to do: give -listen, -dial, -bootstrap, -web or -demo (-h for help)")
	}
	return o, nil
}

func run(ctx context.Context, args []string, stdin io.Reader, stdout io.Writer) error {
	o, err := parseFlags(args, stdout)
	if err != nil {
		return err
	}
	if o.demo {
		return runDemo(ctx, o, stdout)
	}
	return runPeer(ctx, o, stdin, stdout)
}

func newChatService(n *node, key *secio.PrivateKey, legacyKey []byte, versions ...string) (*tendril.Service, error) {
	p := chatProtocol(n, versions...)
	cfg := tendril.Config{PrivateKey: key}
	if legacyKey != nil {
		cfg.LegacyTEA = &tendril.LegacyTEAConfig{Key: legacyKey}
		// The chat opts in to the insecure legacy sessions the user asked for with -legacy-tea.
		p.AllowLegacyTEA = true
	}
	cfg.Protocols = []tendril.Protocol{p}
	svc, err := tendril.New(cfg)
	if err != nil {
		return nil, err
	}
	n.svc = svc
	return svc, nil
}

func runPeer(ctx context.Context, o *options, stdin io.Reader, stdout io.Writer) error {
	var key *secio.PrivateKey
	if o.keyFile != "" {
		k, created, err := secio.LoadOrCreateKeyFile(o.keyFile)
		if err != nil {
			return err
		}
		if created {
			fmt.Fprintf(stdout, "created identity key %s\n", o.keyFile)
		}
		key = k
	}
	var bp *browserPeer
	if o.web != "" {
		// Built first: the step most likely to fail, before the node announces anything.
		b, err := buildBrowserPeer(ctx, stdout)
		if err != nil {
			return err
		}
		bp = b
	}
	n := newNode(o.name, stdout)
	var (
		svc   *tendril.Service
		swarm *tnode.Node // nil in legacy mode, which has no peer IDs to find peers by
		err   error
	)
	if o.legacyKey != nil {
		if svc, err = newChatService(n, key, o.legacyKey); err != nil {
			return err
		}
		defer svc.Close()
	} else {
		if swarm, err = newSwarmNode(n, key, o); err != nil {
			return err
		}
		defer swarm.Close()
		svc = swarm.Service()
	}
	if n.name == "" {
		n.name = short(svc.ID().String())
	}
	fmt.Fprintf(stdout, "peer ID %s\n", svc.ID())
	if o.legacyKey != nil {
		fmt.Fprintln(stdout, "WARNING: TEA legacy mode is INSECURE: no integrity, no peer authentication")
	}
	go logEvents(svc, n)

	if o.listen != "" {
		a, err := tendril.ParseAddr(o.listen)
		if err != nil {
			return err
		}
		var bound tendril.Addr
		if o.legacyKey != nil {
			bound, err = svc.ListenLegacy(ctx, a)
		} else {
			bound, err = svc.Listen(ctx, a)
		}
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "listening on %s\n", bound)
	}
	if bp != nil {
		w, err := serveWeb(svc, o.web, bp)
		if err != nil {
			return err
		}
		defer func() {
			if err := w.close(); err != nil {
				n.printf("web server: %v", err)
			}
		}()
		fmt.Fprintf(stdout, "listening on %s\n", w.addr)
		fmt.Fprintf(stdout, "browser peer: open %s\n", w.url)
	}
	if swarm != nil {
		// After the listeners: the node's signed record, which mDNS and identify hand
		// out, lists where this peer listens.
		if err := swarm.Start(ctx); err != nil {
			return err
		}
	}
	for _, d := range o.dials {
		a, err := tendril.ParseAddr(d)
		if err != nil {
			return err
		}
		dctx, cancel := context.WithTimeout(ctx, 15*time.Second)
		if o.legacyKey != nil {
			_, err = svc.DialLegacy(dctx, a)
		} else {
			_, err = svc.Dial(dctx, a)
		}
		cancel()
		if err != nil {
			return err
		}
	}

	lines := make(chan string)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(stdin)
		for sc.Scan() {
			select {
			case lines <- sc.Text():
			case <-ctx.Done():
				return
			}
		}
	}()
	for {
		select {
		case <-ctx.Done():
			fmt.Fprintln(stdout, "closing")
			return nil
		case line, ok := <-lines:
			if !ok {
				// stdin ended (a pipe): give the last lines a moment to leave, then close.
				// Close itself sends what is queued before closing the streams.
				return nil
			}
			line = strings.TrimSpace(line)
			if line == "/peers" && swarm != nil {
				printPeers(n, swarm)
				continue
			}
			if line != "" && n.say(line) == 0 {
				n.printf("no peer connected: line not sent")
			}
		}
	}
}
