package connmgr

// What the Manager remembers per peer, and the bounds on it.

import (
	"time"

	ma "github.com/multiformats/go-multiaddr"

	"github.com/tendril-p2p/tendril/secio"
)

// attemptsKept is how many recent attempts Status reports per peer.
const attemptsKept = 8

// maxAddrStates bounds the addresses remembered per peer: twice the book's default
// addresses per peer, room for a kept peer's own list besides.
const maxAddrStates = 32

// Attempt is one dial of a peer, or a session that ended before it was stable.
type Attempt struct {
	Addr ma.Multiaddr
	// Time is when the attempt ended.
	Time time.Time
	// Err is why it failed; nil for a dial that succeeded.
	Err error
}

// peerState is what the Manager remembers of a peer it dialled or keeps.
type peerState struct {
	addrs map[string]*addrState // by the address's binary form; at most maxAddrStates
	// notBefore is when the first of the peer's addresses becomes ready, as last
	// computed: until then Select skips the peer. Zero: unknown, ask the book.
	notBefore time.Time
	attempts  [attemptsKept]Attempt // a ring; next is the slot to write
	next, n   int
}

func newPeerState() *peerState { return &peerState{addrs: make(map[string]*addrState)} }

// record adds an attempt to the ring.
func (p *peerState) record(a Attempt) {
	p.attempts[p.next] = a
	p.next = (p.next + 1) % attemptsKept
	p.n = min(p.n+1, attemptsKept)
}

// history returns the recorded attempts, oldest first.
func (p *peerState) history() []Attempt {
	out := make([]Attempt, 0, p.n)
	for i := range p.n {
		out = append(out, p.attempts[(p.next-p.n+i+attemptsKept)%attemptsKept])
	}
	return out
}

// addr returns the state of the address with binary form key, made if missing; at the
// bound the address whose wait ends first gives way (it holds the least).
func (p *peerState) addr(key string) *addrState {
	if st := p.addrs[key]; st != nil {
		return st
	}
	if len(p.addrs) >= maxAddrStates {
		var victim string
		var first time.Time
		for k, st := range p.addrs {
			if victim == "" || st.next.Before(first) {
				victim, first = k, st.next
			}
		}
		delete(p.addrs, victim)
	}
	st := &addrState{}
	p.addrs[key] = st
	return st
}

// fail counts a failure of the address at now and returns when it may be dialled next;
// u is the jitter's draw.
func (st *addrState) fail(now time.Time, c BackoffConfig, u float64) time.Time {
	st.failures++
	st.last = now
	st.next = now.Add(Backoff(st.failures, c, u))
	return st.next
}

// refresh forgets the failures of a peer's addresses because there is news of it: the
// growth of the backoff ends, not the base wait, so that news that comes often (a peer
// pushing records) cannot have an address dialled more often than once per Base.
func (p *peerState) refresh(c BackoffConfig) {
	for _, st := range p.addrs {
		st.failures = 0
		if !st.last.IsZero() {
			st.next = minTime(st.next, st.last.Add(c.Base))
		}
	}
	p.notBefore = time.Time{}
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

// peerTable is the per-peer states, at most max of them.
type peerTable struct {
	m   map[secio.PeerID]*peerState
	max int
}

// get returns peer's state, made if missing; at the bound, a state that keep does not
// protect and whose wait ends first gives way. It returns nil only if every state is
// protected.
func (t *peerTable) get(peer secio.PeerID, keep func(secio.PeerID) bool) *peerState {
	if st := t.m[peer]; st != nil {
		return st
	}
	if len(t.m) >= t.max {
		var victim secio.PeerID
		var first time.Time
		found := false
		for p, st := range t.m {
			if keep(p) {
				continue
			}
			if !found || st.notBefore.Before(first) {
				victim, first, found = p, st.notBefore, true
			}
		}
		if !found {
			return nil
		}
		delete(t.m, victim)
	}
	st := newPeerState()
	t.m[peer] = st
	return st
}
