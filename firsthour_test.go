package tendril

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tendril-p2p/tendril/mux"
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
		a, err := New(Config{Protocols: []Protocol{proto}})
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

// TestBroadcastUnknownProtocol: a misspelt protocol name is an error, as for Send, not "sent
// to nobody".
func TestBroadcastUnknownProtocol(t *testing.T) {
	a := newService(t, Config{Protocols: []Protocol{echoProto("/known", newInbox())}})
	n, err := a.Broadcast("/unknown", []byte("x"), nil)
	if n != 0 || !errors.Is(err, ErrUnknownProtocol) {
		t.Fatalf("Broadcast on an unregistered protocol: %d, %v", n, err)
	}
	if n, err := a.Broadcast("/known", []byte("x"), nil); n != 0 || err != nil {
		t.Fatalf("Broadcast with no session: %d, %v", n, err)
	}
}

// TestPeerCloseIsNotConnectionLost: a peer that closes its session on purpose is told apart
// (ErrPeerClosed) from one whose connection is lost (here: closed with a TCP reset and no
// close record), in Session.Err and in the event.
func TestPeerCloseIsNotConnectionLost(t *testing.T) {
	for _, reset := range []bool{false, true} {
		box := newInbox()
		b := newService(t, Config{Protocols: []Protocol{echoProto("/p", box)}, ResetOnClose: reset})
		a := newService(t, Config{Protocols: []Protocol{echoProto("/p", newInbox())}})
		events := collectEvents(a)
		sess, err := a.Dial(context.Background(), listen(t, b))
		if err != nil {
			t.Fatal(err)
		}
		for b.Session(a.ID()) == nil { // the acceptor registers it a moment after Dial returns
			time.Sleep(time.Millisecond)
		}
		if err := b.Disconnect(a.ID()); err != nil {
			t.Fatal(err)
		}
		<-sess.Done()
		e := events.waitFor(t, "session closed", func(e Event) bool { return e.Type == EventSessionClosed })
		graceful := errors.Is(sess.Err(), ErrPeerClosed)
		if graceful == reset || errors.Is(e.Err, ErrPeerClosed) != graceful || !errors.Is(sess.Err(), ErrSessionClosed) ||
			graceful && (!errors.Is(sess.Err(), io.EOF) || sess.Err().Error() != "tendril: session closed by the peer") {
			t.Errorf("peer closed (reset %v): Err %v, event %v", reset, sess.Err(), e.Err)
		}
	}
}

// TestLegacyWrongKeyHint: a legacy TEA session whose peer uses another key ends with an
// error that says so (ErrLegacyKeyMismatch), not only with the mux's "invalid version".
func TestLegacyWrongKeyHint(t *testing.T) {
	p := echoProto("/legacy", newInbox())
	p.AllowLegacyTEA, p.OpenOnConnect = true, true
	a := newService(t, Config{Protocols: []Protocol{p}, LegacyTEA: &LegacyTEAConfig{Key: bytes.Repeat([]byte{7}, 16)}})
	b := newService(t, Config{Protocols: []Protocol{p}, LegacyTEA: &LegacyTEAConfig{Key: bytes.Repeat([]byte{8}, 16)}})
	events := collectEvents(b)
	addr, err := b.ListenLegacy(context.Background(), loopback)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.DialLegacy(context.Background(), addr); err != nil {
		t.Fatal(err)
	}
	e := events.waitFor(t, "the listener's session closed", func(e Event) bool { return e.Type == EventSessionClosed })
	if !errors.Is(e.Err, ErrLegacyKeyMismatch) || !errors.Is(e.Err, ErrSessionClosed) || !errors.Is(e.Err, mux.ErrProtocol) ||
		!strings.Contains(e.Err.Error(), "wrong key?") {
		t.Errorf("legacy session with a wrong key ended with %v", e.Err)
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
