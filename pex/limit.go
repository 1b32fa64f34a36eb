package pex

import (
	"container/list"
	"time"

	"github.com/tendril-p2p/tendril/secio"
)

// bucket is a token bucket: up to burst tokens, one more every interval.
type bucket struct {
	tokens float64
	last   time.Time
}

// newBucket returns a full bucket.
func newBucket(now time.Time, burst int) bucket { return bucket{tokens: float64(burst), last: now} }

// take refills the bucket for the time since its last use and takes a token if there is
// one. A clock that went back refills nothing.
func (b *bucket) take(now time.Time, interval time.Duration, burst int) bool {
	if d := now.Sub(b.last); d > 0 {
		b.tokens = min(float64(burst), b.tokens+float64(d)/float64(interval))
		b.last = now
	}
	if b.tokens < 1 {
		return false
	}
	b.tokens--
	return true
}

// lru maps peers to state, keeping at most max of them: adding one more forgets the least
// recently used. Not safe for concurrent use.
type lru[V any] struct {
	max   int
	items map[secio.PeerID]*list.Element
	order list.List // front: most recently used; values are *lruItem[V]
}

type lruItem[V any] struct {
	peer secio.PeerID
	v    V
}

func newLRU[V any](max int) *lru[V] {
	return &lru[V]{max: max, items: make(map[secio.PeerID]*list.Element)}
}

// get returns peer's state, or nil, and marks it used.
func (l *lru[V]) get(peer secio.PeerID) *V {
	e := l.items[peer]
	if e == nil {
		return nil
	}
	l.order.MoveToFront(e)
	return &e.Value.(*lruItem[V]).v
}

// getOrAdd returns peer's state, adding init's if there is none (and forgetting the least
// recently used peer's beyond max).
func (l *lru[V]) getOrAdd(peer secio.PeerID, init func() V) *V {
	if v := l.get(peer); v != nil {
		return v
	}
	if len(l.items) >= l.max {
		old := l.order.Back()
		l.order.Remove(old)
		delete(l.items, old.Value.(*lruItem[V]).peer)
	}
	it := &lruItem[V]{peer: peer, v: init()}
	l.items[peer] = l.order.PushFront(it)
	return &it.v
}

func (l *lru[V]) len() int { return len(l.items) }

// serveLimiter decides which requests get an answer: per asking peer a bucket of
// ServeBurst, refilled every ServeInterval, and one bucket of MaxAnswersPerSecond for all.
// A peer forgotten by the LRU comes back with a full bucket: the global bucket bounds what
// a swarm of identities gets.
type serveLimiter struct {
	interval time.Duration
	burst    int
	peers    *lru[bucket]
	global   bucket
	perSec   int
}

func newServeLimiter(now time.Time, c *Config) *serveLimiter {
	return &serveLimiter{
		interval: c.ServeInterval, burst: c.ServeBurst,
		peers:  newLRU[bucket](c.MaxTrackedPeers),
		global: newBucket(now, c.MaxAnswersPerSecond*globalBurstSeconds), perSec: c.MaxAnswersPerSecond,
	}
}

// allow reports whether peer's request at now gets an answer.
func (s *serveLimiter) allow(now time.Time, peer secio.PeerID) bool {
	b := s.peers.getOrAdd(peer, func() bucket { return newBucket(now, s.burst) })
	if !b.take(now, s.interval, s.burst) {
		return false
	}
	if !s.global.take(now, time.Second/time.Duration(s.perSec), s.perSec*globalBurstSeconds) {
		// Refused for others' asks, not its own: the peer keeps its allowance.
		b.tokens = min(b.tokens+1, float64(s.burst))
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
	peers  *lru[strikeState]
}

type strikeState struct {
	bad          int
	ignoredUntil time.Time
}

func newStrikes(c *Config) *strikes {
	return &strikes{limit: c.BadRecordLimit, ignore: c.IgnoreFor, peers: newLRU[strikeState](c.MaxTrackedPeers)}
}

// ignored reports whether peer's answers are ignored at now.
func (s *strikes) ignored(now time.Time, peer secio.PeerID) bool {
	st := s.peers.get(peer)
	return st != nil && now.Before(st.ignoredUntil)
}

// add counts n bad records from peer at now; at the limit the peer is ignored until
// IgnoreFor from now, and its count starts again. It reports whether the peer is ignored.
func (s *strikes) add(now time.Time, peer secio.PeerID, n int) bool {
	st := s.peers.getOrAdd(peer, func() strikeState { return strikeState{} })
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
