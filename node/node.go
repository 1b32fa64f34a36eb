// Package node assembles a batteries-included tendril node: a Service with identify, an
// address book kept in a file, peer exchange, mDNS on the LAN, a manager that keeps
// outbound sessions up, reachability checks and port mapping (nat.go). It is the one place
// that wires those packages together. Each of them runs on the Service's public API alone
// (Subscribe, AddProtocol, Dial, Sessions), so an application that wants another mix wires
// its own the way this package does.
//
// How information flows: identify hands each peer's signed record to the book (and tells
// the manager that the peer has fresh addresses); peer exchange asks connected peers for
// records and answers with a sample of the book's; mDNS announces this node's record on
// the LAN and hands the records it hears to the book; the manager dials from the book.
// Only signed records are passed on to other peers, and every record is verified against
// its owner's key before its addresses enter the book.
package node

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	ma "github.com/multiformats/go-multiaddr"

	"github.com/tendril-p2p/tendril"
	"github.com/tendril-p2p/tendril/addrbook"
	"github.com/tendril-p2p/tendril/autorelay"
	"github.com/tendril-p2p/tendril/connmgr"
	"github.com/tendril-p2p/tendril/hash/blake3"
	"github.com/tendril-p2p/tendril/holepunch"
	"github.com/tendril-p2p/tendril/identify"
	"github.com/tendril-p2p/tendril/mdns"
	"github.com/tendril-p2p/tendril/peerrecord"
	"github.com/tendril-p2p/tendril/pex"
	"github.com/tendril-p2p/tendril/portmap"
	"github.com/tendril-p2p/tendril/reach"
	"github.com/tendril-p2p/tendril/relay"
	"github.com/tendril-p2p/tendril/secio"
)

// DefaultSaveInterval is how often a Node with a BookFile saves its book.
const DefaultSaveInterval = time.Minute

var (
	// ErrInvalidConfig reports a Config that New refuses.
	ErrInvalidConfig = errors.New("node: invalid config")
	// ErrStarted: Start was called twice.
	ErrStarted = errors.New("node: already started")
	// ErrClosed: the Node is closed.
	ErrClosed = errors.New("node: closed")
)

// Config configures a Node. The zero value is usable: every zero field takes its default.
type Config struct {
	// Service configures the Service. The Node adds its protocols (identify, peer
	// exchange) to it, generates PrivateKey if nil, and sets Admission.Protect (keeping
	// what the application set: a session either protects is kept) so that trimming never
	// closes a peer the manager keeps connected.
	Service tendril.Config

	// Listen lists the addresses to listen on at Start, e.g. /ip4/0.0.0.0/tcp/4001.
	Listen []tendril.Addr

	// Bootstrap lists peers to join through. Those with a peer ID (/p2p/ID) go into the
	// book and are dialled like any other; those without are dialled once at Start, and
	// the peer found there enters the book.
	Bootstrap []tendril.Addr

	// BookFile keeps the address book between runs: loaded by New (a missing file is
	// an empty book; a corrupt one is an error), saved every SaveInterval and at Close,
	// atomically. Empty: the book lives in memory only.
	BookFile string
	// SaveInterval is how often the book is saved. Default DefaultSaveInterval.
	SaveInterval time.Duration
	// Book bounds the address book. Nil: addrbook.DefaultConfig().
	Book *addrbook.Config

	// Agent names the software in identify (identify.Config.Agent).
	Agent string

	// Public reports whether an address is on the public Internet, for identify (which
	// record a peer is sent) and peer exchange (which records a peer is sent, which
	// addresses it may give). Nil: addrbook.IsPublic. A test lab whose "public" hosts use
	// documentation ranges sets its own.
	Public func(ma.Multiaddr) bool

	// Connect configures the manager that keeps outbound sessions up.
	Connect connmgr.Config
	// Exchange configures peer exchange.
	Exchange pex.Config

	// MDNS announces this node on the LAN and finds peers there (multicast DNS). Off by
	// default: a library should not talk to the LAN unless asked.
	MDNS bool
	// MDNSConfig tunes mDNS; its Payload, Port and OnFound are the Node's.
	MDNSConfig mdns.Config

	// Reach configures reachability: connected peers dial this node back to tell, address
	// by address, whether it can be reached, and it does the same for them within reach's
	// limits (only at the asker's own IP, rate-limited). On by default, as a node should
	// know whether it is reachable before it tells anyone where to dial it, and serving
	// costs a bounded trickle of dials; DisableReach turns it off. Its Logger defaults to
	// the Node's; a test lab whose peers share an address group sets Group.
	Reach reach.Config
	// DisableReach turns reachability off: nothing is confirmed, so no mapped or observed
	// address is advertised, and Reachability reports Unknown.
	DisableReach bool

	// PortMap maps the node's IPv4 TCP listen ports on the LAN's NAT gateway (NAT-PMP,
	// then UPnP IGD: package portmap), renews the leases and removes the mappings at
	// Close. Off by default, as in go-libp2p (NATPortMap) and tentacle: opening a port in
	// the user's router is the user's decision, and a library should not talk to the LAN's
	// gateway unless asked. A mapping becomes a reach candidate and is advertised only once
	// dial-backs confirm it (so never with DisableReach).
	PortMap bool
	// PortMapConfig tunes the mappers; its InternalPort, Protocol and OnChange are the
	// Node's, its Logger defaults to the Node's. Its RequestTimeout (default
	// portmap.DefaultRequestTimeout) also bounds the removal of the mappings at Close.
	PortMapConfig portmap.Config

	// Relay serves as a relay for peers behind NATs (package relay: reservations and
	// circuits within RelayConfig's limits). Off by default: relaying spends this node's
	// bandwidth on others' traffic, a choice for the operator of a public node.
	Relay       bool
	RelayConfig relay.RelayConfig

	// DisableAutoRelay turns off what a node behind a NAT needs to be reached: by default,
	// while reach does not find this node public, it holds reservations on up to
	// AutoRelay.MaxRelays connected peers that serve the relay protocol (package
	// autorelay) and advertises the circuit addresses; the connection manager dials
	// peers' circuit addresses through their relays. AutoRelay's Needed and OnChange are
	// the Node's unless set; RelayClient configures the client that holds the
	// reservations and takes the circuits.
	DisableAutoRelay bool
	AutoRelay        autorelay.Config
	RelayClient      relay.ClientConfig

	// DisableHolePunch turns off hole punching (package holepunch), on by default: a
	// relayed session this node accepted is upgraded to a direct one where the NATs allow.
	// HolePunch's Addrs defaults to reach's candidates (none with DisableReach) and its
	// Allow to Public (or holepunch's default, public IPs only).
	DisableHolePunch bool
	HolePunch        holepunch.Config

	// Logger receives the Node's logs and is passed on to the parts. Nil: silent.
	Logger *slog.Logger
}

// Node is a Service with identify, an address book, peer exchange, mDNS, a connection
// manager, reachability and port mapping wired together.
type Node struct {
	cfg  Config
	svc  *tendril.Service
	key  *secio.PrivateKey
	book *addrbook.Book
	id   *identify.Identify
	pex  *pex.PEX
	conn *connmgr.Manager
	log  *slog.Logger

	// manager is conn, published for Admission.Protect, which the Service may call before
	// New has finished.
	manager atomic.Pointer[connmgr.Manager]

	nat  natState  // reachability and port mapping: nat.go
	trav traversal // relay, autorelay, hole punching: traverse.go

	mu         sync.Mutex // guards mdns, mdnsRecord, started, closed
	mdns       *mdns.Service
	mdnsRecord *peerrecord.Record // the record mdns announces
	started    bool
	closed     bool

	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// New builds a Node: its Service, book and protocols. It starts nothing: call Start.
func New(cfg Config) (*Node, error) {
	if cfg.SaveInterval < 0 {
		return nil, fmt.Errorf("%w: negative SaveInterval", ErrInvalidConfig)
	}
	if cfg.SaveInterval == 0 {
		cfg.SaveInterval = DefaultSaveInterval
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	key := cfg.Service.PrivateKey
	if key == nil {
		var err error
		if key, err = secio.GenerateKey(); err != nil {
			return nil, fmt.Errorf("node: generating identity: %w", err)
		}
	}
	n := &Node{cfg: cfg, key: key, log: log}

	book, err := addrbook.New(cfg.Book, bookKey(key))
	if err != nil {
		return nil, err
	}
	n.book = book
	// Loaded before the manager starts, whose first round then dials from it at once.
	if cfg.BookFile != "" {
		loaded, err := book.LoadFile(cfg.BookFile, time.Now())
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("node: loading the address book: %w", err)
		}
		log.Info("address book loaded", "file", cfg.BookFile, "addrs", loaded)
	}

	scfg := cfg.Service
	scfg.PrivateKey = key
	if scfg.Logger == nil {
		scfg.Logger = cfg.Logger
	}
	appProtect := scfg.Admission.Protect
	scfg.Admission.Protect = func(s *tendril.Session) bool {
		if m := n.manager.Load(); m != nil && m.Protect(s) {
			return true
		}
		return appProtect != nil && appProtect(s)
	}
	if n.svc, err = tendril.New(scfg); err != nil {
		return nil, err
	}
	n.id, err = identify.New(n.svc, identify.Config{
		PrivateKey: key,
		Agent:      cfg.Agent,
		Public:     cfg.Public,
		Addrs:      n.advertised,
		OnIdentify: n.identified,
		Logger:     cfg.Logger,
	})
	if err != nil {
		n.svc.Close()
		return nil, err
	}
	ccfg := cfg.Connect
	if ccfg.Logger == nil {
		ccfg.Logger = cfg.Logger
	}
	if ccfg.Dial == nil {
		ccfg.Dial = n.dial
	}
	if n.conn, err = connmgr.New(n.svc, book, ccfg); err != nil {
		n.id.Close()
		n.svc.Close()
		return nil, err
	}
	n.manager.Store(n.conn)
	xcfg := cfg.Exchange
	if xcfg.Public == nil {
		xcfg.Public = cfg.Public
	}
	if xcfg.Logger == nil {
		xcfg.Logger = cfg.Logger
	}
	if n.pex, err = pex.New(n.svc, book, xcfg); err != nil {
		n.conn.Close()
		n.id.Close()
		n.svc.Close()
		return nil, err
	}
	if err := n.newNAT(); err != nil {
		n.pex.Close()
		n.conn.Close()
		n.id.Close()
		n.svc.Close()
		return nil, err
	}
	if err := n.newTraversal(); err != nil {
		n.closeNAT()
		n.pex.Close()
		n.conn.Close()
		n.id.Close()
		n.svc.Close()
		return nil, err
	}
	return n, nil
}

// bookKey derives the address book's bucket secret from the node's identity key: secret
// from peers, and the same across restarts, so a reloaded book keeps its entries' places.
func bookKey(key *secio.PrivateKey) [32]byte {
	seed, _ := key.MarshalBinary()
	var k [32]byte
	blake3.DeriveKey(k[:], "tendril node addrbook bucket key v1", seed)
	return k
}

// Start listens, joins the bootstrap peers, starts mDNS (if enabled) and
// the background work. Bootstrap dials that fail are logged, not returned: the manager
// retries peers from the book.
func (n *Node) Start(ctx context.Context) error {
	n.mu.Lock()
	if n.closed {
		n.mu.Unlock()
		return ErrClosed
	}
	if n.started {
		n.mu.Unlock()
		return ErrStarted
	}
	n.started = true
	n.mu.Unlock()
	for _, a := range n.cfg.Listen {
		if _, err := n.svc.Listen(ctx, a); err != nil {
			return err
		}
	}
	n.id.Update() // the listen addresses are in the record before anyone asks
	if n.cfg.MDNS {
		if err := n.startMDNS(ctx); err != nil {
			return err
		}
	}
	bg, cancel := context.WithCancel(context.Background())
	n.cancel = cancel
	if err := n.startNAT(bg); err != nil {
		return err
	}
	n.bootstrap(bg)
	n.wg.Add(1)
	go n.maintain(bg)
	return nil
}

// bootstrap puts the bootstrap peers with an ID into the book and dials the others once.
func (n *Node) bootstrap(ctx context.Context) {
	now := time.Now()
	for _, a := range n.cfg.Bootstrap {
		if !a.Peer.IsZero() {
			n.book.Add(now, a.Peer, []ma.Multiaddr{a.Transport}, addrbook.Source{Kind: addrbook.SourceBootstrap})
			n.conn.Refresh(a.Peer)
			continue
		}
		n.wg.Add(1)
		go func() {
			defer n.wg.Done()
			dctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			defer cancel()
			s, err := n.svc.Dial(dctx, a)
			if err != nil {
				n.log.Warn("bootstrap dial failed", "addr", a, "err", err)
				return
			}
			n.book.Add(time.Now(), s.Peer(), []ma.Multiaddr{a.Transport}, addrbook.Source{Kind: addrbook.SourceBootstrap})
			n.book.Good(time.Now(), s.Peer(), a.Transport)
		}()
	}
}

// identified takes a peer's verified record from identify into the book.
func (n *Node) identified(info identify.Info) {
	if info.Record == nil {
		return
	}
	n.addRecord(info.Record, addrbook.Source{Kind: addrbook.SourceIdentify})
}

// addRecord puts a verified record's addresses into the book, less this node's own, and
// tells the manager the peer has fresh addresses.
func (n *Node) addRecord(rec *peerrecord.Record, src addrbook.Source) {
	if rec.Peer() == n.svc.ID() {
		return
	}
	own := n.ownAddrs()
	addrs := make([]ma.Multiaddr, 0, len(rec.Addrs()))
	for _, a := range rec.Addrs() {
		if !containsAddr(own, a) {
			addrs = append(addrs, a)
		}
	}
	// New addresses, or a newer record (the book then forgets the failures of the
	// addresses it lists), are news the manager acts on at once.
	newer := rec.Supersedes(n.book.Record(rec.Peer()))
	if n.book.AddRecordAddrs(time.Now(), rec, addrs, src) > 0 || newer {
		n.conn.Refresh(rec.Peer())
	}
}

func (n *Node) ownAddrs() []ma.Multiaddr {
	if r := n.id.Record(); r != nil {
		return r.Addrs()
	}
	return nil
}

func containsAddr(list []ma.Multiaddr, a ma.Multiaddr) bool {
	for _, b := range list {
		if b.Equal(a) {
			return true
		}
	}
	return false
}

// maintain saves the book on its interval and keeps mDNS's payload on this node's latest
// record, until Close.
func (n *Node) maintain(ctx context.Context) {
	defer n.wg.Done()
	save := time.NewTicker(n.cfg.SaveInterval)
	defer save.Stop()
	recheck := time.NewTicker(time.Second)
	defer recheck.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-save.C:
			n.saveBook()
		case <-recheck.C:
			n.refreshMDNS()
		}
	}
}

func (n *Node) saveBook() {
	if n.cfg.BookFile == "" {
		return
	}
	if err := n.book.SaveFile(n.cfg.BookFile, time.Now()); err != nil {
		n.log.Warn("saving the address book", "file", n.cfg.BookFile, "err", err)
	}
}

// Close stops the background work and mDNS, saves the book and closes the Service.
func (n *Node) Close() error {
	n.mu.Lock()
	if n.closed {
		n.mu.Unlock()
		return nil
	}
	n.closed = true
	m := n.mdns
	n.mu.Unlock()
	if n.cancel != nil {
		n.cancel()
	}
	if m != nil {
		m.Close()
	}
	n.closeTraversal()
	n.closeNAT()
	n.pex.Close()
	n.conn.Close()
	n.id.Close()
	err := n.svc.Close()
	n.wg.Wait()
	n.saveBook()
	return err
}

// Service returns the node's Service: register protocols, send, read Events on it.
func (n *Node) Service() *tendril.Service { return n.svc }

// Book returns the address book.
func (n *Node) Book() *addrbook.Book { return n.book }

// Identify returns the node's identify protocol: what connected peers said.
func (n *Node) Identify() *identify.Identify { return n.id }

// Manager returns the connection manager: KeepConnected, Status.
func (n *Node) Manager() *connmgr.Manager { return n.conn }

// Exchange returns the peer exchange.
func (n *Node) Exchange() *pex.PEX { return n.pex }

// ID returns the node's peer ID.
func (n *Node) ID() secio.PeerID { return n.svc.ID() }
