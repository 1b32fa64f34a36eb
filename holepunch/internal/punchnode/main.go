// Command punchnode is a tendril node for the hole-punching lab tests (holepunch's
// lab_test.go): a relay, a node that reserves a slot on one, or a node that dials through
// one, each with identify and a Puncher, printing what happens as lines a test can wait
// for. It only dials the addresses it is given, inside the lab.
//
//	punchnode -listen /ip4/0.0.0.0/tcp/0 -relay                       a relay
//	punchnode -listen ... -reserve /ip4/R/tcp/N/p2p/ID                 prints CIRCUIT <addr>
//	punchnode -listen ... -bootstrap /ip4/R/tcp/N/p2p/ID -dial CIRCUIT prints RESULT ...
//
// Every node prints "LISTENING <addr>" first. A dialling node prints, once its relayed
// session is up, "RELAYED", then within -wait either "RESULT direct took=<d>" or
// "RESULT relayed <report>", and exits. With -rounds N it does so N times: after each
// direct session it closes that session (-close self) or has the other end close it
// (-close peer), prints "CLOSED", waits -pause and dials through the relay again, so
// that the next punch reuses the same two ports.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	ma "github.com/multiformats/go-multiaddr"

	"github.com/tendril-p2p/tendril"
	"github.com/tendril-p2p/tendril/holepunch"
	"github.com/tendril-p2p/tendril/identify"
	"github.com/tendril-p2p/tendril/relay"
	"github.com/tendril-p2p/tendril/secio"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "punchnode:", err)
		os.Exit(1)
	}
}

// anyButLoopback is what the lab's nodes may dial and tell: every address of the lab
// (its "public" side uses documentation and 100.128/16 ranges, which the default refuses).
func anyButLoopback(a ma.Multiaddr) bool {
	if len(a) == 0 {
		return false
	}
	v := a[0].Value()
	return v != "127.0.0.1" && v != "::1"
}

func run() error {
	listen := flag.String("listen", "/ip4/0.0.0.0/tcp/0", "address to listen on")
	isRelay := flag.Bool("relay", false, "serve as a relay")
	reserve := flag.String("reserve", "", "relay to reserve a slot on")
	bootstrap := flag.String("bootstrap", "", "peer to connect to first (identify tells how it sees this node)")
	dial := flag.String("dial", "", "circuit address to dial")
	wait := flag.Duration("wait", 30*time.Second, "how long a dialling node waits for a direct session")
	attack := flag.String("attack", "", "reservations, circuits or data: flood the relay (-target) or a circuit (-dial) and exit")
	target := flag.String("target", "", "the relay an attack floods")
	count := flag.Int("n", 100, "identities (reservations), or concurrent circuits, an attack uses")
	ping := flag.String("ping", "", "peer to measure echo round trips with, printing PING lines every -every")
	every := flag.Duration("every", time.Second, "how often -ping prints")
	rounds := flag.Int("rounds", 1, "relayed dials and punches in a row (-dial)")
	closer := flag.String("close", "self", "who closes each direct session between rounds: self or peer")
	pause := flag.Duration("pause", time.Second, "the pause between a round's close and the next dial")
	debug := flag.Bool("debug", false, "log the Puncher's debug lines to standard error")
	flag.Parse()
	if *attack != "" {
		return runAttack(*attack, *target, *dial, *count)
	}
	if *ping != "" {
		return runPing(*ping, *every)
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	key, err := secio.GenerateKey()
	if err != nil {
		return err
	}
	svc, err := tendril.New(tendril.Config{PrivateKey: key, Protocols: []tendril.Protocol{echoProtocol(), closeProtocol()}})
	if err != nil {
		return err
	}
	defer svc.Close()
	id, err := identify.New(svc, identify.Config{PrivateKey: key, Public: anyButLoopback})
	if err != nil {
		return err
	}
	defer id.Close()
	addr, err := svc.Listen(ctx, tendril.MustParseAddr(*listen))
	if err != nil {
		return err
	}
	addr.Peer = svc.ID()
	fmt.Println("LISTENING", addr)
	pcfg := holepunch.Config{Allow: anyButLoopback}
	if *debug {
		pcfg.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	p, err := holepunch.New(svc, id, pcfg)
	if err != nil {
		return err
	}
	defer p.Close()

	switch {
	case *isRelay:
		r, err := relay.NewRelay(svc, relay.RelayConfig{})
		if err != nil {
			return err
		}
		defer r.Close()
	case *reserve != "":
		cl, err := relay.NewClient(svc, relay.ClientConfig{})
		if err != nil {
			return err
		}
		defer cl.Close()
		ra, err := tendril.ParseAddr(*reserve)
		if err != nil {
			return err
		}
		res, err := cl.Reserve(ctx, ra)
		if err != nil {
			return err
		}
		fmt.Println("CIRCUIT", res.Addr())
	}
	if *bootstrap != "" {
		ba, err := tendril.ParseAddr(*bootstrap)
		if err != nil {
			return err
		}
		if _, err := svc.Dial(ctx, ba); err != nil {
			return err
		}
		// The dial-back candidates come from identify: wait until the peer has said how it
		// sees this node.
		for len(id.ObservedAddrs()) == 0 {
			select {
			case <-time.After(5 * time.Millisecond):
			case <-ctx.Done():
				return ctx.Err()
			}
		}
	}
	if *dial == "" {
		<-ctx.Done()
		for _, r := range p.Report() {
			fmt.Println("REPORT", r.Peer, r)
		}
		return nil
	}
	c, err := relay.ParseCircuit(*dial)
	if err != nil {
		return err
	}
	for round := 1; ; round++ {
		direct, err := dialOnce(ctx, svc, p, c, *wait)
		if err != nil || !direct || round == *rounds {
			return err
		}
		if err := closeDirect(ctx, svc, c.Target, *closer); err != nil {
			return err
		}
		fmt.Println("CLOSED")
		select {
		case <-time.After(*pause):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// dialOnce dials c through its relay and waits up to wait for a direct session with its
// target, printing RELAYED and RESULT; it reports whether the session went direct.
func dialOnce(ctx context.Context, svc *tendril.Service, p *holepunch.Puncher, c relay.Circuit, wait time.Duration) (bool, error) {
	sess, err := relay.Dial(ctx, svc, c)
	if err != nil {
		return false, err
	}
	fmt.Println("RELAYED")
	deadline := time.After(wait)
	for {
		if s := svc.Session(c.Target); s != nil && !s.Relayed() {
			fmt.Printf("RESULT direct took=%s\n", s.OpenedAt().Sub(sess.OpenedAt()).Round(100*time.Microsecond))
			return true, nil
		}
		select {
		case <-time.After(2 * time.Millisecond):
			continue
		case <-deadline:
		case <-ctx.Done():
			return false, ctx.Err()
		}
		r, _ := p.PeerReport(c.Target)
		fmt.Println("RESULT relayed", r)
		return false, nil
	}
}

// closeDirect ends the direct session with peer, closed by this node (self) or by the
// peer, asked to over the close protocol (peer), and waits until it is gone.
func closeDirect(ctx context.Context, svc *tendril.Service, peer secio.PeerID, closer string) error {
	s := svc.Session(peer)
	if s == nil {
		return fmt.Errorf("no session with %s to close", peer)
	}
	switch closer {
	case "self":
		s.Close()
	case "peer":
		rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		_, err := s.Request(rctx, closeName, nil)
		cancel()
		if err != nil {
			return fmt.Errorf("asking %s to close: %w", peer, err)
		}
	default:
		return fmt.Errorf("-close %q: want self or peer", closer)
	}
	select {
	case <-s.Done():
		return nil
	case <-time.After(10 * time.Second):
		return fmt.Errorf("the session with %s is still open 10 s after its close", peer)
	case <-ctx.Done():
		return ctx.Err()
	}
}

// closeName is a request protocol every punchnode answers by closing the session it was
// asked on, just after the answer (-close peer).
const closeName = "/punchnode/close"

func closeProtocol() tendril.Protocol {
	return tendril.Protocol{Name: closeName, Versions: []string{"1"},
		RequestHandler: tendril.RequestHandlerFunc(func(c *tendril.Context, _ []byte) ([]byte, error) {
			s := c.Session()
			time.AfterFunc(50*time.Millisecond, func() { s.Close() })
			return []byte{}, nil
		})}
}
