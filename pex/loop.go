package pex

import (
	"math/rand/v2"
	"slices"
	"time"

	"github.com/tendril-p2p/tendril"
	"github.com/tendril-p2p/tendril/secio"
)

// run is the asking loop: it asks each outbound session's peer once when the session
// opens, and a random connected peer every so often (nextAskDelay: often while the book
// is small, backing off while it is not), at most
// MaxAsksInFlight at once. It ends when the PEX closes or the Service does.
func (p *PEX) run() {
	defer p.wg.Done()
	var (
		inFlight int
		done     = make(chan struct{}, p.cfg.MaxAsksInFlight)
		pending  []secio.PeerID // outbound peers waiting for a slot, oldest first
		delay    = p.cfg.FirstAsk
		timer    = time.NewTimer(delay)
	)
	defer timer.Stop()
	start := func(sess *tendril.Session) {
		inFlight++
		p.wg.Go(func() {
			defer func() { done <- struct{}{} }()
			if _, err := p.Ask(p.ctx, sess); err != nil {
				p.log.Debug("pex: ask failed", "peer", sess.Peer(), "err", err)
			}
		})
	}
	drain := func() {
		for inFlight < p.cfg.MaxAsksInFlight && len(pending) > 0 {
			peer := pending[0]
			pending = pending[1:]
			if sess := p.svc.Session(peer); sess != nil {
				start(sess)
			}
		}
	}
	for {
		select {
		case <-p.ctx.Done():
			return
		case <-done:
			inFlight--
			drain()
		case ev, ok := <-p.sub.C():
			if !ok {
				return // the Service closed
			}
			if ev.Type != tendril.EventSessionOpened || ev.Direction != tendril.Outbound || ev.Peer.IsZero() {
				continue
			}
			if !slices.Contains(pending, ev.Peer) && len(pending) < pendingAsks {
				pending = append(pending, ev.Peer)
			}
			drain()
		case <-timer.C:
			_, peers := p.book.Len()
			if inFlight < p.cfg.MaxAsksInFlight {
				if sess := p.pick(); sess != nil {
					start(sess)
				}
			}
			delay = nextAskDelay(peers, p.cfg.WantPeers, delay, p.cfg.AskInterval, p.cfg.MaxAskInterval)
			timer.Reset(delay)
		}
	}
}

// pick returns a random connected peer's session to ask, an outbound one if there is
// any (peers this node chose are harder for an attacker to be), or nil.
func (p *PEX) pick() *tendril.Session {
	var out, in []*tendril.Session
	for _, s := range p.svc.Sessions() {
		if s.Peer().IsZero() || !s.Secure() {
			continue
		}
		if s.Direction() == tendril.Outbound {
			out = append(out, s)
		} else {
			in = append(in, s)
		}
	}
	if len(out) == 0 {
		out = in
	}
	if len(out) == 0 {
		return nil
	}
	return out[rand.IntN(len(out))]
}
