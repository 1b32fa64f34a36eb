package memory

import (
	"fmt"
	"sync"
)

// NetworkConfig configures a Network. The zero value is an unshaped network with the
// default backlog.
type NetworkConfig struct {
	// Link shapes every direction between two hosts (a host and itself included) that
	// SetLink or SetLinkOneWay has not set.
	Link Link

	// Backlog is how many dialled connections a listener holds before they are accepted;
	// beyond it, dials are refused (ErrRefused), so that no dialer makes a listener hold
	// connections without bound. 0 means DefaultBacklog.
	Backlog int
}

// DefaultBacklog is the Backlog of a NetworkConfig that sets none, Linux's default
// somaxconn before 5.4.
const DefaultBacklog = 128

// firstAuto is the first number picked for /memory/0 listeners and for the local ends
// of dialled connections: below it, numbers are only ever those a caller asked for, so
// that tests naming small numbers never collide with picked ones (the IANA dynamic port
// range starts there too).
const firstAuto = 49152

// Network is a set of hosts (Transports) that can reach one another, and the links
// between them. Each Network is a world of its own: its numbers mean nothing in another,
// so tests running in parallel do not meet. Its methods may be called concurrently.
type Network struct {
	backlog int

	mu        sync.Mutex
	dflt      Link
	listeners map[uint64]*Listener
	used      map[uint64]bool // numbers taken: listeners', and dialled connections' local ends
	next      uint64          // the next number to try picking
	paths     map[hostPair]*path
}

// hostPair is one direction between two hosts.
type hostPair struct{ from, to *Transport }

// NewNetwork returns an empty network. It panics if cfg is invalid (a negative field).
func NewNetwork(cfg NetworkConfig) *Network {
	if err := cfg.Link.check(); err != nil {
		panic(err)
	}
	if cfg.Backlog < 0 {
		panic(fmt.Sprintf("memory: negative Backlog %d", cfg.Backlog))
	}
	if cfg.Backlog == 0 {
		cfg.Backlog = DefaultBacklog
	}
	return &Network{
		backlog:   cfg.Backlog,
		dflt:      cfg.Link,
		listeners: make(map[uint64]*Listener),
		used:      make(map[uint64]bool),
		next:      firstAuto,
		paths:     make(map[hostPair]*path),
	}
}

// NewTransport adds a host to the network and returns its transport.
func (n *Network) NewTransport() *Transport {
	return &Transport{net: n}
}

// SetLink shapes both directions between hosts a and b (a and b may be the same host,
// for its connections to itself) with l, in place of the network's default. It applies to
// connections already open too: their bytes written from now on take the new Delay and
// Rate (never overtaking bytes written before); Buffer applies to connections dialled
// from now on. It panics if l is invalid (a negative field), or if a or b belongs to
// another network.
func (n *Network) SetLink(a, b *Transport, l Link) {
	n.SetLinkOneWay(a, b, l)
	n.SetLinkOneWay(b, a, l)
}

// SetLinkOneWay is SetLink for the direction from one host to another only, for
// asymmetric links (a slow uplink, a longer route one way).
func (n *Network) SetLinkOneWay(from, to *Transport, l Link) {
	if err := l.check(); err != nil {
		panic(err)
	}
	if from.net != n || to.net != n {
		panic("memory: SetLink with a transport of another network")
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if p, ok := n.paths[hostPair{from, to}]; ok {
		p.link.Store(&l)
		return
	}
	n.paths[hostPair{from, to}] = newPath(l)
}

// pathLocked returns the path from one host to another, made with the default link the
// first time.
func (n *Network) pathLocked(from, to *Transport) *path {
	p, ok := n.paths[hostPair{from, to}]
	if !ok {
		p = newPath(n.dflt)
		n.paths[hostPair{from, to}] = p
	}
	return p
}

// pickLocked returns a free number, from firstAuto up; numbers are not reused until the
// count wraps, so a dial to a stale address never reaches a newer listener.
func (n *Network) pickLocked() uint64 {
	for {
		k := n.next
		n.next++
		if n.next == 0 {
			n.next = firstAuto
		}
		if k != 0 && !n.used[k] {
			return k
		}
	}
}

// release frees a number.
func (n *Network) release(k uint64) {
	n.mu.Lock()
	delete(n.used, k)
	delete(n.listeners, k)
	n.mu.Unlock()
}
