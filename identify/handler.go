package identify

import (
	"bytes"
	"fmt"
	"time"

	"github.com/tendril-p2p/tendril"
	"github.com/tendril-p2p/tendril/addrbook"
	"github.com/tendril-p2p/tendril/peerrecord"
)

// handler is identify's tendril.Handler. Its calls for one session are sequential.
type handler struct{ i *Identify }

// Connected sends this node's current state on the new stream, or closes the stream at once if
// the session's earlier identify stream was closed for an error.
func (h handler) Connected(c *tendril.Context, _ string) {
	i := h.i
	sess := c.Session()
	i.mu.Lock()
	if i.closed {
		i.mu.Unlock()
		c.Close()
		return
	}
	p := i.peers[sess]
	if p == nil {
		i.sweepLocked()
		p = &peer{group: addrbook.GroupOf(sess.RemoteAddr().Transport)}
		i.peers[sess] = p
	}
	p.c = c
	if p.err != nil {
		i.mu.Unlock()
		c.Close()
		return
	}
	i.mu.Unlock()
	// The first message carries the state of now, not of the last push: a listener
	// started a moment ago is in it.
	if i.refresh(time.Now()) {
		i.Update() // and the other peers get it too
	}
	i.mu.Lock()
	p.push.Allow(time.Now(), i.pushRate)
	p.sentGen = i.local.gen
	msg := i.messageLocked(sess)
	i.mu.Unlock()
	i.send(sess, c, msg)
}

// Received takes an update: it is checked against the session's rate before anything
// else, then parsed, then its record verified unless it is the record accepted last.
func (h handler) Received(c *tendril.Context, msg []byte) {
	i := h.i
	sess := c.Session()
	i.stats.received.Add(1)
	now := time.Now()
	i.mu.Lock()
	p := i.peers[sess]
	if p == nil || p.c != c || p.err != nil {
		i.mu.Unlock()
		i.stats.ignored.Add(1)
		return
	}
	if !p.recv.Allow(now, i.recvRate) {
		p.dropped++
		i.stats.dropped.Add(1)
		if p.dropped > i.cfg.MaxDropped {
			i.failLocked(sess, p, fmt.Errorf("%w: %d updates over the rate", ErrFlood, p.dropped))
			return
		}
		i.mu.Unlock()
		return
	}
	i.mu.Unlock()

	info, err := i.check(sess, p, msg, now)
	if err != nil {
		i.mu.Lock()
		if p.c == c && p.err == nil {
			i.failLocked(sess, p, err)
			return
		}
		i.mu.Unlock()
		return
	}
	if info.Record == nil { // stale
		return
	}
	i.mu.Lock()
	if p.c != c || p.err != nil || i.closed {
		i.mu.Unlock()
		return
	}
	p.info, p.lastRaw = info, info.Record.Bytes()
	i.mu.Unlock()
	i.stats.accepted.Add(1)
	if i.cfg.OnIdentify != nil {
		i.cfg.OnIdentify(info)
	}
}

// check parses msg and verifies its record. A zero Info without error means the update
// is stale and ignored. Only the session's handler goroutine writes p.info and p.lastRaw,
// which is this one, so it reads them without the lock.
func (i *Identify) check(sess *tendril.Session, p *peer, msg []byte, now time.Time) (Info, error) {
	m, err := parseMessage(msg)
	if err != nil {
		return Info{}, err
	}
	rec := p.info.Record
	if rec == nil || !bytes.Equal(m.record, p.lastRaw) {
		i.stats.verified.Add(1)
		next, err := peerrecord.Parse(m.record)
		if err != nil {
			return Info{}, fmt.Errorf("%w: %w", ErrBadRecord, err)
		}
		if !next.Key().Equal(sess.PublicKey()) {
			return Info{}, fmt.Errorf("%w: record of %s on the session with %s", ErrWrongPeer, next.Peer(), sess.Peer())
		}
		if !next.Supersedes(rec) {
			i.stats.stale.Add(1)
			return Info{}, nil
		}
		rec = next
	}
	return Info{
		Peer:      sess.Peer(),
		Record:    rec,
		Observed:  m.observed,
		Protocols: m.protocols,
		Agent:     m.agent,
		At:        now,
	}, nil
}

// failLocked closes the peer's identify stream for err and reports it. It is called with
// i.mu held and releases it. What the peer had said is dropped with its stream; its
// allowance and error stay until the session ends.
func (i *Identify) failLocked(sess *tendril.Session, p *peer, err error) {
	p.err = err
	p.info, p.lastRaw = Info{}, nil
	c := p.c
	i.mu.Unlock()
	i.stats.rejected.Add(1)
	c.Close()
	i.cfg.Logger.Info("identify: closed a peer's stream", "peer", sess.Peer(), "err", err)
	if i.cfg.OnError != nil {
		i.cfg.OnError(sess.Peer(), err)
	}
}

// Disconnected forgets the stream, and the peer with it unless its stream was closed for
// an error (sweepLocked removes that entry once the session has ended).
func (h handler) Disconnected(c *tendril.Context) {
	i := h.i
	sess := c.Session()
	i.mu.Lock()
	defer i.mu.Unlock()
	p := i.peers[sess]
	if p == nil || p.c != c {
		return
	}
	p.c = nil
	if p.err == nil {
		delete(i.peers, sess)
	}
}

// sweepLocked removes the entries of sessions that have ended. i.mu must be held.
func (i *Identify) sweepLocked() {
	for sess := range i.peers {
		select {
		case <-sess.Done():
			delete(i.peers, sess)
		default:
		}
	}
}
