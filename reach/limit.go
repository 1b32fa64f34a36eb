package reach

import (
	"net/netip"
	"time"

	"github.com/tendril-p2p/tendril/internal/ratelimit"
)

// serveLimiter decides which dial-back requests a server serves and how many dials it
// starts: per requester key (an IPv4 address, an IPv6 /64) a bucket of burst requests
// refilled every interval; for everyone, at most maxConc dials at once and dialRate per
// second (twice that at once). It remembers at most maxKeys requesters whose bucket is
// not full; a full bucket is the same as none, so those are forgotten first, and when
// none is full a new requester is refused (ErrBusy) rather than one forgotten early: a
// forgotten requester would come back with a full bucket. Not safe for concurrent use.
type serveLimiter struct {
	rate    ratelimit.Rate // per requester
	maxKeys int
	keys    map[netip.Prefix]ratelimit.Bucket

	dialRate         ratelimit.Rate
	dials            ratelimit.Bucket
	maxConc, running int
}

func newServeLimiter(c *Config) *serveLimiter {
	return &serveLimiter{
		rate:    c.serveRate(),
		maxKeys: c.MaxTrackedIPs, keys: make(map[netip.Prefix]ratelimit.Bucket),
		dialRate: ratelimit.PerSecond(c.DialRate, 2*c.DialRate),
		maxConc:  c.MaxConcurrentDials,
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
	b, ok := l.keys[key]
	if !ok && len(l.keys) >= l.maxKeys {
		ratelimit.DropFull(l.keys, now)
		if len(l.keys) >= l.maxKeys {
			return ErrBusy
		}
	}
	if !b.Allow(now, l.rate) {
		return ErrRateLimited
	}
	l.keys[key] = b
	return nil
}

// refund gives key back the request admit charged, when none of its dials could start:
// it was refused for others' load, not its own asking.
func (l *serveLimiter) refund(key netip.Prefix) {
	if b, ok := l.keys[key]; ok {
		b.Refund(l.rate)
		l.keys[key] = b
	}
}

// startDial takes a dial slot at now, if one is free and the global rate allows.
func (l *serveLimiter) startDial(now time.Time) bool {
	if l.running >= l.maxConc || !l.dials.Allow(now, l.dialRate) {
		return false
	}
	l.running++
	return true
}

// endDial frees the slot of a dial that ended.
func (l *serveLimiter) endDial() { l.running-- }
