//go:build !js

package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/tendril-p2p/tendril"
)

// runDemo starts o.peers chat peers in this process, on loopback, in a chain (peer i dials
// peer i-1), lets each say a line, and checks that every peer shows every other peer's line,
// relayed along the chain. The last peer speaks only chat 1.0, so its link negotiates 1.0
// while the others use 1.1. It fails if any line is missing.
func runDemo(ctx context.Context, o *options, stdout io.Writer) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	out := &lockedWriter{w: stdout}
	type peer struct {
		n    *node
		svc  *tendril.Service
		addr tendril.Addr
		got  map[string]bool
	}
	var (
		mu    sync.Mutex
		peers []*peer
		total = o.peers * (o.peers - 1) // lines expected across all peers
		seen  int
		all   = make(chan struct{})
	)
	for i := range o.peers {
		name := fmt.Sprintf("peer%d", i+1)
		p := &peer{n: newNode(name, out), got: make(map[string]bool)}
		p.n.onLine = func(origin, text string) {
			mu.Lock()
			defer mu.Unlock()
			if !p.got[text] {
				p.got[text] = true
				seen++
				if seen == total {
					close(all)
				}
			}
		}
		versions := []string{"1.0", "1.1"}
		if i == o.peers-1 {
			versions = []string{"1.0"} // an older peer: shows negotiation down to 1.0
		}
		svc, err := newChatService(p.n, nil, o.legacyKey, versions...)
		if err != nil {
			return err
		}
		defer svc.Close()
		p.svc = svc
		if o.legacyKey != nil {
			p.addr, err = svc.ListenLegacy(ctx, tendril.MustParseAddr("/ip4/127.0.0.1/tcp/0"))
		} else {
			p.addr, err = svc.Listen(ctx, tendril.MustParseAddr("/ip4/127.0.0.1/tcp/0"))
		}
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "%s: %s\n", name, p.addr)
		peers = append(peers, p)
	}

	// Chain: peer i dials peer i-1, and the chat protocol opens on connect.
	links := 0
	for i := 1; i < len(peers); i++ {
		var err error
		if o.legacyKey != nil {
			_, err = peers[i].svc.DialLegacy(ctx, peers[i-1].addr)
		} else {
			_, err = peers[i].svc.Dial(ctx, peers[i-1].addr)
		}
		if err != nil {
			return fmt.Errorf("%s dialling %s: %w", peers[i].n.name, peers[i-1].n.name, err)
		}
		links++
	}
	// Wait until every link has the chat protocol open on both ends.
	for {
		open := 0
		for _, p := range peers {
			p.n.mu.Lock()
			open += len(p.n.peers)
			p.n.mu.Unlock()
		}
		if open == 2*links {
			break
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("chain did not connect: %d of %d stream ends open", open, 2*links)
		case <-time.After(10 * time.Millisecond):
		}
	}

	names := make(map[string]string, len(peers))
	for _, p := range peers {
		names[p.svc.ID().String()] = p.n.name
	}
	fmt.Fprintln(out, "--- sessions")
	for _, p := range peers {
		for _, s := range p.svc.Sessions() {
			suite := s.Suite().String()
			if !s.Secure() {
				suite = "TEA (INSECURE legacy)"
			}
			var protos []string
			for _, pi := range s.Protocols() {
				protos = append(protos, pi.Name+" "+pi.Version)
			}
			fmt.Fprintf(out, "%s -> %s: %s, %s, %s\n", p.n.name, peerLabel(names, s), s.Direction(), suite, strings.Join(protos, ", "))
		}
	}
	fmt.Fprintln(out, "--- chat")
	for _, p := range peers {
		p.n.say("hello from " + p.n.name)
	}
	select {
	case <-all:
	case <-ctx.Done():
		mu.Lock()
		defer mu.Unlock()
		var missing []string
		for _, p := range peers {
			for _, q := range peers {
				if p != q && !p.got["hello from "+q.n.name] {
					missing = append(missing, fmt.Sprintf("%s never got %s's line", p.n.name, q.n.name))
				}
			}
		}
		return fmt.Errorf("demo failed: %s", strings.Join(missing, "; "))
	}
	fmt.Fprintf(out, "--- ok: %d peers, every one received all %d lines of the others (relayed along the chain)\n", len(peers), len(peers)-1)
	return nil
}

func peerLabel(names map[string]string, s *tendril.Session) string {
	if s.Peer().IsZero() {
		return s.RemoteAddr().Transport.String()
	}
	if n, ok := names[s.Peer().String()]; ok {
		return n
	}
	return short(s.Peer().String())
}

// lockedWriter serialises writes from the peers' goroutines.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
