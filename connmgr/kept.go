package connmgr

import (
	"fmt"
	"time"

	ma "github.com/multiformats/go-multiaddr"

	tendril "github.com/tendril-p2p/tendril"
	"github.com/tendril-p2p/tendril/addrbook"
	"github.com/tendril-p2p/tendril/secio"
)

// maxKeptAddrs bounds the addresses KeepConnected keeps for one peer, as the book bounds
// its own per peer.
const maxKeptAddrs = 16

// keptPeer is a peer the application must not lose.
type keptPeer struct {
	addrs     []ma.Multiaddr
	connected bool // as of the last round
}

// KeepConnected makes peer a kept peer: whenever it has no session, the Manager dials it
// at the given addresses (the first 16; transport multiaddrs, without /p2p/) and at the
// book's, with KeptBackoff between failures, whatever Target and the group caps say.
// Kept peers' sessions count neither against Target nor against their group's cap: the
// application chose them, not the book, so they are no evidence of the diversity the
// target is there to keep, and an application that keeps its three servers still wants
// Target peers of the overlay besides. Calling it again for a kept peer replaces its
// addresses (if any are given) and resets its backoff, as Refresh does.
func (m *Manager) KeepConnected(peer secio.PeerID, addrs ...ma.Multiaddr) error {
	if peer.IsZero() || peer == m.self {
		return fmt.Errorf("%w: %v", ErrInvalidPeer, peer)
	}
	var list []ma.Multiaddr
	for _, a := range addrs {
		if len(list) == maxKeptAddrs {
			break
		}
		if len(a) > 0 && len(a.Bytes()) <= addrbook.MaxAddrSize {
			list = append(list, a)
		}
	}
	st := &m.state
	st.Lock()
	if st.closed {
		st.Unlock()
		return ErrClosed
	}
	kp := st.kept[peer]
	if kp == nil {
		kp = &keptPeer{}
		st.kept[peer] = kp
	}
	if len(list) > 0 {
		kp.addrs = list
	}
	m.refreshLocked(m.cfg.Now(), peer)
	st.Unlock()
	m.wakeUp()
	return nil
}

// Forget makes peer an ordinary peer again; its session, if any, stays.
func (m *Manager) Forget(peer secio.PeerID) {
	m.state.Lock()
	defer m.state.Unlock()
	delete(m.state.kept, peer)
}

// Protect reports whether sess is with a kept peer. Set Admission.Protect to it when
// assembling the Service, so that trimming never closes a kept peer's inbound session.
// It is cheap and takes only the Manager's own lock.
func (m *Manager) Protect(sess *tendril.Session) bool {
	m.state.Lock()
	defer m.state.Unlock()
	return m.state.kept[sess.Peer()] != nil
}

// keptRoundLocked reports kept peers that came or went since the last round, and dials
// those without a session whose address is due; wake is lowered to the next one due.
func (m *Manager) keptRoundLocked(now time.Time, wake *time.Time) {
	st := &m.state
	for p, kp := range st.kept {
		connected := st.conn[p] != nil
		if connected != kp.connected {
			kp.connected = connected
			t := EventKeptLost
			if connected {
				t = EventKeptConnected
			}
			m.emitLocked(Event{Type: t, Time: now, Peer: p, Kept: true})
		}
		if connected || st.dialing[p] != nil {
			continue
		}
		var states map[string]*addrState
		if ps := st.peers.m[p]; ps != nil {
			states = ps.addrs
		}
		ch, at, ok := chooseAddr(now, m.book.Addrs(now, p), kp.addrs, states, m.cfg.KeptBackoff)
		if !ok {
			if !at.IsZero() && at.Before(*wake) {
				*wake = at
			}
			continue
		}
		m.startDialLocked(now, p, ch, true)
	}
}

// Refresh tells the Manager there is news of peer (a newer identify record, addresses
// from peer exchange or mDNS): the growth of its addresses' backoff ends, and each may
// be dialled once Backoff.Base has passed since its last attempt (not sooner, so that
// news a peer can make up at will cannot make this node dial faster than that).
func (m *Manager) Refresh(peer secio.PeerID) {
	m.state.Lock()
	if m.state.closed {
		m.state.Unlock()
		return
	}
	m.refreshLocked(m.cfg.Now(), peer)
	m.state.Unlock()
	m.wakeUp()
}

func (m *Manager) refreshLocked(now time.Time, peer secio.PeerID) {
	st := &m.state
	c := m.backoffFor(st.kept[peer] != nil)
	entries := m.book.Addrs(now, peer)
	ps := st.peers.m[peer]
	// The book's history stands in for addresses the Manager has no state of; take it
	// over so that the reset applies to it too.
	for i := range entries {
		e := &entries[i]
		key := string(e.Addr.Bytes())
		if e.Failures == 0 || (ps != nil && ps.addrs[key] != nil) {
			continue
		}
		if ps == nil {
			if ps = m.peerLocked(peer); ps == nil {
				return
			}
		}
		as := ps.addr(key)
		as.failures, as.last, as.next = e.Failures, e.LastAttempt, readyAt(nil, e, c)
	}
	if ps != nil {
		ps.refresh(c)
	}
}
