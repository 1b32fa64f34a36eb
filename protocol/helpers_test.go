package protocol

import (
	"context"
	"errors"
	"net"
	"sync"
	"testing"

	"github.com/tendril-p2p/tendril/internal/testutil/pairs"
)

// The helpers of the package's tests: connection pairs, a concurrent Accept, a Write
// recorder and the check of a refusal.

// transports runs f over each of pairs.All: net.Pipe, loopback TCP, WebSocket and
// the in-memory transport.
func transports(t *testing.T, f func(t *testing.T, a, b net.Conn)) {
	for _, p := range pairs.All {
		t.Run(p.Name, func(t *testing.T) { overPair(t, p.New, f) })
	}
}

func overPair(t *testing.T, pair func(testing.TB) (net.Conn, net.Conn), f func(t *testing.T, a, b net.Conn)) {
	a, b := pair(t)
	defer a.Close()
	defer b.Close()
	f(t, a, b)
}

// acceptResult is what an Accept returned.
type acceptResult struct {
	info    Info
	version string
	err     error
}

// goAccept runs Accept on conn in a goroutine and delivers its result.
func goAccept(ctx context.Context, conn net.Conn, reg *Registry) <-chan acceptResult {
	ch := make(chan acceptResult, 1)
	go func() {
		info, v, err := Accept(ctx, conn, reg)
		ch <- acceptResult{info, v, err}
	}()
	return ch
}

// writeCounter keeps a copy of every Write made to a conn.
type writeCounter struct {
	net.Conn
	mu     sync.Mutex
	writes [][]byte
}

func (c *writeCounter) Write(p []byte) (int, error) {
	c.mu.Lock()
	c.writes = append(c.writes, append([]byte(nil), p...))
	c.mu.Unlock()
	return c.Conn.Write(p)
}

// overBuffered runs f over each buffered transport (all of pairs.All but net.Pipe). The
// lazy tests need one: the opener's first Write and the acceptor's answer cross, which an
// unbuffered net.Pipe cannot carry.
func overBuffered(t *testing.T, f func(t *testing.T, a, b net.Conn)) {
	for _, p := range pairs.All {
		if p.Name != "pipe" {
			t.Run(p.Name, func(t *testing.T) { overPair(t, p.New, f) })
		}
	}
}

// wantRefused fails the test unless err is a *RefusedError with code and, where reason is
// not empty, that reason.
func wantRefused(t *testing.T, err error, code RefusalCode, reason string) {
	t.Helper()
	var re *RefusedError
	if !errors.As(err, &re) || re.Code != code || reason != "" && re.Reason != reason {
		t.Fatalf("Negotiate error = %#v, want a refusal with code %v and reason %q", err, code, reason)
	}
}
