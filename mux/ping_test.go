package mux

import (
	"context"
	"errors"
	"io"
	"net"
	"runtime"
	"testing"
	"time"

	"github.com/tendril-p2p/tendril/internal/testutil"
)

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
	a2, b2 := testutil.TCPPair(t)
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
