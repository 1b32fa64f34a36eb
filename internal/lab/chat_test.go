//go:build linux

package lab

import (
	"io"
	"regexp"
	"strings"
	"testing"
)

// Two chat peers, each a process on its own host of one LAN: the dialler's line reaches
// the listener over the lab's network, and the listener sees the dialler's lab address.
func TestChatPair(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs examples/chat")
	}
	ctx := testContext(t)
	l := New(t)
	chat := Build(t, "github.com/tendril-p2p/tendril/examples/chat")
	lan := l.LAN("lan0")
	a, b := l.Host("a", lan), l.Host("b", lan)

	alice := a.Start(ctx, chat, "-name", "alice", "-listen", "/ip4/"+a.Addr(lan).String()+"/tcp/0")
	line, err := alice.WaitLine(ctx, listeningRE)
	if err != nil {
		t.Fatal(err)
	}
	addr := listeningRE.FindStringSubmatch(line)[1]
	bob := b.Start(ctx, chat, "-name", "bob", "-dial", addr)
	// "joined" names the peer by its ID: its nick comes in its first message.
	joined, err := alice.WaitLine(ctx, regexp.MustCompile(`joined: \S+ at `))
	if err != nil {
		t.Fatal(err)
	}
	if want := "/ip4/" + b.Addr(lan).String() + "/tcp/"; !strings.Contains(joined, want) {
		t.Errorf("alice saw %q, want bob at %s...", joined, want)
	}
	if _, err := bob.WaitLine(ctx, regexp.MustCompile(`joined: \S+ at `)); err != nil {
		t.Fatal(err)
	}
	if _, err := io.WriteString(bob.Stdin, "hello from the lab\n"); err != nil {
		t.Fatal(err)
	}
	if _, err := alice.WaitLine(ctx, regexp.MustCompile(`<bob> hello from the lab$`)); err != nil {
		t.Fatal(err)
	}
	for _, p := range []*Process{bob, alice} {
		if err := p.Stop(); err != nil {
			t.Errorf("%s after SIGTERM: %v", p, err)
		}
	}
}
