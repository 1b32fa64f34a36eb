package mux

import (
	"context"
	"errors"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tendril-p2p/tendril/internal/testutil"
	"go.uber.org/goleak"
)

// TestServeHandlesEveryStream opens streams one after another and many at once, and checks
// that each reaches the handler once, and that no goroutine of Serve remains once the
// handlers have returned.
func TestServeHandlesEveryStream(t *testing.T) {
	sessionPairs(t, nil, nil, func(t *testing.T, c, s *Session) {
		baseline := goleak.IgnoreCurrent()
		var handled atomic.Int64
		release := make(chan struct{})
		var closedErr error
		closed := make(chan struct{})
		s.Serve(func(st *Stream) {
			defer st.Close()
			var b [1]byte
			if _, err := io.ReadFull(st, b[:]); err != nil {
				t.Errorf("handler read: %v", err)
				return
			}
			handled.Add(1)
			if b[0] == 'w' {
				<-release
			}
			_, _ = st.Write(b[:])
		}, func(err error) {
			closedErr = err
			close(closed)
		})
		ctx := context.Background()
		open := func(b byte) *Stream {
			st, err := c.OpenStream(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := st.Write([]byte{b}); err != nil {
				t.Fatal(err)
			}
			return st
		}
		// One at a time: each handler returns before the next stream opens.
		for range 20 {
			st := open('x')
			var got [1]byte
			if _, err := io.ReadFull(st, got[:]); err != nil || got[0] != 'x' {
				t.Fatalf("echo: %q, %v", got, err)
			}
			st.Close()
		}
		// Many at once, all held in their handlers: each runs on a goroutine of its own.
		var streams []*Stream
		for range 30 {
			streams = append(streams, open('w'))
		}
		waitFor(t, "30 concurrent handlers", func() bool { return handled.Load() == 50 })
		close(release)
		for _, st := range streams {
			var got [1]byte
			if _, err := io.ReadFull(st, got[:]); err != nil || got[0] != 'w' {
				t.Fatalf("echo: %q, %v", got, err)
			}
			st.Close()
		}
		if err := goleak.Find(baseline, ignoreFrameReader); err != nil {
			t.Errorf("goroutines left while the session is idle: %v", err)
		}
		select {
		case <-closed:
			t.Fatal("closed called while the session is open")
		default:
		}
		c.Close()
		select {
		case <-closed:
		case <-time.After(5 * time.Second):
			t.Fatal("closed not called after the peer closed")
		}
		if !errors.Is(closedErr, ErrSessionClosed) {
			t.Errorf("closed(%v), want ErrSessionClosed", closedErr)
		}
	})
}

// TestServeStreamsBeforeServe: streams opened before Serve is called are handed over when
// it is.
func TestServeStreamsBeforeServe(t *testing.T) {
	a, b := net.Pipe()
	c, s := sessionPair(t, a, b, nil, nil)
	for range 3 {
		st, err := c.OpenStream(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if _, err := st.Write([]byte("hi")); err != nil {
			t.Fatal(err)
		}
		defer st.Close()
	}
	waitFor(t, "three inbound streams", func() bool { return s.NumStreams() == 3 })
	var wg sync.WaitGroup
	wg.Add(3)
	s.Serve(func(st *Stream) {
		defer wg.Done()
		st.Close()
	}, func(error) {})
	wg.Wait()
}

// TestServeClosedOnce: closed is called exactly once whatever closes the session, also when
// the session closed before Serve.
func TestServeClosedOnce(t *testing.T) {
	for _, tc := range []struct {
		name  string
		close func(c, s *Session)
		want  error
	}{
		{"local close", func(_, s *Session) { s.Close() }, ErrSessionClosed},
		{"peer close", func(c, _ *Session) { c.Close() }, io.EOF},
		{"closed before serve", nil, ErrSessionClosed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, b := testutil.TCPPair(t)
			c, s := sessionPair(t, a, b, nil, nil)
			var calls atomic.Int32
			done := make(chan error, 2)
			serve := func() {
				s.Serve(func(st *Stream) { st.Close() }, func(err error) {
					calls.Add(1)
					done <- err
				})
			}
			if tc.close == nil {
				s.Close()
				serve()
			} else {
				serve()
				tc.close(c, s)
			}
			select {
			case err := <-done:
				if !errors.Is(err, tc.want) || !errors.Is(err, ErrSessionClosed) {
					t.Errorf("closed(%v), want %v and ErrSessionClosed", err, tc.want)
				}
				if tc.want != ErrSessionClosed && err.Error() != ErrSessionClosed.Error()+": "+tc.want.Error() {
					t.Errorf("closed(%q): the message does not name the cause", err)
				}
			case <-time.After(5 * time.Second):
				t.Fatal("closed not called")
			}
			s.Close()
			time.Sleep(20 * time.Millisecond)
			if n := calls.Load(); n != 1 {
				t.Errorf("closed called %d times", n)
			}
		})
	}
}

// TestServeOpeningPatterns: a stream's opening travels with its first frame, whatever the
// opener does first: close at once, read (the peer speaks first), or write after a while.
func TestServeOpeningPatterns(t *testing.T) {
	sessionPairs(t, nil, nil, func(t *testing.T, c, s *Session) {
		got := make(chan string, 8)
		s.Serve(func(st *Stream) {
			defer st.Close()
			var first [1]byte
			if _, err := io.ReadFull(st, first[:]); err == nil {
				got <- "data"
				return
			} else if errors.Is(err, io.EOF) {
				got <- "eof"
				return
			}
			got <- "error"
		}, func(error) {})
		ctx := context.Background()

		// Close at once: the opening and the FIN travel together.
		st, err := c.OpenStream(ctx)
		if err != nil {
			t.Fatal(err)
		}
		st.Close()
		if g := <-got; g != "eof" {
			t.Fatalf("stream closed at once: handler saw %s", g)
		}

		// Open and wait: the opening travels with the first data, not before.
		st, err = c.OpenStream(ctx)
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(20 * time.Millisecond)
		if n := s.NumStreams(); n != 0 {
			t.Fatalf("the peer sees %d streams before any was written", n)
		}
		st.Write([]byte{1})
		if g := <-got; g != "data" {
			t.Fatalf("delayed first write: handler saw %s", g)
		}
		st.Close()
		waitFor(t, "streams to be freed", func() bool { return c.NumStreams() == 0 && s.NumStreams() == 0 })
	})

	// The peer speaks first: the opener's Read must send the opening.
	a, b := testutil.TCPPair(t)
	c, s := sessionPair(t, a, b, nil, nil)
	s.Serve(func(st *Stream) {
		st.Write([]byte("hello"))
		st.Close()
	}, func(error) {})
	for range 20 {
		st, err := c.OpenStream(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		msg, err := io.ReadAll(st)
		if err != nil || string(msg) != "hello" {
			t.Fatalf("server speaks first: %q, %v", msg, err)
		}
		st.Close()
	}
}

// TestServeCloseWhileOpening closes a session while the peer opens streams as fast as it
// can: every handler returns, closed is called once, and no goroutine is left (goleak in
// TestMain).
func TestServeCloseWhileOpening(t *testing.T) {
	for range 5 {
		a, b := testutil.TCPPair(t)
		c, s := sessionPair(t, a, b, nil, nil)
		var closedCalls atomic.Int32
		done := make(chan struct{})
		s.Serve(func(st *Stream) {
			io.Copy(io.Discard, st)
			st.Close()
		}, func(error) {
			closedCalls.Add(1)
			close(done)
		})
		var wg sync.WaitGroup
		for range 4 {
			wg.Go(func() {
				for {
					st, err := c.OpenStream(context.Background())
					if err != nil {
						return
					}
					st.Write([]byte("x"))
				}
			})
		}
		time.Sleep(5 * time.Millisecond)
		s.Close()
		<-done
		c.Close()
		wg.Wait()
		if n := closedCalls.Load(); n != 1 {
			t.Fatalf("closed called %d times", n)
		}
	}
}

// TestServeAfterGoAway: after a local GoAway yamux refuses the peer's new streams before
// they reach the accept queue; the goroutine Serve started for them must not wait for them.
func TestServeAfterGoAway(t *testing.T) {
	a, b := testutil.TCPPair(t)
	c, s := sessionPair(t, a, b, nil, nil)
	baseline := goleak.IgnoreCurrent()
	var handled atomic.Int32
	s.Serve(func(st *Stream) {
		handled.Add(1)
		st.Close()
	}, func(error) {})
	if err := s.GoAway(); err != nil {
		t.Fatal(err)
	}
	// The GoAway may not have reached c yet: open raw streams until one is refused.
	for i := 0; ; i++ {
		st, err := c.OpenStream(context.Background())
		if err != nil {
			if !errors.Is(err, ErrRemoteGoAway) {
				t.Fatalf("open after GoAway: %v", err)
			}
			break
		}
		st.Write([]byte("x"))
		st.Close()
		if i > 1000 {
			t.Fatal("the peer's GoAway never arrived")
		}
		time.Sleep(time.Millisecond)
	}
	waitFor(t, "refused streams to be freed", func() bool { return s.NumStreams() == 0 })
	if err := goleak.Find(baseline, ignoreFrameReader); err != nil {
		t.Errorf("a goroutine still waits for refused streams: %v", err)
	}
	if n := handled.Load(); n != 0 {
		t.Errorf("%d refused streams reached the handler", n)
	}
}

// ignoreFrameReader: a session's frame reader may have ended and started again (turn.go),
// so it is not in the baseline of goroutines.
var ignoreFrameReader = goleak.IgnoreAnyFunction("github.com/tendril-p2p/tendril/mux.(*Session).recvLoop")

// TestServeConcurrency: at most ServeConcurrency handlers run at once; the streams beyond
// wait, unacknowledged, and are served as handlers return.
func TestServeConcurrency(t *testing.T) {
	a, b := net.Pipe()
	c, s := sessionPair(t, a, b, nil, &Config{ServeConcurrency: 2})
	release := make(chan struct{})
	var running, most atomicMax
	var served sync.WaitGroup
	served.Add(5)
	s.Serve(func(st *Stream) {
		defer served.Done()
		most.see(running.add(1))
		<-release
		running.add(-1)
		st.Close()
	}, nil)
	for range 5 {
		st, err := c.OpenStream(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if _, err := st.Write([]byte("x")); err != nil {
			t.Fatal(err)
		}
		defer st.Close()
	}
	waitFor(t, "two handlers running", func() bool { return running.add(0) == 2 })
	time.Sleep(20 * time.Millisecond) // more than lazyDelay: acknowledgements would be out
	c.mu.Lock()
	unacked := c.unacked
	c.mu.Unlock()
	if unacked != 3 {
		t.Fatalf("the opener has %d streams unacknowledged, want the 3 waiting for a handler", unacked)
	}
	close(release)
	served.Wait()
	if m := most.load(); m != 2 {
		t.Fatalf("%d handlers ran at once, want 2", m)
	}
}
