package holepunch

import (
	"time"

	"github.com/tendril-p2p/tendril/secio"
)

// limiter bounds the attempts each peer may cause: at most max within window, one at a
// time. It forgets the peer whose window started first when it tracks maxTrackedPeers.
type limiter struct {
	max    int
	window time.Duration
	peers  map[secio.PeerID]*peerLimit
}

type peerLimit struct {
	start    time.Time // the window's start
	count    int       // attempts in the window
	inFlight bool
}

func newLimiter(max int, window time.Duration) *limiter {
	return &limiter{max: max, window: window, peers: make(map[secio.PeerID]*peerLimit)}
}

// take reports whether p may run an attempt now, and marks it in flight if so.
func (l *limiter) take(p secio.PeerID, now time.Time) bool {
	pl := l.peers[p]
	if pl == nil {
		if len(l.peers) >= maxTrackedPeers {
			l.evict(now)
		}
		pl = &peerLimit{start: now}
		l.peers[p] = pl
	}
	if now.Sub(pl.start) >= l.window {
		pl.start, pl.count = now, 0
	}
	if pl.inFlight || pl.count >= l.max {
		return false
	}
	pl.count++
	pl.inFlight = true
	return true
}

// done ends p's attempt in flight.
func (l *limiter) done(p secio.PeerID) {
	if pl := l.peers[p]; pl != nil {
		pl.inFlight = false
	}
}

// evict forgets the peers whose windows are over, or else the one whose window started
// first and has nothing in flight.
func (l *limiter) evict(now time.Time) {
	var oldest secio.PeerID
	var oldestStart time.Time
	for p, pl := range l.peers {
		if pl.inFlight {
			continue
		}
		if now.Sub(pl.start) >= l.window {
			delete(l.peers, p)
			continue
		}
		if oldestStart.IsZero() || pl.start.Before(oldestStart) {
			oldest, oldestStart = p, pl.start
		}
	}
	if len(l.peers) >= maxTrackedPeers && !oldestStart.IsZero() {
		delete(l.peers, oldest)
	}
}
