package mux

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/tendril-p2p/tendril/internal/testutil"
	"github.com/tendril-p2p/tendril/secio"
)

// secioPair returns the two ends of a secure connection over loopback TCP: the mux reads
// its input from them a record at a time (records.go). maxFrame, if not zero, is the
// largest record either side sends.
func secioPair(t testing.TB, maxFrame int) (*secio.Conn, *secio.Conn) {
	t.Helper()
	a, b := testutil.TCPPair(t)
	ka, err := secio.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	kb, err := secio.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	type result struct {
		c   *secio.Conn
		err error
	}
	ch := make(chan result, 1)
	go func() {
		c, err := secio.Server(ctx, b, &secio.Config{PrivateKey: kb, MaxFrameSize: maxFrame})
		ch <- result{c, err}
	}()
	ca, err := secio.Client(ctx, a, &secio.Config{PrivateKey: ka, MaxFrameSize: maxFrame})
	r := <-ch
	if err != nil || r.err != nil {
		t.Fatalf("secio handshake: %v, %v", err, r.err)
	}
	t.Cleanup(func() {
		ca.Close()
		r.c.Close()
	})
	return ca, r.c
}

// recordPair is secioPair with the default frame size, as net.Conns.
func recordPair(t testing.TB) (net.Conn, net.Conn) {
	a, b := secioPair(t, 0)
	return a, b
}
