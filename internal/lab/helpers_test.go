//go:build linux

package lab

import (
	"context"
	"io"
	"net"
	"os"
	"sync"
	"testing"
	"time"
)

// startChild runs the test binary as the child program mode (see runChild) on h.
func startChild(ctx context.Context, t *testing.T, h *Host, mode, arg string) *Process {
	t.Helper()
	return h.StartEnv(ctx, []string{childEnv + "=" + mode, childArg + "=" + arg}, os.Args[0])
}

// listen opens a TCP listener inside h's namespace, closed when the test ends.
func listen(t *testing.T, h *Host, addr string) net.Listener {
	t.Helper()
	var ln net.Listener
	var err error
	if derr := h.Do(func() { ln, err = net.Listen("tcp", addr) }); derr != nil {
		t.Fatal(derr)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	return ln
}

// dial connects from inside h's namespace.
func dial(ctx context.Context, h *Host, addr string) (net.Conn, error) {
	var c net.Conn
	var err error
	if derr := h.Do(func() { c, err = (&net.Dialer{}).DialContext(ctx, "tcp", addr) }); derr != nil {
		return nil, derr
	}
	return c, err
}

// echoOnce writes msg on c and requires it back.
func echoOnce(t *testing.T, c net.Conn, msg string) {
	t.Helper()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(c, msg); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, len(msg))
	if _, err := io.ReadFull(c, buf); err != nil {
		t.Fatal(err)
	}
	if string(buf) != msg {
		t.Fatalf("echo: got %q, want %q", buf, msg)
	}
}

// serveEcho echoes every connection ln accepts until ln closes, and then closes them
// all, so that none waits for a peer whose lab is gone; the returned channel reports
// each connection's remote address.
func serveEcho(ln net.Listener) <-chan net.Addr {
	from := make(chan net.Addr, 16)
	go func() {
		var mu sync.Mutex // guards conns
		conns := map[net.Conn]bool{}
		defer func() {
			mu.Lock()
			defer mu.Unlock()
			for c := range conns {
				c.Close()
			}
		}()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			select {
			case from <- c.RemoteAddr():
			default:
			}
			mu.Lock()
			conns[c] = true
			mu.Unlock()
			go func() {
				defer func() {
					mu.Lock()
					delete(conns, c)
					mu.Unlock()
					c.Close()
				}()
				_, _ = io.Copy(c, c)
			}()
		}
	}()
	return from
}

func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}
