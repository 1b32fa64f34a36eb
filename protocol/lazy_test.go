package protocol

import (
	"context"
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"github.com/tendril-p2p/tendril/internal/testutil"
)

func lazyRegistry(t *testing.T) *Registry {
	t.Helper()
	reg := NewRegistry()
	if err := reg.Register(Info{Name: "/echo", Versions: []string{"1.0"}}); err != nil {
		t.Fatal(err)
	}
	return reg
}

// TestNegotiateLazyEcho: the request and the first data leave in one Write, and the first
// Read returns the acceptor's data after its answer.
func TestNegotiateLazyEcho(t *testing.T) {
	overBuffered(t, func(t *testing.T, a, b net.Conn) {
		reg := lazyRegistry(t)
		done := make(chan error, 1)
		go func() {
			_, _, err := Accept(context.Background(), b, reg)
			if err == nil {
				buf := make([]byte, 5)
				if _, err = io.ReadFull(b, buf); err == nil {
					_, err = b.Write(buf)
				}
			}
			done <- err
		}()
		wc := &writeCounter{Conn: a}
		lc, err := NegotiateLazy(wc, "/echo", "1", time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if lc.Version() != "1" {
			t.Fatalf("Version = %q", lc.Version())
		}
		if _, err := lc.Write([]byte("hello")); err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, 5)
		if _, err := io.ReadFull(lc, buf); err != nil || string(buf) != "hello" {
			t.Fatalf("read %q, %v", buf, err)
		}
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if len(wc.writes) != 1 {
			t.Fatalf("%d writes, want the request and the data in one", len(wc.writes))
		}
	})
}

// TestNegotiateLazyRefused: a refusal is the first Read's error, and every later call's.
func TestNegotiateLazyRefused(t *testing.T) {
	overBuffered(t, func(t *testing.T, a, b net.Conn) {
		reg := lazyRegistry(t)
		go func() {
			Accept(context.Background(), b, reg)
			io.Copy(io.Discard, b) // what the opener wrote behind the request
		}()
		lc, err := NegotiateLazy(a, "/nope", "1", time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := lc.Write([]byte("data")); err != nil {
			t.Fatal(err)
		}
		_, err = lc.Read(make([]byte, 1))
		var refused *RefusedError
		if !errors.As(err, &refused) || !errors.Is(err, ErrUnknownProtocol) {
			t.Fatalf("Read = %v, want a refusal matching ErrUnknownProtocol", err)
		}
		if _, err := lc.Write([]byte("more")); !errors.Is(err, ErrUnknownProtocol) {
			t.Fatalf("Write after refusal = %v", err)
		}
	})
}

// TestNegotiateLazyReadFirst: when the acceptor speaks first, the opener's Read sends the
// request.
func TestNegotiateLazyReadFirst(t *testing.T) {
	transports(t, func(t *testing.T, a, b net.Conn) {
		reg := lazyRegistry(t)
		go func() {
			if _, _, err := Accept(context.Background(), b, reg); err == nil {
				b.Write([]byte("hi"))
			}
		}()
		lc, err := NegotiateLazy(a, "/echo", "1.0", time.Second)
		if err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, 2)
		if _, err := io.ReadFull(lc, buf); err != nil || string(buf) != "hi" {
			t.Fatalf("read %q, %v", buf, err)
		}
	})
}

// TestNegotiateLazyTimeout: an acceptor that never answers costs the first Read the
// timeout, as ErrNegotiationTimeout; the caller's own deadline is back afterwards.
func TestNegotiateLazyTimeout(t *testing.T) {
	a, b := testutil.TCPPair(t)
	defer a.Close()
	defer b.Close()
	go io.Copy(io.Discard, b)
	lc, err := NegotiateLazy(a, "/echo", "1", 50*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if _, err := lc.Read(make([]byte, 1)); !errors.Is(err, ErrNegotiationTimeout) {
		t.Fatalf("Read = %v, want ErrNegotiationTimeout", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("timeout took %v", d)
	}
}

// TestNegotiateLazyInvalid: names and versions are checked up front.
func TestNegotiateLazyInvalid(t *testing.T) {
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	if _, err := NegotiateLazy(a, "no-slash", "1", 0); !errors.Is(err, ErrInvalidName) {
		t.Errorf("bad name: %v", err)
	}
	if _, err := NegotiateLazy(a, "/x", "v1", 0); !errors.Is(err, ErrInvalidVersion) {
		t.Errorf("bad version: %v", err)
	}
}
