// Package addrbook is a tendril node's address book: which addresses each known peer may
// be reached at, who said so, and how dialling them went. It is bounded by construction,
// on the model of Bitcoin Core's address manager: addresses never connected to live in a
// "new" table and those that worked in a "tried" table, each a fixed array of buckets of
// slots, and an address's bucket is chosen by a keyed hash of its group and of its
// source's group (see Group), so that one attacker's addresses land in few buckets and
// cannot fill the book, however many it sends.
//
// A Book is decision logic only: no goroutines, no network, no clock of its own. Every
// method that needs the time takes it as an argument, so its rules are tested on a fixed
// clock. The protocols that feed it (identify, peer exchange, mDNS) and the dialler that
// reads it live elsewhere, above the root package.
package addrbook

import (
	"cmp"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	ma "github.com/multiformats/go-multiaddr"

	"github.com/tendril-p2p/tendril/hash/blake3"
	"github.com/tendril-p2p/tendril/secio"
)

// maxErrorLen bounds the text of the last error kept per address.
const maxErrorLen = 200

// entry is one address of one peer. It is in exactly one table slot (pos) while in the
// book.
type entry struct {
	peer  secio.PeerID
	addr  ma.Multiaddr
	key   string // the address's binary form: its identity in the tables
	group Group
	src   Source

	firstSeen, lastSeen      time.Time
	lastAttempt, lastSuccess time.Time
	failures                 int // in a row, since the last success
	lastErr                  string
	tried                    bool
	pos                      int // index in the new or tried table
}

// Entry is what the book knows of one address of a peer.
type Entry struct {
	Peer secio.PeerID
	// Addr is the transport address, without /p2p/.
	Addr  ma.Multiaddr
	Group Group
	// Source is who told the book first, or the most trusted teller since.
	Source Source
	// FirstSeen and LastSeen are when the book was first and last told of the address.
	FirstSeen, LastSeen time.Time
	// LastAttempt and LastSuccess are when a dial last started and last succeeded; zero
	// if never.
	LastAttempt, LastSuccess time.Time
	// Failures counts the failed attempts since the last success; LastError is the last
	// one's message, cut to 200 bytes.
	Failures  int
	LastError string
	// Tried reports whether the address is in the tried table: a session succeeded at it.
	Tried bool
	// Expires is when the book forgets the address unless it hears of it or connects to
	// it again.
	Expires time.Time
}

// Book is an address book. Its methods are safe for concurrent use.
type Book struct {
	cfg  Config
	hash hasher

	mu     sync.Mutex
	rng    *rand.Rand
	peers  map[secio.PeerID][]*entry
	newT   table
	triedT table
	n      int // entries in the book
	// records holds the latest signed record of peers in the book (never of a peer
	// without an entry: drop forgets it with the peer's last address).
	records map[secio.PeerID]*heldRecord
}

// New returns an empty book with the bounds of cfg (nil means DefaultConfig, and zero
// fields take their defaults). key is the bucket secret: it must be random and unknown to
// peers, or they can aim their addresses at chosen buckets. A node that keeps one key
// across restarts keeps its entries' positions; any key reads a saved book.
func New(cfg *Config, key [32]byte) (*Book, error) {
	var c Config
	if cfg != nil {
		if err := cfg.Validate(); err != nil {
			return nil, err
		}
		c = *cfg
	}
	c = c.withDefaults()
	// The selection order comes from the key too, so a test with a fixed key is
	// reproducible and peers learn nothing of the key from it.
	var seed [32]byte
	blake3.DeriveKey(seed[:], "tendril addrbook selection", key[:])
	return &Book{
		cfg:     c,
		hash:    newHasher(key),
		rng:     rand.New(rand.NewChaCha8(seed)),
		peers:   make(map[secio.PeerID][]*entry),
		records: make(map[secio.PeerID]*heldRecord),
		newT:    newTable(c.NewBuckets, c.NewSlots),
		triedT:  newTable(c.TriedBuckets, c.TriedSlots),
	}, nil
}

// Config returns the book's bounds, defaults filled in.
func (b *Book) Config() Config { return b.cfg }

// Len returns the number of addresses in the book, and of peers they belong to.
func (b *Book) Len() (addrs, peers int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.n, len(b.peers)
}

// find returns peer's entry for the address with binary form key, or nil.
func (b *Book) find(peer secio.PeerID, key string) *entry {
	for _, e := range b.peers[peer] {
		if e.key == key {
			return e
		}
	}
	return nil
}

// Add tells the book that peer may be reached at addrs, according to src, and returns
// how many of them were new to the book. An address already known is refreshed (its last
// seen time, and its source if src is more trusted). A new address is refused when its
// new-table slot holds a live entry (refusing rather than replacing is what stops a
// flood: newcomers fill free slots and dead ones, never push out what the book holds), when peer already has MaxAddrsPerPeer addresses
// none of which is worse and no more trusted, or when the book is at MaxPeers and peer is
// not in it (unless the slot holds the worthless last address of another peer); addresses longer than MaxAddrSize, empty ones and a zero peer are ignored.
func (b *Book) Add(now time.Time, peer secio.PeerID, addrs []ma.Multiaddr, src Source) (added int) {
	if peer.IsZero() || src.Kind < SourcePeer || src.Kind > SourceIdentify {
		return 0
	}
	if src.Kind != SourcePeer {
		src.Via = ""
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, a := range addrs {
		if b.add(now, peer, a, src) {
			added++
		}
	}
	return added
}

func (b *Book) add(now time.Time, peer secio.PeerID, a ma.Multiaddr, src Source) bool {
	if len(a) == 0 {
		return false
	}
	bin := a.Bytes()
	if len(bin) > MaxAddrSize {
		return false
	}
	key := string(bin)
	if e := b.find(peer, key); e != nil {
		if now.After(e.lastSeen) {
			e.lastSeen = now
		}
		// The position stays where the first source put it: moving would let a
		// trusted re-announcement displace others.
		if src.Kind > e.src.Kind {
			e.src = src
		}
		return false
	}
	e := &entry{
		peer: peer, addr: a, key: key, group: GroupOf(a), src: src,
		firstSeen: now, lastSeen: now, pos: -1,
	}
	pos := b.newPos(e)
	occ := b.newT.slots[pos]
	list := b.peers[peer]
	// At MaxPeers a new peer gets in only in place of a peer that leaves: one whose
	// last address is the worthless entry in the slot. Otherwise peers a flood made
	// up would, once at the cap, keep out every real one until they expire.
	if list == nil && len(b.peers) >= b.cfg.MaxPeers &&
		(occ == nil || len(b.peers[occ.peer]) > 1 || !b.terrible(now, occ)) {
		return false
	}
	var victim *entry
	if len(list) >= b.cfg.MaxAddrsPerPeer {
		victim = b.worstOf(now, list)
		if !b.terrible(now, victim) && (victim.tried || victim.src.Kind > src.Kind) {
			return false
		}
	}
	// Check the slot before giving up the victim, so that a refused address costs the
	// peer nothing.
	if occ != nil && occ != victim && !b.terrible(now, occ) {
		return false
	}
	if victim != nil {
		b.drop(victim)
	}
	if occ := b.newT.slots[pos]; occ != nil {
		b.drop(occ)
	}
	b.newT.slots[pos] = e
	e.pos = pos
	b.peers[peer] = append(b.peers[peer], e)
	b.n++
	return true
}

// worstOf returns the entry of list most worth giving up.
func (b *Book) worstOf(now time.Time, list []*entry) *entry {
	w := list[0]
	for _, e := range list[1:] {
		if b.worse(now, e, w) {
			w = e
		}
	}
	return w
}

// Attempt records that a dial to peer at addr starts now.
func (b *Book) Attempt(now time.Time, peer secio.PeerID, addr ma.Multiaddr) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if e := b.find(peer, string(addr.Bytes())); e != nil {
		e.lastAttempt = now
	}
}

// Failed records that a dial to peer at addr failed with err: one more failure in a row.
// An address that fails MaxFailuresNew times before it ever worked, or MaxFailuresTried
// times after, is worthless (no longer selected or shared, first to give way).
func (b *Book) Failed(now time.Time, peer secio.PeerID, addr ma.Multiaddr, err error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	e := b.find(peer, string(addr.Bytes()))
	if e == nil {
		return
	}
	e.lastAttempt = later(e.lastAttempt, now)
	e.failures++
	e.lastErr = ""
	if err != nil {
		e.lastErr = truncate(err.Error(), maxErrorLen)
	}
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n]
}

// Good records that a session with peer at addr succeeded now: the failures are
// forgotten and the address moves to the tried table (unless its tried slot holds an
// entry that still works; see the package's tables). It reports whether the book knows
// the address; add it first (SourceObserved or better) to record a success at an address
// the book did not know.
func (b *Book) Good(now time.Time, peer secio.PeerID, addr ma.Multiaddr) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	e := b.find(peer, string(addr.Bytes()))
	if e == nil {
		return false
	}
	e.lastAttempt = later(e.lastAttempt, now)
	e.lastSuccess = later(e.lastSuccess, now)
	e.lastSeen = later(e.lastSeen, now)
	e.failures, e.lastErr = 0, ""
	if !e.tried {
		b.promote(now, e)
	}
	return true
}

// Addrs returns what the book knows of peer's addresses that have not expired, best
// first (tried, fewest failures, latest success or news), including worthless ones so
// that a caller can say why a peer is not dialled.
func (b *Book) Addrs(now time.Time, peer secio.PeerID) []Entry {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []*entry
	for _, e := range b.peers[peer] {
		if now.Before(b.expires(e)) {
			out = append(out, e)
		}
	}
	slices.SortStableFunc(out, func(x, y *entry) int { return b.compare(now, x, y) })
	res := make([]Entry, len(out))
	for i, e := range out {
		res[i] = b.export(e)
	}
	return res
}

// compare orders entries best first: tried, then not worse.
func (b *Book) compare(now time.Time, x, y *entry) int {
	if x.tried != y.tried {
		if x.tried {
			return -1
		}
		return 1
	}
	switch {
	case b.worse(now, x, y):
		return 1
	case b.worse(now, y, x):
		return -1
	}
	return cmp.Compare(x.key, y.key)
}

func (b *Book) export(e *entry) Entry {
	return Entry{
		Peer: e.peer, Addr: e.addr, Group: e.group, Source: e.src,
		FirstSeen: e.firstSeen, LastSeen: e.lastSeen,
		LastAttempt: e.lastAttempt, LastSuccess: e.lastSuccess,
		Failures: e.failures, LastError: e.lastErr, Tried: e.tried,
		Expires: b.expires(e),
	}
}

// Remove forgets peer and all its addresses.
func (b *Book) Remove(peer secio.PeerID) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, e := range slices.Clone(b.peers[peer]) {
		b.drop(e)
	}
}

// Expire forgets every address that has expired by now and returns how many. The book
// stays within its bounds without it (expired entries give way to newcomers); calling
// it now and then frees their memory sooner.
func (b *Book) Expire(now time.Time) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := 0
	for _, t := range []*table{&b.newT, &b.triedT} {
		for _, e := range t.slots {
			if e != nil && !now.Before(b.expires(e)) {
				b.drop(e)
				n++
			}
		}
	}
	return n
}

// String summarises the book for logs: addresses, peers, tried addresses.
func (b *Book) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	tried := 0
	for _, e := range b.triedT.slots {
		if e != nil {
			tried++
		}
	}
	return fmt.Sprintf("addrbook: %d addresses (%d tried) of %d peers", b.n, tried, len(b.peers))
}
