package mux

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"runtime"
	"sync"
	"testing"
	"time"
)

// echo accepts streams on s and echoes each until EOF, then closes it.
func echo(t testing.TB, s *Session) (wait func()) {
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			st, err := s.AcceptStream(context.Background())
			if err != nil {
				return
			}
			wg.Go(func() {
				defer st.Close()
				if _, err := io.Copy(st, st); err != nil && !errors.Is(err, ErrSessionClosed) {
					t.Errorf("echo: %v", err)
				}
				_ = st.CloseWrite()
			})
		}
	})
	return wg.Wait
}

// roundTrip writes msg on a new stream, half-closes, and reads the echo.
func roundTrip(ctx context.Context, s *Session, msg []byte) error {
	st, err := s.OpenStream(ctx)
	if err != nil {
		return err
	}
	defer st.Close()
	errc := make(chan error, 1)
	go func() {
		_, err := st.Write(msg)
		if err == nil {
			err = st.CloseWrite()
		}
		errc <- err
	}()
	got, err := io.ReadAll(st)
	if werr := <-errc; werr != nil {
		return werr
	}
	if err != nil {
		return err
	}
	if !bytes.Equal(got, msg) {
		return fmt.Errorf("echo of %d bytes returned %d bytes", len(msg), len(got))
	}
	return nil
}

func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func TestOpenAcceptMany(t *testing.T) {
	transports(t, func(t *testing.T, newPair func() (net.Conn, net.Conn)) {
		a, b := newPair()
		c, s := sessionPair(t, a, b, nil, nil)
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

func TestHalfClose(t *testing.T) {
	transports(t, func(t *testing.T, newPair func() (net.Conn, net.Conn)) {
		a, b := newPair()
		c, s := sessionPair(t, a, b, nil, nil)
		done := make(chan error, 1)
		go func() {
			st, err := s.AcceptStream(context.Background())
			if err != nil {
				done <- err
				return
			}
			req, err := io.ReadAll(st) // until the client's CloseWrite
			if err == nil {
				_, err = st.Write(append([]byte("re: "), req...))
			}
			if err == nil {
				err = st.Close()
			}
			done <- err
		}()
		st, err := c.OpenStream(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if _, err := st.Write([]byte("question")); err != nil {
			t.Fatal(err)
		}
		if err := st.CloseWrite(); err != nil {
			t.Fatal(err)
		}
		if _, err := st.Write([]byte("more")); !errors.Is(err, ErrStreamClosed) {
			t.Fatalf("write after CloseWrite = %v", err)
		}
		resp, err := io.ReadAll(st)
		if err != nil || string(resp) != "re: question" {
			t.Fatalf("response %q, %v", resp, err)
		}
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		st.Close()
		if _, err := st.Read(make([]byte, 1)); !errors.Is(err, ErrStreamClosed) {
			t.Fatalf("read after Close = %v", err)
		}
		waitFor(t, "streams to be freed", func() bool { return c.NumStreams() == 0 && s.NumStreams() == 0 })
	})
}

func TestMaxStreamsOutbound(t *testing.T) {
	transports(t, func(t *testing.T, newPair func() (net.Conn, net.Conn)) {
		a, b := newPair()
		c, s := sessionPair(t, a, b, &Config{MaxStreams: 4}, nil)
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
		var streams []*Stream
		for range 4 {
			st, err := c.OpenStream(ctx)
			if err != nil {
				t.Fatal(err)
			}
			st.Write([]byte{1}) // announce it
			streams = append(streams, st)
		}
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
	transports(t, func(t *testing.T, newPair func() (net.Conn, net.Conn)) {
		a, b := newPair()
		c, s := sessionPair(t, a, b, nil, &Config{MaxStreams: 3})
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
	a, b := tcpPair(t)
	c, s := sessionPair(t, a, b, nil, &Config{AcceptBacklog: 2})
	ctx := context.Background()
	var streams []*Stream
	for range 4 {
		st, err := c.OpenStream(ctx)
		if err != nil {
			t.Fatal(err)
		}
		st.Write([]byte{1}) // announce it (the refusal of 3 and 4 may already be back)
		streams = append(streams, st)
	}
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
	transports(t, func(t *testing.T, newPair func() (net.Conn, net.Conn)) {
		a, b := newPair()
		small := &Config{MaxStreamWindow: MinStreamWindow}
		c, s := sessionPair(t, a, b, small, small)
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
	a, b := tcpPair(t)
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

func TestKeepAlive(t *testing.T) {
	// A peer that reads everything and never answers: the keepalive closes
	// the session.
	a, b := net.Pipe()
	go io.Copy(io.Discard, b)
	defer b.Close()
	s, err := Server(a, &Config{KeepAliveInterval: 20 * time.Millisecond, ConnectionWriteTimeout: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	select {
	case <-s.CloseChan():
	case <-time.After(5 * time.Second):
		t.Fatal("keepalive did not close the session")
	}
	if _, err := s.AcceptStream(context.Background()); !errors.Is(err, ErrSessionClosed) || !errors.Is(err, ErrKeepAliveTimeout) {
		t.Fatalf("AcceptStream after keepalive failure = %v", err)
	}

	// Two live peers with fast keepalives stay up.
	a2, b2 := tcpPair(t)
	cfg := &Config{KeepAliveInterval: 5 * time.Millisecond, ConnectionWriteTimeout: time.Second}
	c, s2 := sessionPair(t, a2, b2, cfg, cfg)
	time.Sleep(100 * time.Millisecond)
	if c.IsClosed() || s2.IsClosed() {
		t.Fatal("keepalive closed a live session")
	}
}

func TestPingTimeout(t *testing.T) {
	a, b := net.Pipe()
	go io.Copy(io.Discard, b)
	defer b.Close()
	c, err := Client(a, &Config{KeepAliveInterval: -1, ConnectionWriteTimeout: 30 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_, err = c.Ping(context.Background())
	if !errors.Is(err, ErrTimeout) {
		t.Fatalf("Ping = %v, want ErrTimeout", err)
	}
}

func TestStreamOpenTimeout(t *testing.T) {
	a, b := tcpPair(t)
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

func TestReset(t *testing.T) {
	transports(t, func(t *testing.T, newPair func() (net.Conn, net.Conn)) {
		a, b := newPair()
		c, s := sessionPair(t, a, b, nil, nil)
		ctx := context.Background()
		st, err := c.OpenStream(ctx)
		if err != nil {
			t.Fatal(err)
		}
		st.Write([]byte("hi"))
		acc, err := s.AcceptStream(ctx)
		if err != nil {
			t.Fatal(err)
		}
		blocked := make(chan error, 1)
		go func() {
			_, err := st.Read(make([]byte, 1)) // blocked until the reset
			blocked <- err
		}()
		time.Sleep(10 * time.Millisecond)
		if err := st.Reset(); err != nil {
			t.Fatal(err)
		}
		st.Reset() // idempotent
		if err := <-blocked; !errors.Is(err, ErrStreamReset) {
			t.Fatalf("blocked Read after Reset = %v", err)
		}
		if _, err := st.Write([]byte("x")); !errors.Is(err, ErrStreamReset) {
			t.Fatalf("Write after Reset = %v", err)
		}
		acc.SetReadDeadline(time.Now().Add(5 * time.Second))
		buf := make([]byte, 10)
		var rerr error
		for rerr == nil {
			_, rerr = acc.Read(buf)
		}
		if !errors.Is(rerr, ErrStreamReset) {
			t.Fatalf("remote Read after Reset = %v", rerr)
		}
		waitFor(t, "streams to be freed", func() bool { return c.NumStreams() == 0 && s.NumStreams() == 0 })
	})
}

func TestDeadlines(t *testing.T) {
	a, b := net.Pipe()
	c, s := sessionPair(t, a, b, nil, nil)
	st, err := c.OpenStream(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	st.SetReadDeadline(time.Now().Add(20 * time.Millisecond))
	_, err = st.Read(make([]byte, 1))
	var ne net.Error
	if !errors.Is(err, ErrTimeout) || !errors.Is(err, os.ErrDeadlineExceeded) || !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("Read past deadline = %v", err)
	}
	// the stream still works after a timeout
	st.SetDeadline(time.Time{})
	st.Write([]byte("ok"))
	acc, err := s.AcceptStream(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	acc.Write([]byte("!"))
	if _, err := io.ReadFull(st, make([]byte, 1)); err != nil {
		t.Fatal(err)
	}
	// a write blocked on a full window times out
	st.SetWriteDeadline(time.Now().Add(50 * time.Millisecond))
	big := make([]byte, 4<<20)
	if _, err := st.Write(big); !errors.Is(err, ErrTimeout) {
		t.Fatalf("Write past deadline = %v", err)
	}
}

func TestGoAway(t *testing.T) {
	a, b := tcpPair(t)
	c, s := sessionPair(t, a, b, nil, nil)
	if err := s.GoAway(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "go away to arrive", func() bool {
		_, err := c.OpenStream(context.Background())
		return errors.Is(err, ErrRemoteGoAway)
	})
}

// TestLargeTransfer moves 16 MiB each way with unequal windows: the server's
// 4 MiB window lets the client send frames larger than the client's own
// coalescing limit, which then pass through.
func TestLargeTransfer(t *testing.T) {
	a, b := tcpPair(t)
	c, s := sessionPair(t, a, b, &Config{MaxStreamWindow: MinStreamWindow}, &Config{MaxStreamWindow: 4 << 20})
	wait := echo(t, s)
	data := make([]byte, 16<<20)
	rng := rand.NewChaCha8([32]byte{1})
	rng.Read(data)
	st, err := c.OpenStream(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		st.Write(data)
		st.CloseWrite()
	}()
	h := sha256.New()
	n, err := io.Copy(h, st)
	if err != nil || n != int64(len(data)) || !bytes.Equal(h.Sum(nil), sha256Sum(data)) {
		t.Fatalf("echo: %d bytes, %v", n, err)
	}
	st.Close()
	c.Close()
	s.Close()
	wait()
}

func sha256Sum(b []byte) []byte {
	s := sha256.Sum256(b)
	return s[:]
}

// TestOpenStreamWaitsForAcks checks that OpenStream waits, under its context, while
// AcceptBacklog announced streams are unacknowledged, and goes on once one is accepted.
func TestOpenStreamWaitsForAcks(t *testing.T) {
	a, b := tcpPair(t)
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

// TestStreamEOFvsSessionLoss checks that a stream ended by the peer reads
// io.EOF, while a stream cut by the loss of the session reads
// ErrSessionClosed.
func TestStreamEOFvsSessionLoss(t *testing.T) {
	a, b := tcpPair(t)
	c, s := sessionPair(t, a, b, nil, nil)
	ctx := context.Background()
	ended, _ := c.OpenStream(ctx)
	cut, _ := c.OpenStream(ctx)
	ended.Write([]byte("a"))
	cut.Write([]byte("b"))
	sEnded, err := s.AcceptStream(ctx)
	if err != nil {
		t.Fatal(err)
	}
	sCut, err := s.AcceptStream(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ended.CloseWrite()
	if got, err := io.ReadAll(sEnded); err != nil || string(got) != "a" {
		t.Fatalf("ended stream: %q, %v", got, err)
	}
	a.Close() // the connection dies
	got, err := io.ReadAll(sCut)
	if string(got) != "b" || !errors.Is(err, ErrSessionClosed) {
		t.Fatalf("cut stream: %q, %v; want ErrSessionClosed", got, err)
	}
}

// TestPingFlood checks that a peer sending ping requests without reading the
// answers cannot make yamux start a goroutine per ping.
func TestPingFlood(t *testing.T) {
	a, b := net.Pipe()
	s, err := Server(a, &Config{KeepAliveInterval: -1, ConnectionWriteTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	base := runtime.NumGoroutine()
	var flood []byte
	for i := range 2000 {
		flood = append(flood, hdr(typePing, flagSYN, 0, uint32(i))...)
	}
	if _, err := b.Write(flood); err != nil {
		t.Fatal(err)
	}
	time.Sleep(20 * time.Millisecond)
	if g := runtime.NumGoroutine() - base; g > 64+8 {
		t.Fatalf("%d goroutines after a ping flood", g)
	}
	go io.Copy(io.Discard, b) // let the answers drain
	s.Close()
	b.Close()
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
