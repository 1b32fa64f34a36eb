package tendril

import (
	"context"
	"errors"
	"io"
	"syscall"
	"testing"
	"time"
)

// TestResetOnClose: with ResetOnClose the peer sees the connection reset when the session
// closes; without it, an orderly end of stream.
func TestResetOnClose(t *testing.T) {
	for _, tc := range []struct {
		reset bool
		want  error
	}{{false, io.EOF}, {true, syscall.ECONNRESET}} {
		a := newService(t, Config{ResetOnClose: tc.reset})
		b := newService(t, Config{})
		addr := listen(t, b)
		sess, err := a.Dial(context.Background(), addr)
		if err != nil {
			t.Fatal(err)
		}
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

func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestConnectionLostError: a session whose connection failed reports ErrSessionClosed and
// the cause, in the message too.
func TestConnectionLostError(t *testing.T) {
	cause := errors.New("wire cut")
	err := error(&connectionLost{cause})
	if !errors.Is(err, ErrSessionClosed) || !errors.Is(err, cause) {
		t.Errorf("%v does not wrap both ErrSessionClosed and its cause", err)
	}
	if want := "tendril: session closed: connection lost: wire cut"; err.Error() != want {
		t.Errorf("message %q, want %q", err.Error(), want)
	}
}
