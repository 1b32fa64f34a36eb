package memory

import (
	"context"
	"net"
	"sync"

	ma "github.com/multiformats/go-multiaddr"

	"github.com/tendril-p2p/tendril/transport"
)

// Listener accepts the connections dialled to its number. Dials wait in a backlog of
// NetworkConfig.Backlog connections until accepted; beyond it they are refused. It is a
// net.Listener too, for code that serves one.
type Listener struct {
	host *Transport
	addr Addr

	mu      sync.Mutex // orders enqueue against Close, so no connection is left queued
	closed  bool
	backlog chan *Conn
	done    chan struct{} // closed by Close
}

var (
	_ transport.Listener = (*Listener)(nil)
	_ net.Listener       = (*Listener)(nil)
)

func newListener(host *Transport, addr Addr, backlog int) *Listener {
	return &Listener{
		host:    host,
		addr:    addr,
		backlog: make(chan *Conn, backlog),
		done:    make(chan struct{}),
	}
}

// enqueue hands a dialled connection to Accept; false if the listener is closed or its
// backlog is full.
func (l *Listener) enqueue(c *Conn) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return false
	}
	select {
	case l.backlog <- c:
		return true
	default:
		return false
	}
}

// Accept returns the next dialled connection, waiting for one. After Close it returns an
// error wrapping net.ErrClosed.
func (l *Listener) Accept() (net.Conn, error) {
	select {
	case <-l.done:
		return nil, l.closedError()
	default:
	}
	select {
	case c := <-l.backlog:
		return c, nil
	case <-l.done:
		return nil, l.closedError()
	}
}

func (l *Listener) closedError() error {
	return &net.OpError{Op: "accept", Net: "memory", Addr: l.addr, Err: net.ErrClosed}
}

// Upgrade returns c: nothing comes before the handshake on a memory connection.
func (l *Listener) Upgrade(_ context.Context, c net.Conn) (net.Conn, error) { return c, nil }

// Multiaddr returns /memory/N.
func (l *Listener) Multiaddr() ma.Multiaddr { return l.addr.Multiaddr() }

// Addr returns the listener's address, as net.Listener does.
func (l *Listener) Addr() net.Addr { return l.addr }

// Close frees the number, so that dials to it are refused, and makes Accept return an
// error. Connections still in the backlog are closed (their dialers read io.EOF);
// accepted ones are not. Closing again returns an error wrapping net.ErrClosed.
func (l *Listener) Close() error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return &net.OpError{Op: "close", Net: "memory", Addr: l.addr, Err: net.ErrClosed}
	}
	l.closed = true
	close(l.done)
	l.mu.Unlock()
	l.host.net.release(uint64(l.addr))
	for {
		select {
		case c := <-l.backlog:
			c.Close()
		default:
			return nil
		}
	}
}
