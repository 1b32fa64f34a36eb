//go:build linux

package main

import (
	"context"
	"errors"
	"io"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/tendril-p2p/tendril/internal/lab"
)

var (
	listeningRE = regexp.MustCompile(`listening on (\S+)`)
	joinedRE    = regexp.MustCompile(`joined: \S+ at (\S+)`)
)

func labContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// TestLabMDNS: two chat peers in separate namespaces on one LAN bridge, given no address
// of each other, find each other by mDNS and chat within 3 s of starting; each sees the
// other at the address the lab gave it, and identify tells each the address the other
// sees it at.
func TestLabMDNS(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the chat in network namespaces")
	}
	ctx := labContext(t)
	l := lab.New(t)
	chat := lab.Build(t, "github.com/tendril-p2p/tendril/examples/chat")
	lan := l.LAN("lan0")
	a, b := l.Host("a", lan), l.Host("b", lan)

	start := time.Now()
	alice := a.Start(ctx, chat, "-name", "alice", "-listen", "/ip4/0.0.0.0/tcp/0", "-mdns")
	bob := b.Start(ctx, chat, "-name", "bob", "-listen", "/ip4/0.0.0.0/tcp/0", "-mdns")
	for _, c := range []struct {
		p    *lab.Process
		peer *lab.Host
	}{{alice, b}, {bob, a}} {
		line, err := c.p.WaitLine(ctx, joinedRE)
		if err != nil {
			t.Fatal(err)
		}
		if want := "/ip4/" + c.peer.Addr(lan).String() + "/tcp/"; !strings.HasPrefix(joinedRE.FindStringSubmatch(line)[1], want) {
			t.Errorf("%s: %q, want the peer at %s...", c.p, line, want)
		}
	}
	// Both found each other at once and both dialled: a line typed while the duplicate
	// session gives way to the kept one finds no peer ("line not sent"), so bob types it
	// again until alice has it.
	hello := regexp.MustCompile(`<bob> hello over mdns$`)
	for {
		if _, err := io.WriteString(bob.Stdin, "hello over mdns\n"); err != nil {
			t.Fatal(err)
		}
		wait, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
		_, err := alice.WaitLine(wait, hello)
		cancel()
		if err == nil {
			break
		}
		if ctx.Err() != nil || !errors.Is(err, context.DeadlineExceeded) {
			t.Fatal(err)
		}
	}
	took := time.Since(start)
	t.Logf("found by mDNS and chatted in %v", took.Round(time.Millisecond))
	if took > 3*time.Second {
		t.Errorf("found and chatted in %v, want within 3 s", took)
	}

	// Identify: bob is seen by alice at his own LAN address, and /peers says so once
	// identify has run (beside the chat's own opening, so ask until it has).
	seen := regexp.MustCompile(`seen by peers at: (\S.*)$`)
	var line string
	for range 20 {
		if _, err := io.WriteString(bob.Stdin, "/peers\n"); err != nil {
			t.Fatal(err)
		}
		wctx, cancel := context.WithTimeout(ctx, 250*time.Millisecond)
		line, _ = bob.WaitLine(wctx, seen)
		cancel()
		if line != "" {
			break
		}
	}
	if want := "/ip4/" + b.Addr(lan).String() + "/tcp/"; line == "" || !strings.Contains(seen.FindStringSubmatch(line)[1], want) {
		t.Errorf("bob's observed addresses %q, want %s...", line, want)
	}
}

// TestLabRestartWithBook: a peer that joined through a bootstrap address and is then
// restarted with its address book alone (no bootstrap, no mDNS) reconnects at once: the
// first dial of a book address waits for no backoff.
func TestLabRestartWithBook(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the chat in network namespaces")
	}
	ctx := labContext(t)
	l := lab.New(t)
	chat := lab.Build(t, "github.com/tendril-p2p/tendril/examples/chat")
	lan := l.LAN("lan0")
	a, b := l.Host("a", lan), l.Host("b", lan)
	book := filepath.Join(t.TempDir(), "bob.book")

	alice := a.Start(ctx, chat, "-name", "alice", "-listen", "/ip4/"+a.Addr(lan).String()+"/tcp/0")
	line, err := alice.WaitLine(ctx, listeningRE)
	if err != nil {
		t.Fatal(err)
	}
	addr := listeningRE.FindStringSubmatch(line)[1]
	bob := b.Start(ctx, chat, "-name", "bob", "-bootstrap", addr, "-book", book)
	if _, err := bob.WaitLine(ctx, joinedRE); err != nil {
		t.Fatal(err)
	}
	if err := bob.Stop(); err != nil { // saves the book
		t.Fatalf("bob after SIGTERM: %v", err)
	}
	start := time.Now()
	bob = b.Start(ctx, chat, "-name", "bob", "-book", book)
	if _, err := bob.WaitLine(ctx, joinedRE); err != nil {
		t.Fatal(err)
	}
	took := time.Since(start)
	t.Logf("restarted with its book, reconnected in %v", took.Round(time.Millisecond))
	if took > 3*time.Second {
		t.Errorf("reconnected in %v: a book address's first dial waits for no backoff", took)
	}
}

// TestLabChatBehindNATs: bob and carol, each behind a home router (endpoint-independent
// mapping, port-dependent filtering, 10 ms each way to the internet), are given only the
// address of a relay on the public side. Each reserves a slot there, peer exchange tells
// each the other's circuit address, the one dialled through the relay punches a hole, and
// they chat over a direct session, which /peers shows as punched.
func TestLabChatBehindNATs(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the chat in network namespaces")
	}
	ctx := labContext(t)
	l := lab.New(t)
	chat := lab.Build(t, "github.com/tendril-p2p/tendril/examples/chat")
	inet := l.Public("inet")
	r := l.Host("relay", inet)
	hosts := map[string]*lab.Host{}
	nats := map[string]*lab.NAT{}
	for _, name := range []string{"bob", "carol"} {
		lan := l.LAN("lan-" + name)
		n := l.NATRouter("nat-"+name, lan, inet, lab.NATConfig{})
		n.WAN.Delay(10 * time.Millisecond)
		h := l.Host(name, lan)
		h.DefaultVia(n.Host)
		hosts[name], nats[name] = h, n
	}
	relay := r.Start(ctx, chat, "-name", "relay", "-listen", "/ip4/"+r.Addr(inet).String()+"/tcp/4001", "-relay")
	line, err := relay.WaitLine(ctx, listeningRE)
	if err != nil {
		t.Fatal(err)
	}
	relayAddr := listeningRE.FindStringSubmatch(line)[1]
	// The lab's public side uses documentation ranges, which a hole punch does not dial
	// unless told.
	nets := "198.51.100.0/24,203.0.113.0/24,192.0.2.0/24"
	start := time.Now()
	bob := hosts["bob"].Start(ctx, chat, "-name", "bob", "-listen", "/ip4/0.0.0.0/tcp/4001", "-bootstrap", relayAddr, "-punch-nets", nets)
	carol := hosts["carol"].Start(ctx, chat, "-name", "carol", "-listen", "/ip4/0.0.0.0/tcp/4001", "-bootstrap", relayAddr, "-punch-nets", nets)
	// Each sees the other join at the other's router: a direct session.
	for _, c := range []struct {
		p    *lab.Process
		peer string
	}{{bob, "carol"}, {carol, "bob"}} {
		re := regexp.MustCompile(`joined: \S+ at /ip4/` + regexp.QuoteMeta(nats[c.peer].Addr(inet).String()) + `/tcp/`)
		if _, err := c.p.WaitLine(ctx, re); err != nil {
			t.Fatalf("%s never saw %s join directly: %v\n%s", c.p, c.peer, err, c.p.Output())
		}
	}
	direct := time.Since(start)
	if _, err := io.WriteString(bob.Stdin, "hello through the NATs\n"); err != nil {
		t.Fatal(err)
	}
	if _, err := carol.WaitLine(ctx, regexp.MustCompile(`<bob> hello through the NATs$`)); err != nil {
		t.Fatal(err)
	}
	t.Logf("from start to a direct session both ways: %v", direct.Round(time.Millisecond))
	punched := regexp.MustCompile(`/ip4/` + regexp.QuoteMeta(nats["carol"].Addr(inet).String()) + `/tcp/\S+, rtt .*; punched`)
	var peers string
	for range 20 {
		if _, err := io.WriteString(bob.Stdin, "/peers\n"); err != nil {
			t.Fatal(err)
		}
		wctx, cancel := context.WithTimeout(ctx, 250*time.Millisecond)
		peers, _ = bob.WaitLine(wctx, punched)
		cancel()
		if peers != "" {
			break
		}
	}
	if peers == "" {
		t.Fatalf("bob's /peers does not show carol punched:\n%s", bob.Output())
	}
	t.Logf("bob's /peers: %s", peers)
}
