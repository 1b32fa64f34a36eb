package connmgr

import (
	"errors"
	"time"

	tendril "github.com/tendril-p2p/tendril"
	"github.com/tendril-p2p/tendril/secio"
)

// finish records how a dial ended. A session is a success, whichever connection the
// duplicate-session rule kept; a refusal by the outbound admission share is the
// Service's, not the address's, and grows no backoff; a dial cancelled by Close counts
// for nothing; any other error is one more failure of the address, here and in the book.
func (m *Manager) finish(peer secio.PeerID, d *dialInfo, sess *tendril.Session, err error) {
	now := m.cfg.Now()
	st := &m.state
	st.Lock()
	defer st.Unlock()
	delete(st.dialing, peer)
	if st.closed || m.ctx.Err() != nil || errors.Is(err, tendril.ErrServiceClosed) {
		return
	}
	ps := m.peerLocked(peer) // nil when full of states that must stay: the book's history then stands in
	ev := Event{Time: now, Peer: peer, Addr: d.addr, Kept: d.kept, Err: err}
	switch {
	case err == nil:
		prior := 0
		if ps != nil {
			if as := ps.addrs[d.key]; as != nil {
				prior = as.failures
				delete(ps.addrs, d.key)
			}
			ps.notBefore = time.Time{}
			ps.record(Attempt{Addr: d.addr, Time: now})
		}
		// Dial may return the peer's own connection (the duplicate rule kept it, or it
		// arrived first): the peer is connected, but that session proves nothing of
		// the address, and its end is the peer's business.
		if sess.Direction() == tendril.Outbound && sess.RemoteAddr().Transport.Equal(d.addr) {
			m.book.Good(now, peer, d.addr)
			st.tracked[sess.ID()] = &tracked{
				sess: sess, peer: peer, addr: d.addr, key: d.key,
				prior: prior, opened: now, kept: d.kept,
			}
		}
		ev.Type = EventDialSucceeded
		if kp := st.kept[peer]; kp != nil && !kp.connected {
			// Said here, not at the next round, so that the event follows the dial.
			kp.connected = true
			defer m.emitLocked(Event{Type: EventKeptConnected, Time: now, Peer: peer, Kept: true})
		}
	case errors.Is(err, tendril.ErrConnectionLimit):
		st.limitedAt = now
		if ps != nil {
			ps.record(Attempt{Addr: d.addr, Time: now, Err: err})
		}
		ev.Type = EventDialFailed
	default:
		if ps != nil {
			ev.NextTry = ps.addr(d.key).fail(now, m.backoffFor(d.kept), st.rng.Float64())
			ps.notBefore = time.Time{}
			ps.record(Attempt{Addr: d.addr, Time: now, Err: err})
		}
		m.book.Failed(now, peer, d.addr, err)
		ev.Type = EventDialFailed
		m.log.Debug("dial failed", "peer", peer, "addr", d.addr, "err", err, "next", ev.NextTry)
	}
	m.emitLocked(ev)
}
