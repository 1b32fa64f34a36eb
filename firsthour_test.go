package tendril

import (
	"context"
	"errors"
	"io"
	"sync/atomic"
	"testing"
	"time"
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
