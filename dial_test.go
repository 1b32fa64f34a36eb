package tendril

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/tendril-p2p/tendril/secio"
)

// TestDialReadyForSend: Dial returns once the OpenOnConnect protocols are open on both ends
// and this side's Connected has run, so a Send right after Dial, from either side, works.
// Twenty tries, since before this Send lost the race every time.
func TestDialReadyForSend(t *testing.T) {
	var connected atomic.Int32
	h := HandlerFuncs{OnConnected: func(c *Context, _ string) {
		if c.Outbound() {
			connected.Add(1)
		}
	}}
	proto := Protocol{Name: "/ready", Versions: []string{"1.0"}, Handler: h, OpenOnConnect: true}
	b := newService(t, Config{Protocols: []Protocol{proto}})
	addr := listen(t, b)
	for i := range 20 {
		a, err := New(testConfig(Config{Protocols: []Protocol{proto}}))
		if err != nil {
			t.Fatal(err)
		}
		sess, err := a.Dial(context.Background(), addr)
		if err != nil {
			a.Close()
			t.Fatal(err)
		}
		if got := connected.Load(); got != int32(i+1) {
			t.Errorf("try %d: Dial returned before the dialer's Connected (%d calls)", i, got)
		}
		if err := sess.Send("/ready", []byte("hi")); err != nil {
			t.Errorf("try %d: Send right after Dial: %v", i, err)
		}
		if err := b.Send(a.ID(), "/ready", []byte("hi")); err != nil {
			t.Errorf("try %d: the acceptor's Send right after Dial: %v", i, err)
		}
		a.Close()
	}
}

// TestDialNotTendril: dialling something that is not a tendril peer (an HTTP server) fails
// with an error that says so and still matches secio.ErrInvalidMessage.
func TestDialNotTendril(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		c.Write([]byte("HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n"))
		io.Copy(io.Discard, c)
	}()
	a := newService(t, Config{})
	_, err = a.Dial(context.Background(), MustParseAddr(fmt.Sprintf("/ip4/127.0.0.1/tcp/%d", ln.Addr().(*net.TCPAddr).Port)))
	if !errors.Is(err, secio.ErrNotTendril) || !errors.Is(err, secio.ErrInvalidMessage) || !strings.Contains(err.Error(), "looks like an HTTP server") {
		t.Fatalf("dial an HTTP server: %v", err)
	}
}

// TestRequirePeerID: with Config.RequirePeerID, Dial refuses an address without /p2p/.
func TestRequirePeerID(t *testing.T) {
	srv := newService(t, Config{})
	addr := listen(t, srv)
	cli := newService(t, Config{RequirePeerID: true})
	bare := addr
	bare.Peer = secio.PeerID{}
	if _, err := cli.Dial(context.Background(), bare); !errors.Is(err, ErrInvalidAddr) {
		t.Fatalf("Dial without /p2p/ and RequirePeerID: %v, want ErrInvalidAddr", err)
	}
	if _, err := cli.Dial(context.Background(), addr); err != nil {
		t.Fatalf("Dial with /p2p/: %v", err)
	}
}
