package mux

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/tendril-p2p/tendril/internal/testutil"
)

func TestOpenAcceptMany(t *testing.T) {
	sessionPairs(t, nil, nil, func(t *testing.T, c, s *Session) {
		waitC, waitS := echo(t, c), echo(t, s)
		var wg sync.WaitGroup
		for i := range 100 {
			for _, opener := range []*Session{c, s} {
				wg.Go(func() {
					msg := bytes.Repeat([]byte{byte(i)}, 1+i*37)
					if err := roundTrip(context.Background(), opener, msg); err != nil {
						t.Error(err)
					}
				})
			}
		}
		wg.Wait()
		waitFor(t, "streams to be freed", func() bool { return c.NumStreams() == 0 && s.NumStreams() == 0 })
		c.Close()
		s.Close()
		waitC()
		waitS()
	})
}

func TestStreamIDs(t *testing.T) {
	a, b := net.Pipe()
	c, s := sessionPair(t, a, b, nil, nil)
	ctx := context.Background()
	cs, err := c.OpenStream(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ss, err := s.OpenStream(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if cs.StreamID()%2 != 1 || ss.StreamID()%2 != 0 {
		t.Fatalf("stream IDs %d (client) and %d (server)", cs.StreamID(), ss.StreamID())
	}
	if cs.Session() != c || cs.LocalAddr() != a.LocalAddr() || cs.RemoteAddr() != a.RemoteAddr() ||
		c.LocalAddr() != a.LocalAddr() || s.RemoteAddr() != b.RemoteAddr() {
		t.Fatal("addresses")
	}
}

func TestMaxStreamsOutbound(t *testing.T) {
	sessionPairs(t, &Config{MaxStreams: 4}, nil, func(t *testing.T, c, s *Session) {
		accepted := make(chan *Stream, 8)
		go func() {
			for {
				st, err := s.AcceptStream(context.Background())
				if err != nil {
					close(accepted)
					return
				}
				accepted <- st
			}
		}()
		ctx := context.Background()
		streams := openAnnounced(t, c, 4)
		if _, err := c.OpenStream(ctx); !errors.Is(err, ErrTooManyStreams) {
			t.Fatalf("5th OpenStream = %v, want ErrTooManyStreams", err)
		}
		if c.NumStreams() != 4 {
			t.Fatalf("NumStreams = %d", c.NumStreams())
		}
		// A reset frees a slot at once.
		streams[0].Reset()
		if c.NumStreams() != 3 {
			t.Fatalf("NumStreams after Reset = %d", c.NumStreams())
		}
		st, err := c.OpenStream(ctx)
		if err != nil {
			t.Fatalf("OpenStream after Reset: %v", err)
		}
		st.Write([]byte{1})
		streams = append(streams, st)
		// A close on both sides frees a slot.
		streams[1].Close()
		for range 5 {
			r := <-accepted
			if r.StreamID() == streams[1].StreamID() {
				r.Close()
			}
		}
		waitFor(t, "the closed stream to be freed", func() bool { return c.NumStreams() == 3 })
		if _, err := c.OpenStream(ctx); err != nil {
			t.Fatalf("OpenStream after close: %v", err)
		}
		if _, err := c.OpenStream(ctx); !errors.Is(err, ErrTooManyStreams) {
			t.Fatalf("OpenStream over the limit = %v", err)
		}
	})
}

func TestMaxStreamsInbound(t *testing.T) {
	sessionPairs(t, nil, &Config{MaxStreams: 3}, func(t *testing.T, c, s *Session) {
		ctx := context.Background()
		var streams []*Stream
		for i := range 6 {
			st, err := c.OpenStream(ctx)
			if err != nil {
				t.Fatal(err)
			}
			// the refusal of streams 3 to 5 may already have arrived
			if _, err := st.Write([]byte{byte(i)}); err != nil && (i < 3 || !errors.Is(err, ErrStreamReset)) {
				t.Fatal(err)
			}
			streams = append(streams, st)
		}
		for i := range 3 {
			st, err := s.AcceptStream(ctx)
			if err != nil {
				t.Fatal(err)
			}
			buf := make([]byte, 1)
			if _, err := io.ReadFull(st, buf); err != nil || buf[0] != byte(i) {
				t.Fatalf("stream %d: %v %v", i, buf, err)
			}
		}
		for _, st := range streams[3:] {
			st.SetReadDeadline(time.Now().Add(5 * time.Second))
			if _, err := st.Read(make([]byte, 1)); !errors.Is(err, ErrStreamReset) {
				t.Fatalf("refused stream Read = %v, want ErrStreamReset", err)
			}
			if _, err := st.Write([]byte("x")); !errors.Is(err, ErrStreamReset) {
				t.Fatalf("refused stream Write = %v, want ErrStreamReset", err)
			}
		}
		if n := s.NumStreams(); n != 3 {
			t.Fatalf("server NumStreams = %d, want 3", n)
		}
		waitFor(t, "client to forget refused streams", func() bool { return c.NumStreams() == 3 })
		actx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
		defer cancel()
		if st, err := s.AcceptStream(actx); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("4th AcceptStream = %v, %v; want deadline exceeded", st, err)
		}
		// The session still works: a stream freed on the server makes room.
		streams[0].Reset()
		waitFor(t, "server to free a slot", func() bool { return s.NumStreams() == 2 })
		st, err := c.OpenStream(ctx)
		if err != nil {
			t.Fatal(err)
		}
		st.Write([]byte("y"))
		acc, err := s.AcceptStream(ctx)
		if err != nil || acc.StreamID() != st.StreamID() {
			t.Fatalf("accept after free: %v", err)
		}
	})
}

func TestAcceptBacklog(t *testing.T) {
	a, b := testutil.TCPPair(t)
	c, s := sessionPair(t, a, b, nil, &Config{AcceptBacklog: 2})
	ctx := context.Background()
	streams := openAnnounced(t, c, 4) // the refusal of 3 and 4 may already be back
	for _, st := range streams[2:] {
		st.SetReadDeadline(time.Now().Add(5 * time.Second))
		if _, err := st.Read(make([]byte, 1)); !errors.Is(err, ErrStreamReset) {
			t.Fatalf("stream beyond backlog: %v, want ErrStreamReset", err)
		}
	}
	for _, want := range streams[:2] {
		st, err := s.AcceptStream(ctx)
		if err != nil || st.StreamID() != want.StreamID() {
			t.Fatalf("AcceptStream = %v, %v", st, err)
		}
	}
	// the backlog is free again
	st, err := c.OpenStream(ctx)
	if err != nil {
		t.Fatal(err)
	}
	st.Write([]byte{1})
	if acc, err := s.AcceptStream(ctx); err != nil || acc.StreamID() != st.StreamID() {
		t.Fatalf("AcceptStream after backlog drained: %v", err)
	}
}

func TestContextCancel(t *testing.T) {
	a, b := net.Pipe()
	c, s := sessionPair(t, a, b, nil, nil)
	canceled, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := c.OpenStream(canceled); !errors.Is(err, context.Canceled) {
		t.Fatalf("OpenStream = %v", err)
	}
	if _, err := s.AcceptStream(canceled); !errors.Is(err, context.Canceled) {
		t.Fatalf("AcceptStream = %v", err)
	}
	if _, err := c.Ping(canceled); !errors.Is(err, context.Canceled) {
		t.Fatalf("Ping = %v", err)
	}
	ctx, cancel2 := context.WithTimeout(context.Background(), 30*time.Millisecond)
	defer cancel2()
	start := time.Now()
	if _, err := s.AcceptStream(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("AcceptStream = %v", err)
	}
	if time.Since(start) > 2*time.Second {
		t.Fatal("AcceptStream ignored its deadline")
	}
	rtt, err := c.Ping(context.Background())
	if err != nil || rtt <= 0 {
		t.Fatalf("Ping = %v, %v", rtt, err)
	}
}

func TestCloseWithStreamsOpen(t *testing.T) {
	small := &Config{MaxStreamWindow: MinStreamWindow}
	sessionPairs(t, small, small, func(t *testing.T, c, s *Session) {
		ctx := context.Background()
		var wg sync.WaitGroup
		errs := make(chan error, 20)
		for range 5 {
			st, err := c.OpenStream(ctx)
			if err != nil {
				t.Fatal(err)
			}
			wg.Go(func() { // blocks in Read
				_, err := st.Read(make([]byte, 10))
				errs <- err
			})
			wg.Go(func() { // blocks in Write once the window is full
				buf := make([]byte, 64<<10)
				for {
					if _, err := st.Write(buf); err != nil {
						errs <- err
						return
					}
				}
			})
		}
		time.Sleep(50 * time.Millisecond)
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
		if err := c.Close(); err != nil {
			t.Fatalf("second Close: %v", err)
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			if !errors.Is(err, ErrSessionClosed) {
				t.Errorf("stream error after Close = %v", err)
			}
		}
		if !c.IsClosed() {
			t.Fatal("IsClosed = false")
		}
		if _, err := c.OpenStream(ctx); !errors.Is(err, ErrSessionClosed) {
			t.Fatalf("OpenStream after Close = %v", err)
		}
		if _, err := c.Ping(ctx); !errors.Is(err, ErrSessionClosed) {
			t.Fatalf("Ping after Close = %v", err)
		}
		// the remote notices
		select {
		case <-s.CloseChan():
		case <-time.After(5 * time.Second):
			t.Fatal("remote did not notice the close")
		}
		// the 5 streams never accepted may still come out of the queue
		var err error
		for range 6 {
			if _, err = s.AcceptStream(ctx); err != nil {
				break
			}
		}
		if !errors.Is(err, ErrSessionClosed) {
			t.Fatalf("remote AcceptStream = %v", err)
		}
	})
}

func TestRemoteConnClosed(t *testing.T) {
	a, b := testutil.TCPPair(t)
	_, s := sessionPair(t, a, b, nil, nil)
	a.Close() // the client's connection dies under it
	select {
	case <-s.CloseChan():
	case <-time.After(5 * time.Second):
		t.Fatal("server did not notice the closed connection")
	}
	if !s.IsClosed() {
		t.Fatal("IsClosed")
	}
}

func TestStreamOpenTimeout(t *testing.T) {
	a, b := testutil.TCPPair(t)
	c, _ := sessionPair(t, a, b, &Config{StreamOpenTimeout: 50 * time.Millisecond}, nil)
	st, err := c.OpenStream(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	st.Write([]byte{1}) // announced, never accepted
	select {
	case <-c.CloseChan():
	case <-time.After(5 * time.Second):
		t.Fatal("unacknowledged stream did not close the session")
	}
}

func TestGoAway(t *testing.T) {
	a, b := testutil.TCPPair(t)
	c, s := sessionPair(t, a, b, nil, nil)
	if err := s.GoAway(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "go away to arrive", func() bool {
		_, err := c.OpenStream(context.Background())
		return errors.Is(err, ErrRemoteGoAway)
	})
}

// TestOpenStreamWaitsForAcks checks that OpenStream waits, under its context, while
// AcceptBacklog announced streams are unacknowledged, and goes on once one is accepted.
func TestOpenStreamWaitsForAcks(t *testing.T) {
	a, b := testutil.TCPPair(t)
	c, s := sessionPair(t, a, b, &Config{AcceptBacklog: 2}, &Config{AcceptBacklog: 10})
	ctx := context.Background()
	for range 2 {
		st, err := c.OpenStream(ctx)
		if err != nil {
			t.Fatal(err)
		}
		st.Write([]byte("x")) // announce it
	}
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if _, err := c.OpenStream(short); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("OpenStream beyond unacknowledged backlog = %v", err)
	}
	// Accepting one acknowledges it (within the lazy delay) and frees a place.
	if _, err := s.AcceptStream(ctx); err != nil {
		t.Fatal(err)
	}
	octx, ocancel := context.WithTimeout(ctx, 5*time.Second)
	defer ocancel()
	if _, err := c.OpenStream(octx); err != nil {
		t.Fatal(err)
	}
	if n := c.NumStreams(); n != 3 {
		t.Fatalf("NumStreams = %d, want 3", n)
	}
}

// TestHostileFrames checks that protocol violations close the session with
// ErrProtocol and nothing else breaks.
func TestHostileFrames(t *testing.T) {
	cases := map[string][]byte{
		"version":  {1, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0},
		"type":     {0, 9, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0},
		"window":   append(hdr(typeData, flagSYN, 1, InitialStreamWindow+1), make([]byte, InitialStreamWindow+1)...),
		"dup":      append(hdr(typeWindowUpdate, flagSYN, 1, 0), hdr(typeWindowUpdate, flagSYN, 1, 0)...),
		"parity":   hdr(typeWindowUpdate, flagSYN, 2, 0),
		"stream 0": hdr(typeData, flagSYN, 0, 0),
		"go-away":  hdr(typeGoAway, 0, 0, goAwayProtocol),
	}
	for name, frames := range cases {
		t.Run(name, func(t *testing.T) {
			a, b := net.Pipe()
			defer b.Close()
			go io.Copy(io.Discard, b)
			s, err := Server(a, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			go b.Write(frames)
			select {
			case <-s.CloseChan():
			case <-time.After(5 * time.Second):
				t.Fatal("session survived a protocol violation")
			}
			_, aerr := s.AcceptStream(context.Background())
			if !errors.Is(aerr, ErrSessionClosed) || !errors.Is(aerr, ErrProtocol) {
				t.Fatalf("AcceptStream = %v, want ErrSessionClosed wrapping ErrProtocol", aerr)
			}
		})
	}
}
