package tendril

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/tendril-p2p/tendril/mux"
)

// TestResetOnClose: with ResetOnClose the peer sees the connection reset when the session
// closes; without it, an orderly end of stream.
func TestResetOnClose(t *testing.T) {
	needTCP(t)
	for _, tc := range []struct {
		reset bool
		want  error
	}{{false, io.EOF}, {true, syscall.ECONNRESET}} {
		a := newService(t, Config{ResetOnClose: tc.reset})
		b := newService(t, Config{})
		addr := listen(t, b)
		sess := dial(t, a, addr)
		var remote *Session
		waitUntil(t, "b's session", func() bool { remote = b.Session(a.ID()); return remote != nil })
		sess.Close()
		select {
		case <-remote.Done():
		case <-time.After(10 * time.Second):
			t.Fatal("the peer's session did not close")
		}
		if err := remote.Err(); !errors.Is(err, tc.want) {
			t.Errorf("ResetOnClose %v: the peer's session ended with %v, want %v", tc.reset, err, tc.want)
		}
	}
}

// TestConnectionLostError: a session that this side did not end reports ErrSessionClosed,
// its reason and the cause, in the message too (but for the peer's intended close).
func TestConnectionLostError(t *testing.T) {
	cause := errors.New("wire cut")
	for _, tc := range []struct {
		reason error
		want   string
	}{
		{errConnectionLost, "tendril: session closed: connection lost: wire cut"},
		{ErrPeerClosed, "tendril: session closed by the peer"},
		{ErrLegacyKeyMismatch, "tendril: session closed: legacy TEA: the peer's frames did not decrypt to mux frames; wrong key?: wire cut"},
	} {
		err := error(&closedError{tc.reason, cause})
		if !errors.Is(err, ErrSessionClosed) || !errors.Is(err, tc.reason) || !errors.Is(err, cause) {
			t.Errorf("%v does not wrap ErrSessionClosed, %v and its cause", err, tc.reason)
		}
		if err.Error() != tc.want {
			t.Errorf("message %q, want %q", err.Error(), tc.want)
		}
	}
}

// TestCloseFromOwnHandler: a handler that closes its own session (Session.Close or
// Service.Disconnect, from OnReceived) gets control back without waiting for itself: both
// timeouts are an hour here, so a Close that waited for the calling handler would not
// return within the test's bound. What the handler queued before closing still arrives, and
// the peer sees a graceful close.
func TestCloseFromOwnHandler(t *testing.T) {
	const n = 200
	for _, how := range []string{"Session.Close", "Service.Disconnect"} {
		t.Run(how, func(t *testing.T) {
			closed := make(chan error, 1)
			var b *Service
			kick := HandlerFuncs{OnReceived: func(c *Context, msg []byte) {
				for i := range n {
					if err := c.Send(digestMsg(i, 1000)); err != nil {
						closed <- err
						return
					}
				}
				if how == "Session.Close" {
					closed <- c.Session().Close()
				} else {
					closed <- b.Disconnect(c.Peer())
				}
			}}
			b = newService(t, Config{
				Protocols:          []Protocol{{Name: "/kick", Versions: []string{"1.0"}, Handler: kick}},
				ShutdownTimeout:    time.Hour,
				HandlerExitTimeout: time.Hour,
			})
			box := newInbox()
			a := newService(t, Config{Protocols: []Protocol{echoProto("/kick", box)}})
			sess := dialOpen(t, a, listen(t, b), "/kick")
			if err := sess.Send("/kick", []byte("misbehave")); err != nil {
				t.Fatal(err)
			}
			select {
			case err := <-closed:
				if err != nil {
					t.Fatalf("%s from the handler: %v", how, err)
				}
			case <-time.After(30 * time.Second):
				t.Fatalf("%s from the session's own handler did not return", how)
			}
			select {
			case <-sess.Done():
			case <-time.After(30 * time.Second):
				t.Fatal("the kicked peer's session did not end")
			}
			if !errors.Is(sess.Err(), ErrPeerClosed) {
				t.Errorf("the kicked peer's session ended with %v, want ErrPeerClosed", sess.Err())
			}
			box.waitFor(t, "the messages queued before Close", func() bool { return len(box.msgs) == n })
			for i, m := range box.msgs {
				if !checkDigest(m) || string(m[32:40]) != fmt.Sprintf("%08d", i) {
					t.Fatalf("message %d corrupt or out of order", i)
				}
			}
			if bs := b.Session(a.ID()); bs != nil {
				<-bs.Done() // the handler has returned: the session ends without the timeouts
			}
		})
	}
}

// TestServiceCloseWithStuckHandler: Close with a handler that never returns (it ignores its
// Context), message or raw, returns within ShutdownTimeout and a fraction of a second, as
// its doc says, and abandons the handler; HandlerExitTimeout (5 s) does not add to it.
// Before: ShutdownTimeout + HandlerExitTimeout, 6 s.
func TestServiceCloseWithStuckHandler(t *testing.T) {
	for _, raw := range []bool{false, true} {
		t.Run(map[bool]string{false: "message", true: "raw"}[raw], func(t *testing.T) {
			release := make(chan struct{})
			defer close(release)
			entered := make(chan struct{}, 1)
			stuck := Protocol{Name: "/stuck", Versions: []string{"1.0"}, Handler: HandlerFuncs{OnReceived: func(*Context, []byte) {
				entered <- struct{}{}
				<-release
			}}}
			if raw {
				stuck = Protocol{Name: "/stuck", Versions: []string{"1.0"}, StreamHandler: StreamHandlerFunc(func(*Context, string, net.Conn) {
					entered <- struct{}{}
					<-release
				})}
			}
			b, err := New(testConfig(Config{Protocols: []Protocol{stuck}, ShutdownTimeout: time.Second}))
			if err != nil {
				t.Fatal(err)
			}
			peer := stuck
			peer.Handler, peer.StreamHandler = newInbox(), nil
			a := newService(t, Config{Protocols: []Protocol{peer}})
			sess := dialOpen(t, a, listen(t, b), "/stuck")
			if !raw {
				if err := sess.Send("/stuck", []byte("x")); err != nil {
					t.Fatal(err)
				}
			}
			<-entered
			start := time.Now()
			done := make(chan error, 1)
			go func() { done <- b.Close() }()
			select {
			case <-done:
			case <-time.After(10 * time.Second):
				t.Fatal("Close with a stuck handler did not return")
			}
			if d := time.Since(start); d > 2*time.Second {
				t.Fatalf("Close with a stuck handler and ShutdownTimeout 1 s took %v", d)
			}
		})
	}
}

// TestPeerCloseIsNotConnectionLost: a peer that closes its session on purpose is told apart
// (ErrPeerClosed) from one whose connection is lost (here: closed with a TCP reset and no
// close record), in Session.Err and in the event.
func TestPeerCloseIsNotConnectionLost(t *testing.T) {
	needTCP(t)
	for _, reset := range []bool{false, true} {
		box := newInbox()
		b := newService(t, Config{Protocols: []Protocol{echoProto("/p", box)}, ResetOnClose: reset})
		a := newService(t, Config{Protocols: []Protocol{echoProto("/p", newInbox())}})
		events := collectEvents(a)
		sess := dial(t, a, listen(t, b))
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
		if e.Failed() == graceful {
			t.Errorf("peer closed (reset %v): Event.Failed() = %v", reset, e.Failed())
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
	addr, err := b.ListenLegacy(context.Background(), loopbackAddr)
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

// TestDroppedSessionsEndHandlers: connections to a raw-stream protocol whose handlers wait
// on ctx.Done() are lost (closed, reset, or silent until the keepalive gives up): every
// session is gone within 2 s, every handler has returned, and each has EventSessionClosed.
func TestDroppedSessionsEndHandlers(t *testing.T) {
	big := 512
	if raceEnabled {
		big = 128 // each connection costs a handshake and several goroutines, ~10x slower under -race
	}
	cases := []struct {
		name string
		n    int
		drop func(p *rawPeer)
	}{
		{"close-8", 8, func(p *rawPeer) { p.tcp.Close() }},
		{"reset-8", 8, func(p *rawPeer) { abortConn(p.tcp) }},
		{"silent-8", 8, func(p *rawPeer) { p.gate.stopReading() }}, // pings go unanswered
		{fmt.Sprintf("close-%d", big), big, func(p *rawPeer) { p.tcp.Close() }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			checkNoLeaks(t)
			var running atomic.Int64
			mc := mux.DefaultConfig()
			mc.KeepAliveInterval = 300 * time.Millisecond
			mc.ConnectionWriteTimeout = 500 * time.Millisecond
			srv := newService(t, Config{
				Protocols:      []Protocol{holdProto(&running)},
				MaxConnections: tc.n * 2,
				Mux:            mc,
				EventBuffer:    4 * tc.n,
			})
			log := collectEvents(srv)
			addr := listen(t, srv)
			peers := make([]*rawPeer, tc.n)
			for i := range peers {
				peers[i] = handshakeRaw(t, addr)
				peers[i].startMux(t)
				openHold(t, peers[i])
			}
			waitUntil(t, "handlers running", func() bool { return running.Load() == int64(tc.n) })
			sessions := srv.Sessions()
			start := time.Now()
			for _, p := range peers {
				tc.drop(p)
			}
			deadline := start.Add(2 * time.Second)
			if tc.name == "silent-8" {
				deadline = deadline.Add(mc.KeepAliveInterval + mc.ConnectionWriteTimeout)
			}
			for len(srv.Sessions()) > 0 || running.Load() > 0 {
				if time.Now().After(deadline) {
					t.Fatalf("%v after the drop: %d sessions registered, %d handlers running", time.Since(start), len(srv.Sessions()), running.Load())
				}
				time.Sleep(10 * time.Millisecond)
			}
			// A session leaves the registry just before its Done closes: allow that
			// moment, within the same bound.
			for _, sess := range sessions {
				select {
				case <-sess.Done():
				case <-time.After(max(time.Until(deadline), 200*time.Millisecond)):
					t.Fatal("Session.Done not closed")
				}
			}
			log.waitCount(t, "session-closed events", tc.n, func(e Event) bool { return e.Type == EventSessionClosed })
			t.Logf("%d sessions gone, handlers returned, in %v", tc.n, time.Since(start).Round(time.Millisecond))
		})
	}
}

// TestDroppedSessionEndsMessageHandler: a message handler blocked in Received on
// ctx.Done() returns when the connection is lost.
func TestDroppedSessionEndsMessageHandler(t *testing.T) {
	checkNoLeaks(t)
	var running atomic.Int64
	h := HandlerFuncs{OnReceived: func(c *Context, _ []byte) {
		running.Add(1)
		defer running.Add(-1)
		<-c.Done()
	}}
	srv := newService(t, Config{Protocols: []Protocol{{Name: "/m", Versions: []string{"1"}, Handler: h}}})
	log := collectEvents(srv)
	cli := newService(t, Config{Protocols: []Protocol{{Name: "/m", Versions: []string{"1"}, Handler: HandlerFuncs{}}}})
	sess := dialOpen(t, cli, listen(t, srv), "/m")
	if err := sess.Send("/m", []byte("block")); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "handler blocked", func() bool { return running.Load() == 1 })
	start := time.Now()
	sess.conn.Close() // the connection is lost, not closed by the session
	for len(srv.Sessions()) > 0 || running.Load() > 0 {
		if time.Since(start) > 2*time.Second {
			t.Fatalf("session still registered (%d) or handler running (%d) 2 s after the drop", len(srv.Sessions()), running.Load())
		}
		time.Sleep(10 * time.Millisecond)
	}
	log.waitFor(t, "session closed", func(e Event) bool { return e.Type == EventSessionClosed })
}

// TestHandlerIgnoringContextAbandoned: a handler that ignores its context is abandoned after
// HandlerExitTimeout; its session is unregistered and reported closed anyway.
func TestHandlerIgnoringContextAbandoned(t *testing.T) {
	release := make(chan struct{})
	var returned sync.WaitGroup
	stuck := Protocol{Name: "/stuck", Versions: []string{"1"}, StreamHandler: StreamHandlerFunc(func(*Context, string, net.Conn) {
		defer returned.Done()
		<-release
	})}
	returned.Add(1)
	defer func() { close(release); returned.Wait() }()
	srv := newService(t, Config{Protocols: []Protocol{stuck}, HandlerExitTimeout: 200 * time.Millisecond})
	log := collectEvents(srv)
	addr := listen(t, srv)
	p := handshakeRaw(t, addr)
	p.startMux(t)
	st, err := p.ms.OpenStream(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	st.Write(negRequest("/stuck", "1"))
	waitUntil(t, "session", func() bool { return len(srv.Sessions()) == 1 })
	sess := srv.Sessions()[0]
	time.Sleep(100 * time.Millisecond)
	start := time.Now()
	p.tcp.Close()
	select {
	case <-sess.Done():
	case <-time.After(2 * time.Second):
		t.Fatal("session not done 2 s after the drop")
	}
	if d := time.Since(start); d < 200*time.Millisecond {
		t.Fatalf("session done after %v: the handler was not waited for at all", d)
	}
	if len(srv.Sessions()) != 0 {
		t.Fatal("session still registered")
	}
	log.waitFor(t, "session closed", func(e Event) bool { return e.Type == EventSessionClosed })
}
