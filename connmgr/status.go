package connmgr

import (
	"fmt"
	"time"

	ma "github.com/multiformats/go-multiaddr"

	tendril "github.com/tendril-p2p/tendril"
	"github.com/tendril-p2p/tendril/addrbook"
	"github.com/tendril-p2p/tendril/secio"
)

// Status answers "why am I not connected to this peer".
type Status struct {
	Peer secio.PeerID
	// Connected reports a session with the peer, of Direction, open since Since.
	Connected bool
	Direction tendril.Direction
	Since     time.Time
	// Kept reports that the application keeps the peer (KeepConnected).
	Kept bool
	// Dialing is the address being dialled, nil if none.
	Dialing ma.Multiaddr
	// Addrs are the peer's addresses the Manager would dial: the book's, best first,
	// then a kept peer's own.
	Addrs []AddrStatus
	// Attempts are the last dials of the peer (at most 8), oldest first, with sessions
	// that ended before they were stable.
	Attempts []Attempt
	// NextTry is when the first of its addresses may be dialled: zero if one may be now.
	NextTry time.Time
	// Reason says in a few words what holds the peer back now, e.g. "backing off until
	// 10:04:05", "no address in the book", "outbound slots full (8/8)", "group
	// ip4:1.2.0.0/16 at its cap (2 outbound)".
	Reason string
}

// AddrStatus is what the Manager knows of one address of a peer.
type AddrStatus struct {
	Addr  ma.Multiaddr
	Group addrbook.Group
	// Failures counts failed dials in a row, as the backoff counts them.
	Failures int
	// NextTry is when it may be dialled; zero if now.
	NextTry time.Time
	// LastError is the book's record of its last failure.
	LastError string
}

// Status returns what the Manager knows of peer and why it is not connected.
func (m *Manager) Status(peer secio.PeerID) Status {
	now := m.cfg.Now()
	sess := m.svc.Session(peer)
	entries := m.book.Addrs(now, peer)
	// Whether the book would offer the peer at all: it stops offering addresses that
	// failed too often, by rules of its own. One Select over the book answers it.
	offered := len(m.book.Select(now, 1, func(p secio.PeerID) bool { return p != peer })) > 0
	st := &m.state
	st.Lock()
	defer st.Unlock()
	s := Status{Peer: peer}
	if sess != nil {
		s.Connected, s.Direction, s.Since = true, sess.Direction(), sess.OpenedAt()
	}
	kp := st.kept[peer]
	s.Kept = kp != nil
	if d := st.dialing[peer]; d != nil {
		s.Dialing = d.addr
	}
	var states map[string]*addrState
	ps := st.peers.m[peer]
	if ps != nil {
		states = ps.addrs
		s.Attempts = ps.history()
	}
	c := m.backoffFor(s.Kept)
	var extra []ma.Multiaddr
	if kp != nil {
		extra = kp.addrs
	}
	for i := range entries {
		e := &entries[i]
		as := AddrStatus{Addr: e.Addr, Group: e.Group, Failures: e.Failures, LastError: e.LastError}
		if a := states[string(e.Addr.Bytes())]; a != nil {
			as.Failures = a.failures
		}
		if r := readyAt(states[string(e.Addr.Bytes())], e, c); r.After(now) {
			as.NextTry = r
		}
		s.Addrs = append(s.Addrs, as)
	}
	for _, a := range extra {
		if inEntries(entries, a) {
			continue
		}
		as := AddrStatus{Addr: a, Group: addrbook.GroupOf(a)}
		if st := states[string(a.Bytes())]; st != nil {
			as.Failures = st.failures
			if st.next.After(now) {
				as.NextTry = st.next
			}
		}
		s.Addrs = append(s.Addrs, as)
	}
	ch, at, ready := chooseAddr(now, entries, extra, states, c)
	if !ready {
		s.NextTry = at
	}
	s.Reason = m.reasonLocked(now, peer, s, ch, ready, offered)
	return s
}

func inEntries(entries []addrbook.Entry, a ma.Multiaddr) bool {
	for _, e := range entries {
		if e.Addr.Equal(a) {
			return true
		}
	}
	return false
}

// reasonLocked says what holds peer back, in the order a round decides.
func (m *Manager) reasonLocked(now time.Time, peer secio.PeerID, s Status, ch choice, ready, offered bool) string {
	st := &m.state
	switch {
	case st.closed:
		return "the manager is closed"
	case s.Connected:
		return fmt.Sprintf("connected (%s)", s.Direction)
	case s.Dialing != nil:
		return "dialling " + s.Dialing.String()
	case peer == m.self:
		return "this node"
	case len(s.Addrs) == 0 && s.Kept:
		return "kept, but no address: none given to KeepConnected and none in the book"
	case len(s.Addrs) == 0:
		return "no address in the book"
	case !s.Kept && !offered:
		return "the book no longer offers it: its addresses failed too often"
	case !ready:
		return fmt.Sprintf("backing off until %s", s.NextTry.Format(time.RFC3339Nano))
	case s.Kept:
		return "kept: due for a redial"
	}
	if why := st.slots.refuse(ch.group); why != "" {
		return why
	}
	if !st.limitedAt.IsZero() && now.Sub(st.limitedAt) < m.cfg.Interval {
		return "the Service's outbound admission share is full (Admission.MaxOutbound)"
	}
	return "eligible: waits to be drawn (dials are spread across groups)"
}
