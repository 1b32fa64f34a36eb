package tendril

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"
)

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
			sess, err := a.Dial(context.Background(), listen(t, b))
			if err != nil {
				t.Fatal(err)
			}
			if err := sess.OpenProtocol(context.Background(), "/kick"); err != nil {
				t.Fatal(err)
			}
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
// Context) finishes within the documented bounds, ShutdownTimeout then HandlerExitTimeout,
// and abandons the handler.
func TestServiceCloseWithStuckHandler(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	entered := make(chan struct{}, 1)
	stuck := HandlerFuncs{OnReceived: func(*Context, []byte) {
		entered <- struct{}{}
		<-release
	}}
	const bound = 200 * time.Millisecond
	b, err := New(Config{
		Protocols:          []Protocol{{Name: "/stuck", Versions: []string{"1.0"}, Handler: stuck}},
		ShutdownTimeout:    bound,
		HandlerExitTimeout: bound,
	})
	if err != nil {
		t.Fatal(err)
	}
	a := newService(t, Config{Protocols: []Protocol{echoProto("/stuck", newInbox())}})
	sess, err := a.Dial(context.Background(), listen(t, b))
	if err != nil {
		t.Fatal(err)
	}
	if err := sess.OpenProtocol(context.Background(), "/stuck"); err != nil {
		t.Fatal(err)
	}
	if err := sess.Send("/stuck", []byte("x")); err != nil {
		t.Fatal(err)
	}
	<-entered
	done := make(chan error, 1)
	go func() { done <- b.Close() }()
	select {
	case <-done:
	case <-time.After(2*bound + 10*time.Second): // the bounds, and generous slack for a loaded machine
		t.Fatalf("Close with a stuck handler did not return within ShutdownTimeout + HandlerExitTimeout (%v each)", bound)
	}
}
