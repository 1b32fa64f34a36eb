package reach

import (
	"net/netip"
	"time"
)

// gcra is a token bucket kept as the one instant at which it is full again (the generic
// cell rate algorithm): a take is allowed while that instant is at most span ahead of
// now, and moves it one interval on. The zero gcra is full.
type gcra struct{ full time.Time }

// take takes a token at now if the bucket (burst = span/every) has one.
func (g *gcra) take(now time.Time, every, span time.Duration) bool {
	at := g.full
	if at.Before(now) {
		at = now
	}
	next := at.Add(every)
	if next.Sub(now) > span {
		return false
	}
	g.full = next
	return true
}

// give returns a token taken at now.
func (g *gcra) give(every time.Duration) { g.full = g.full.Add(-every) }

// serveLimiter decides which dial-back requests a server serves and how many dials it
// starts: per requester key (an IPv4 address, an IPv6 /64) a bucket of burst requests
// refilled every interval; for everyone, at most maxConc dials at once and dialRate per
// second (twice that at once). It remembers at most maxKeys requesters whose bucket is
// not full; a full bucket is the same as none, so those are forgotten first, and when
// none is full a new requester is refused (ErrBusy) rather than one forgotten early: a
// forgotten requester would come back with a full bucket. Not safe for concurrent use.
type serveLimiter struct {
	every, span time.Duration // per requester
	maxKeys     int
	keys        map[netip.Prefix]*gcra

	dialEvery, dialSpan time.Duration
	dials               gcra
	maxConc, running    int
}

func newServeLimiter(c *Config) *serveLimiter {
	de := time.Second / time.Duration(c.DialRate)
	return &serveLimiter{
		every: c.ServeInterval, span: time.Duration(c.ServeBurst) * c.ServeInterval,
		maxKeys: c.MaxTrackedIPs, keys: make(map[netip.Prefix]*gcra),
		dialEvery: de, dialSpan: 2 * time.Duration(c.DialRate) * de,
		maxConc: c.MaxConcurrentDials,
	}
}

// requesterKey is what the per-requester rate is counted by: the IPv4 address, or the
// IPv6 /64 (one host's usual allocation, whose addresses it can rotate at will).
func requesterKey(ip netip.Addr) netip.Prefix {
	ip = ip.Unmap()
	if ip.Is4() {
		return netip.PrefixFrom(ip, 32)
	}
	p, _ := ip.Prefix(64)
	return p
}

// admit charges one request to key at now: nil, ErrRateLimited, or ErrBusy when the
// limiter tracks maxKeys requesters already.
func (l *serveLimiter) admit(now time.Time, key netip.Prefix) error {
	g := l.keys[key]
	if g == nil {
		if len(l.keys) >= l.maxKeys {
			l.dropFull(now)
			if len(l.keys) >= l.maxKeys {
				return ErrBusy
			}
		}
		g = &gcra{}
		l.keys[key] = g
	}
	if !g.take(now, l.every, l.span) {
		return ErrRateLimited
	}
	return nil
}

// refund gives key back the request admit charged, when none of its dials could start:
// it was refused for others' load, not its own asking.
func (l *serveLimiter) refund(key netip.Prefix) {
	if g := l.keys[key]; g != nil {
		g.give(l.every)
	}
}

// dropFull forgets the requesters whose bucket is full at now.
func (l *serveLimiter) dropFull(now time.Time) {
	for k, g := range l.keys {
		if !g.full.After(now) {
			delete(l.keys, k)
		}
	}
}

// startDial takes a dial slot at now, if one is free and the global rate allows.
func (l *serveLimiter) startDial(now time.Time) bool {
	if l.running >= l.maxConc || !l.dials.take(now, l.dialEvery, l.dialSpan) {
		return false
	}
	l.running++
	return true
}

// endDial frees the slot of a dial that ended.
func (l *serveLimiter) endDial() { l.running-- }
