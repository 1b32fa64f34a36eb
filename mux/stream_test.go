package mux

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"testing"
	"time"

	"github.com/tendril-p2p/tendril/internal/testutil"
)

func TestHalfClose(t *testing.T) {
	sessionPairs(t, nil, nil, func(t *testing.T, c, s *Session) {
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

func TestReset(t *testing.T) {
	sessionPairs(t, nil, nil, func(t *testing.T, c, s *Session) {
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

// TestStreamEOFvsSessionLoss checks that a stream ended by the peer reads
// io.EOF, while a stream cut by the loss of the session reads
// ErrSessionClosed.
func TestStreamEOFvsSessionLoss(t *testing.T) {
	a, b := testutil.TCPPair(t)
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

// TestLargeTransfer moves 16 MiB each way with unequal windows: the server's
// 4 MiB window lets the client send frames larger than the client's own
// coalescing limit, which then pass through.
func TestLargeTransfer(t *testing.T) {
	a, b := testutil.TCPPair(t)
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
