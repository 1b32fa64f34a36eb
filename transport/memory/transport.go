package memory

import (
	"context"
	"fmt"
	"net"
	"time"

	ma "github.com/multiformats/go-multiaddr"

	"github.com/tendril-p2p/tendril/transport"
)

// Transport is one host of a Network: it dials the network's listeners and listens on
// /memory/N. Its zero value is not usable; Network.NewTransport makes one.
type Transport struct {
	net *Network
}

var _ transport.Transport = (*Transport)(nil)

// Handles reports whether addr is exactly /memory/N.
func (t *Transport) Handles(addr ma.Multiaddr) bool {
	_, ok := parse(addr)
	return ok
}

// Dial connects to the listener on addr (/memory/N). Like a TCP connect, it takes a
// round trip (the Delay of the links both ways) and fails then with ErrRefused if
// nobody listens on addr any more or the listener's backlog is full; a dial to a number
// nobody listens on fails at once. The connection's local end gets a number of its own,
// as a TCP connection gets an ephemeral port. ctx bounds the round trip.
func (t *Transport) Dial(ctx context.Context, addr ma.Multiaddr) (net.Conn, error) {
	k, ok := parse(addr)
	if !ok {
		return nil, fmt.Errorf("%w: %s is not a /memory/N address", transport.ErrUnsupported, addr)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	n := t.net
	n.mu.Lock()
	l := n.listeners[k]
	if l == nil {
		n.mu.Unlock()
		return nil, fmt.Errorf("%w: dial %s", ErrRefused, Addr(k))
	}
	out, in := n.pathLocked(t, l.host), n.pathLocked(l.host, t)
	n.mu.Unlock()

	if rtt := out.link.Load().Delay + in.link.Load().Delay; rtt > 0 {
		timer := time.NewTimer(rtt)
		select {
		case <-timer.C:
		case <-ctx.Done():
			timer.Stop()
			return nil, ctx.Err()
		}
	}

	n.mu.Lock()
	local := n.pickLocked()
	n.used[local] = true
	n.mu.Unlock()
	dialer, acceptor := newConnPair(Addr(local), Addr(k), out, in)
	dialer.release = func() { n.release(local) }
	if !l.enqueue(acceptor) {
		dialer.Close()
		acceptor.Close()
		return nil, fmt.Errorf("%w: dial %s", ErrRefused, Addr(k))
	}
	return dialer, nil
}

// Listen binds addr (/memory/N; /memory/0 picks a free number). ctx is only checked:
// binding does not wait. opts do not apply (no proxy sits in front of a memory listener).
func (t *Transport) Listen(ctx context.Context, addr ma.Multiaddr, _ transport.ListenOptions) (transport.Listener, error) {
	k, ok := parse(addr)
	if !ok {
		return nil, fmt.Errorf("%w: %s is not a /memory/N address", transport.ErrUnsupported, addr)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	n := t.net
	n.mu.Lock()
	defer n.mu.Unlock()
	if k == 0 {
		k = n.pickLocked()
	} else if n.used[k] {
		return nil, fmt.Errorf("%w: listen %s", ErrAddrInUse, Addr(k))
	}
	l := newListener(t, Addr(k), n.backlog)
	n.used[k] = true
	n.listeners[k] = l
	return l, nil
}
