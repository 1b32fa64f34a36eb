package reach

import (
	"context"
	"errors"
	"net/netip"
	"sync"

	ma "github.com/multiformats/go-multiaddr"
	"github.com/tendril-p2p/tendril"
)

// server answers dial-back requests. Its bounds: a request is at most maxRequestSize
// bytes and MaxCandidates candidates, parsed before anything else; only candidates at the
// requester's own observed IP are dialled (never a third party's address, so this node
// cannot be made to attack one); per requester address ServeBurst requests, then one per
// ServeInterval; for everyone MaxConcurrentDials dial-backs at once and DialRate a second;
// each dial-back within DialBackTimeout, with a goroutine of its own for its length.
type server struct {
	r *Reach

	mu  sync.Mutex
	lim *serveLimiter // guarded by mu
}

// ServeRequest implements tendril.RequestHandler.
func (s *server) ServeRequest(c *tendril.Context, req []byte) ([]byte, error) {
	r := s.r
	cands, err := parseRequest(req, r.cfg.MaxCandidates)
	if err != nil {
		r.stats.malformed.Add(1)
		return nil, err
	}
	r.stats.requests.Add(1)
	ip, isIP := ipOf(c.Session().RemoteAddr().Transport)
	results := make([]Result, len(cands))
	var dial []int
	for i, a := range cands {
		cip, ok := ipOf(a)
		if !isIP || !ok || cip != ip || duplicate(cands[:i], a) {
			results[i] = ResultRefused
			r.stats.refused.Add(1)
			continue
		}
		dial = append(dial, i)
	}
	if len(dial) == 0 {
		return appendReply(nil, statusOK, results), nil
	}

	key := requesterKey(ip)
	now := r.now()
	s.mu.Lock()
	if err := s.lim.admit(now, key); err != nil {
		s.mu.Unlock()
		return s.refusal(err), nil
	}
	started := dial[:0]
	for _, i := range dial {
		if s.lim.startDial(now) {
			started = append(started, i)
		} else {
			results[i] = ResultSkipped
		}
	}
	if len(started) == 0 {
		s.lim.refund(key)
		s.mu.Unlock()
		return s.refusal(ErrBusy), nil
	}
	s.mu.Unlock()

	ctx, cancel := context.WithTimeout(r.ctx, r.cfg.DialBackTimeout)
	defer cancel()
	// The requester giving up (its stream reset, its session ending) ends the dials.
	go func() {
		select {
		case <-c.Done():
			cancel()
		case <-ctx.Done():
		}
	}()
	var wg sync.WaitGroup
	for _, i := range started {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := r.svc.Probe(ctx, tendril.Addr{Transport: cands[i], Peer: c.Peer()})
			switch {
			case err == nil:
				results[i] = ResultOK
				r.stats.dialledOK.Add(1)
			case errors.Is(err, tendril.ErrInvalidAddr):
				results[i] = ResultRefused // no transport here for it: nothing was dialled
				r.stats.refused.Add(1)
			default:
				results[i] = ResultFailed
				r.stats.dialledFailed.Add(1)
			}
			r.debug("dial-back", "peer", c.Peer(), "addr", cands[i], "err", err)
			s.mu.Lock()
			s.lim.endDial()
			s.mu.Unlock()
		}()
	}
	wg.Wait()
	return appendReply(nil, statusOK, results), nil
}

// refusal is the reply refusing a whole request for err (ErrRateLimited or ErrBusy).
func (s *server) refusal(err error) []byte {
	if errors.Is(err, ErrRateLimited) {
		s.r.stats.rateLimited.Add(1)
		return appendReply(nil, statusRateLimited, nil)
	}
	s.r.stats.busy.Add(1)
	return appendReply(nil, statusBusy, nil)
}

// ipOf returns the IP address a multiaddr starts with (/ip4 or /ip6), unmapped.
func ipOf(m ma.Multiaddr) (netip.Addr, bool) {
	if len(m) == 0 {
		return netip.Addr{}, false
	}
	switch m[0].Protocol().Code {
	case ma.P_IP4, ma.P_IP6:
		ip, ok := netip.AddrFromSlice(m[0].RawValue())
		return ip.Unmap(), ok
	}
	return netip.Addr{}, false
}

// duplicate reports whether a is in list.
func duplicate(list []ma.Multiaddr, a ma.Multiaddr) bool {
	for _, b := range list {
		if a.Equal(b) {
			return true
		}
	}
	return false
}
