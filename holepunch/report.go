package holepunch

import (
	"errors"
	"fmt"
	"strconv"
	"syscall"
	"time"

	ma "github.com/multiformats/go-multiaddr"

	"github.com/tendril-p2p/tendril"
	"github.com/tendril-p2p/tendril/secio"
)

// Role is a side of a hole punch.
type Role uint8

const (
	// RoleInitiator: this node accepted the relayed session and started the punch; it is
	// the dialer of the direct session's handshake.
	RoleInitiator Role = iota + 1
	// RoleResponder: the other end asked; this node answered.
	RoleResponder
)

func (r Role) String() string {
	switch r {
	case RoleInitiator:
		return "initiator"
	case RoleResponder:
		return "responder"
	}
	return "none"
}

// PeerReport is what is known of the hole punches with one peer.
type PeerReport struct {
	Peer       secio.PeerID
	Connection string        // "direct", "punched" (direct, by a punch) or "relayed"; "" without a session
	Role       Role          // this node's side in the last punch
	Attempts   int           // attempts made in the last punch
	Punched    bool          // the last punch worked
	Took       time.Duration // from the relayed session's start to the direct session, if Punched
	RelayedRTT time.Duration // the relayed round trip the initiator measured
	Err        error         // why the last attempt failed; nil if it worked
	At         time.Time     // when the last attempt ended
}

// String is one line: how the peer is connected and, when a punch failed, why.
func (r PeerReport) String() string {
	s := r.Connection
	if s == "" {
		s = "not connected"
	}
	if r.Attempts == 0 {
		return s
	}
	s += fmt.Sprintf(" (%s, %d attempt", r.Role, r.Attempts)
	if r.Attempts > 1 {
		s += "s"
	}
	if r.Punched && r.Took > 0 {
		s += ", direct after " + r.Took.Round(time.Millisecond).String()
	}
	s += ")"
	if r.Err != nil && !r.Punched {
		s += ": " + r.Err.Error()
	}
	return s
}

// Report returns a report for each peer this node has a session with and has punched or
// been asked to punch.
func (p *Puncher) Report() []PeerReport {
	p.mu.Lock()
	out := make([]PeerReport, 0, len(p.reports))
	for _, r := range p.reports {
		out = append(out, *r)
	}
	p.mu.Unlock()
	for i := range out {
		out[i].Connection = p.connection(out[i])
	}
	return out
}

// PeerReport returns the report of one peer: ok false if this node has no session with it.
// A peer never punched has a report with its connection only.
func (p *Puncher) PeerReport(peer secio.PeerID) (PeerReport, bool) {
	if p.svc.Session(peer) == nil {
		return PeerReport{}, false
	}
	p.mu.Lock()
	r := PeerReport{Peer: peer}
	if got := p.reports[peer]; got != nil {
		r = *got
	}
	p.mu.Unlock()
	r.Connection = p.connection(r)
	return r, true
}

func (p *Puncher) connection(r PeerReport) string {
	s := p.svc.Session(r.Peer)
	switch {
	case s == nil:
		return ""
	case s.Relayed():
		return "relayed"
	case r.Punched:
		return "punched"
	}
	return "direct"
}

// Stats counts what a Puncher did.
type Stats struct {
	Attempts uint64 // attempts this node initiated
	Punched  uint64 // punches it initiated that ended in a direct session
	Failed   uint64 // punches it initiated that ended relayed after every attempt
	Served   uint64 // attempts it answered
	Refused  uint64 // requests it refused: not relayed, over the limits, busy
	Dials    uint64 // connection attempts it made, in both roles
}

// Stats returns the counters.
func (p *Puncher) Stats() Stats {
	return Stats{
		Attempts: p.stats.attempts.Load(),
		Punched:  p.stats.punched.Load(),
		Failed:   p.stats.failed.Load(),
		Served:   p.stats.served.Load(),
		Refused:  p.stats.refused.Load(),
		Dials:    p.stats.dials.Load(),
	}
}

// rewritesPorts reports whether this node's NAT changes the ports of its connections: a
// majority of the peers on allowed (public) addresses that this node dialled directly
// observe it at another port than its connection's own. Such a NAT (a symmetric one, or
// one that does not keep ports) maps the listen port to a port nobody can predict, and
// a punch to the listen port fails.
func (p *Puncher) rewritesPorts() bool {
	kept, changed := 0, 0
	for _, s := range p.svc.Sessions() {
		if s.Relayed() || s.Direction() != tendril.Outbound {
			continue
		}
		info, ok := p.id.Info(s.Peer())
		if !ok || info.Observed == nil || !p.cfg.Allow(s.RemoteAddr().Transport) {
			continue
		}
		local, lok := tcpPort(s.LocalAddr().Transport)
		seen, sok := tcpPort(info.Observed)
		if !lok || !sok {
			continue
		}
		if local == seen {
			kept++
		} else {
			changed++
		}
	}
	return changed > kept
}

func tcpPort(a ma.Multiaddr) (uint16, bool) {
	if len(a) < 2 || a[1].Protocol().Code != ma.P_TCP {
		return 0, false
	}
	n, err := strconv.ParseUint(a[1].Value(), 10, 16)
	return uint16(n), err == nil
}

// explain adds to a failed attempt's error what the two ends know of their NATs.
func explain(err error, ownRewrites, theirsRewrite bool) error {
	switch {
	case err == nil || errors.Is(err, ErrClosed):
		return err
	case ownRewrites && theirsRewrite:
		return fmt.Errorf("%w; both ends' NATs change ports (symmetric NATs): staying relayed", err)
	case ownRewrites:
		return fmt.Errorf("%w; this node's NAT changes ports (a symmetric NAT): staying relayed", err)
	case theirsRewrite:
		return fmt.Errorf("%w; the peer's NAT changes ports (a symmetric NAT): staying relayed", err)
	}
	return err
}

func isRefused(err error) bool { return errors.Is(err, syscall.ECONNREFUSED) }
