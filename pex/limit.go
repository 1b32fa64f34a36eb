package pex

import (
	"time"

	"github.com/tendril-p2p/tendril/internal/ratelimit"
	"github.com/tendril-p2p/tendril/secio"
)

// serveLimiter decides which requests get an answer: per asking peer a bucket of
// ServeBurst, refilled every ServeInterval, and one bucket of MaxAnswersPerSecond for all.
// A peer forgotten by the LRU comes back with a full bucket: the global bucket bounds what
// a swarm of identities gets.
type serveLimiter struct {
	rate   ratelimit.Rate // per peer
	peers  *ratelimit.LRU[secio.PeerID, ratelimit.Bucket]
	global ratelimit.Bucket
	all    ratelimit.Rate // global
}

// newServeLimiter returns the limiter of c with every bucket full. Its first argument,
// the time the buckets start full, is unused since a zero ratelimit.Bucket is full at any
// time; the signature is the one the package's tests call.
func newServeLimiter(_ time.Time, c *Config) *serveLimiter {
	return &serveLimiter{
		rate:  ratelimit.Rate{Burst: c.ServeBurst, Interval: c.ServeInterval},
		peers: ratelimit.NewLRU[secio.PeerID, ratelimit.Bucket](c.MaxTrackedPeers),
		all:   ratelimit.PerSecond(c.MaxAnswersPerSecond, c.MaxAnswersPerSecond*globalBurstSeconds),
	}
}

// allow reports whether peer's request at now gets an answer.
func (s *serveLimiter) allow(now time.Time, peer secio.PeerID) bool {
	b := s.peers.GetOrAdd(peer)
	if !b.Allow(now, s.rate) {
		return false
	}
	if !s.global.Allow(now, s.all) {
		// Refused for others' asks, not its own: the peer keeps its allowance.
		b.Refund(s.rate)
		return false
	}
	return true
}

// globalBurstSeconds is the global bucket's depth in seconds of MaxAnswersPerSecond: a
// swarm that starts together has every joiner ask its bootstrap peer within a second or
// two, and those first answers are what the swarm grows from.
const globalBurstSeconds = 5

// strikes counts the bad records of answering peers and decides whom to ignore.
type strikes struct {
	limit  int
	ignore time.Duration
	peers  *ratelimit.LRU[secio.PeerID, strikeState]
}

type strikeState struct {
	bad          int
	ignoredUntil time.Time
}

func newStrikes(c *Config) *strikes {
	return &strikes{limit: c.BadRecordLimit, ignore: c.IgnoreFor, peers: ratelimit.NewLRU[secio.PeerID, strikeState](c.MaxTrackedPeers)}
}

// ignored reports whether peer's answers are ignored at now.
func (s *strikes) ignored(now time.Time, peer secio.PeerID) bool {
	st := s.peers.Get(peer)
	return st != nil && now.Before(st.ignoredUntil)
}

// add counts n bad records from peer at now; at the limit the peer is ignored until
// IgnoreFor from now, and its count starts again. It reports whether the peer is ignored.
func (s *strikes) add(now time.Time, peer secio.PeerID, n int) bool {
	st := s.peers.GetOrAdd(peer)
	st.bad += n
	if st.bad >= s.limit {
		st.bad = 0
		st.ignoredUntil = now.Add(s.ignore)
	}
	return now.Before(st.ignoredUntil)
}

// nextAskDelay returns the wait before the next periodic ask after a wait of prev: doubled
// up to interval while warming up from FirstAsk; then interval while the book holds fewer
// than want peers, else the previous wait doubled, up to max.
func nextAskDelay(peers, want int, prev, interval, max time.Duration) time.Duration {
	if prev < interval {
		return min(2*prev, interval)
	}
	if peers < want {
		return interval
	}
	return min(2*prev, max)
}
