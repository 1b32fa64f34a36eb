package reach

import (
	"context"
	"errors"
	"time"

	ma "github.com/multiformats/go-multiaddr"
	"github.com/tendril-p2p/tendril"
	"github.com/tendril-p2p/tendril/addrbook"
	"github.com/tendril-p2p/tendril/protocol"
)

// Polling: identify tells nothing when a peer's observation arrives, so after anything
// changed (a session, a candidate added, an answer) the loop looks again after pollBusy,
// and then at waits that double up to pollIdle while looking finds nothing to do. Rechecks
// are due only every RecheckInterval, so pollIdle is ample for them.
const (
	pollBusy = 100 * time.Millisecond
	pollIdle = 5 * time.Second
)

// run is the client's loop: it follows the candidates and the sessions, and asks peers.
func (r *Reach) run() {
	defer r.wg.Done()
	t := time.NewTimer(0)
	defer t.Stop()
	events := r.sub.C()
	wait := pollBusy
	for {
		timer := false
		select {
		case <-r.ctx.Done():
			return
		case _, ok := <-events:
			if !ok {
				events = nil // the Service closed; Close ends the loop
			}
		case <-r.kick:
		case <-t.C:
			timer = true
		}
		switch active := r.step(r.now()); {
		case active || !timer:
			wait = pollBusy
		default:
			wait = min(2*wait, pollIdle)
		}
		t.Reset(wait)
	}
}

// step refreshes the candidates and asks the servers that can tell something new. It
// reports whether it did anything: asked, or found the candidates changed.
func (r *Reach) step(now time.Time) bool {
	var listen []ma.Multiaddr
	for _, a := range r.svc.Addrs() {
		listen = append(listen, a.Transport)
	}
	observed := r.id.ObservedAddrs()
	sessions := r.svc.Sessions()

	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return false
	}
	evs, changed := r.refreshLocked(candidates(observed, listen, r.mapped, r.cfg.MaxAddrs), now)
	var asks []ask
	for _, sess := range sessions {
		if a, ok := r.planLocked(sess, now); ok {
			asks = append(asks, a)
		}
	}
	for id, s := range r.servers { // forget the pace of peers gone (bounded by the sessions)
		if !s.inFlight && r.svc.Session(id) == nil {
			delete(r.servers, id)
		}
	}
	r.wg.Add(len(asks))
	r.mu.Unlock()
	r.emit(evs)
	for _, a := range asks {
		go r.ask(a)
	}
	return changed || len(asks) > 0
}

// refreshLocked makes the tracked addresses those of cands, keeping what is known of
// those that stay; it returns the events of those removed, and whether the set changed.
func (r *Reach) refreshLocked(cands []candidate, now time.Time) ([]Event, bool) {
	changed := len(cands) != len(r.addrs)
	old := r.addrs
	r.addrs = make([]*addrState, 0, len(cands))
	for _, c := range cands {
		var st *addrState
		for i, a := range old {
			if a != nil && a.addr.Equal(c.addr) {
				st, old[i] = a, nil
				break
			}
		}
		if st == nil {
			changed = true
			ip, _ := ipOf(c.addr)
			st = &addrState{ip: ip.String(), results: make(map[addrbook.Group]result), pending: make(map[addrbook.Group]struct{})}
		}
		st.candidate = c
		r.addrs = append(r.addrs, st)
	}
	var evs []Event
	for _, a := range old {
		if a != nil && a.state != Unknown {
			evs = append(evs, Event{Addr: a.addr, Prev: a.state, State: Unknown, Removed: true, Time: now})
		}
	}
	return append(evs, r.overallLocked(now)...), changed
}

// ask is one request to send: to sess, in group, about addrs.
type ask struct {
	sess   *tendril.Session
	group  addrbook.Group
	addrs  []ma.Multiaddr
	epochs []uint64 // of each address when asked
}

// planLocked picks what to ask the peer of sess, if anything: the candidates at the IP
// it observes this node at (it may dial back only there) that need its group's answer,
// at most MaxCandidates, if it is not being asked already and its pace allows. It marks
// the group pending for those addresses.
func (r *Reach) planLocked(sess *tendril.Session, now time.Time) (ask, bool) {
	if !sess.Secure() {
		return ask{}, false
	}
	peer := sess.Peer()
	srv := r.servers[peer]
	if srv != nil && (srv.inFlight || srv.unsupported == sess) {
		return ask{}, false
	}
	info, ok := r.id.Info(peer)
	if !ok || info.Observed == nil {
		return ask{}, false
	}
	oip, ok := ipOf(info.Observed)
	if !ok {
		return ask{}, false
	}
	group := r.cfg.Group(sess.RemoteAddr().Transport)
	var picked []*addrState
	for _, a := range r.addrs {
		if len(picked) < r.cfg.MaxCandidates && a.ip == oip.String() && r.needsLocked(a, group, now) {
			picked = append(picked, a)
		}
	}
	if len(picked) == 0 {
		return ask{}, false
	}
	if srv == nil {
		srv = &serverState{}
		r.servers[peer] = srv
	}
	if !srv.pace.Allow(now, r.cfg.serveRate()) {
		return ask{}, false
	}
	srv.inFlight = true
	out := ask{sess: sess, group: group}
	for _, a := range picked {
		a.pending[group] = struct{}{}
		out.addrs = append(out.addrs, a.addr)
		out.epochs = append(out.epochs, a.epoch)
	}
	return out, true
}

// needsLocked reports whether a group's answer about a is wanted at now: none of that
// group is pending, and its last answer is missing or RecheckInterval old, while a is
// undecided or its last answer came RecheckInterval ago. A decided address thus asks no
// more groups until its recheck is due, and an undecided one asks every group it can.
func (r *Reach) needsLocked(a *addrState, group addrbook.Group, now time.Time) bool {
	if _, ok := a.pending[group]; ok {
		return false
	}
	due := now.Sub(a.lastChecked) >= r.cfg.RecheckInterval
	if a.state != Unknown && !due {
		return false
	}
	res, ok := a.results[group]
	return !ok || now.Sub(res.at) >= r.cfg.RecheckInterval
}

// ask sends one request and records the answer.
func (r *Reach) ask(a ask) {
	defer r.wg.Done()
	r.stats.asked.Add(1)
	ctx, cancel := context.WithTimeout(r.ctx, r.cfg.RequestTimeout)
	reply, err := a.sess.Request(ctx, ProtocolName, appendRequest(nil, a.addrs))
	cancel()
	var results []Result
	if err == nil {
		results, err = parseReply(reply, len(a.addrs))
	}
	if err != nil {
		r.stats.askFailed.Add(1)
		r.debug("request failed", "peer", a.sess.Peer(), "err", err)
	} else {
		r.stats.answered.Add(1)
	}
	r.mu.Lock()
	evs := r.recordLocked(a, results, err, r.now())
	r.mu.Unlock()
	r.emit(evs)
	r.poke()
}

// recordLocked takes in a server's answer (results, or err) and returns the events of
// the states it changed.
func (r *Reach) recordLocked(a ask, results []Result, err error, now time.Time) []Event {
	peer := a.sess.Peer()
	if srv := r.servers[peer]; srv != nil {
		srv.inFlight = false
		if errors.Is(err, protocol.ErrUnknownProtocol) || errors.Is(err, protocol.ErrNoCommonVersion) {
			srv.unsupported = a.sess
		}
	}
	var evs []Event
	for i, addr := range a.addrs {
		st := r.findLocked(addr)
		if st == nil {
			continue // no longer a candidate
		}
		delete(st.pending, a.group)
		if err != nil || st.epoch != a.epochs[i] {
			continue // no answer, or one about what the address was before a mapping changed
		}
		switch results[i] {
		case ResultOK, ResultFailed:
			st.results[a.group] = result{ok: results[i] == ResultOK, at: now, peer: peer}
			st.lastChecked = now
			if results[i] == ResultOK {
				st.lastOK = now
			}
		default:
			continue // refused or skipped: no answer
		}
		pruneResults(st.results, now, r.cfg.MaxResultAge)
		ok, failed := tallyResults(st.results, now, r.cfg.MaxResultAge)
		if s := decide(ok, failed, r.cfg.Confirmations); s != st.state {
			evs = append(evs, Event{Addr: st.addr, Prev: st.state, State: s, Time: now})
			st.state = s
		}
	}
	return append(evs, r.overallLocked(now)...)
}

// findLocked returns the tracked address equal to addr, or nil.
func (r *Reach) findLocked(addr ma.Multiaddr) *addrState {
	for _, a := range r.addrs {
		if a.addr.Equal(addr) {
			return a
		}
	}
	return nil
}

// overallLocked recomputes the node's state and returns its event if it changed.
func (r *Reach) overallLocked(now time.Time) []Event {
	states := make([]State, len(r.addrs))
	for i, a := range r.addrs {
		states[i] = a.state
	}
	s := overall(states)
	if s == r.state {
		return nil
	}
	ev := Event{Prev: r.state, State: s, Time: now}
	r.state = s
	return []Event{ev}
}

// pruneResults drops the answers older than maxAge, then the oldest beyond
// maxResultsPerAddr.
func pruneResults(res map[addrbook.Group]result, now time.Time, maxAge time.Duration) {
	for g, x := range res {
		if now.Sub(x.at) > maxAge {
			delete(res, g)
		}
	}
	for len(res) > maxResultsPerAddr {
		var oldest addrbook.Group
		first := true
		for g, x := range res {
			if first || x.at.Before(res[oldest].at) {
				oldest, first = g, false
			}
		}
		delete(res, oldest)
	}
}
