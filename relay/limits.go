package relay

// The relay's decisions, as plain code on an explicit clock: which reservations and
// circuits it takes. The Relay calls them under its lock.

import (
	"net/netip"
	"time"

	"github.com/tendril-p2p/tendril/internal/admit"
	"github.com/tendril-p2p/tendril/internal/ratelimit"
	"github.com/tendril-p2p/tendril/secio"
)

// reservation is one peer's slot on the relay, valid while its session is the one it was
// made on and until it expires.
type reservation struct {
	session uint64
	ip      netip.Addr // invalid if the session is not over IP
	expires time.Time
}

// liveFunc reports whether a peer's session with the given ID is still its session with
// the relay.
type liveFunc func(peer secio.PeerID, session uint64) bool

// ledger counts the relay's reservations and circuits and decides on new ones. Not safe
// for concurrent use.
type ledger struct {
	cfg *RelayConfig // resolved

	res       map[secio.PeerID]reservation
	perIP     map[netip.Addr]int
	perSubnet map[netip.Prefix]int

	circuits int
	perPeer  map[secio.PeerID]int // circuits each peer is an end of

	// Every hop request, per peer: at most MaxTrackedPeers of them, the least recently
	// used forgotten, who comes back with a full bucket (the global buckets bound what a
	// swarm of identities gets).
	requests    *ratelimit.LRU[secio.PeerID, ratelimit.Bucket]
	reserves    ratelimit.Bucket // new reservations, everyone
	connects    ratelimit.Bucket // circuit requests, everyone
	requestRate ratelimit.Rate
	reserveRate ratelimit.Rate
	connectRate ratelimit.Rate
}

// newLedger returns the ledger of cfg with every bucket full. Its first argument, the
// time the buckets start full, is unused since a zero ratelimit.Bucket is full at any
// time; the signature is the one the package's tests call.
func newLedger(_ time.Time, cfg *RelayConfig) *ledger {
	return &ledger{
		cfg: cfg,
		res: make(map[secio.PeerID]reservation), perIP: make(map[netip.Addr]int), perSubnet: make(map[netip.Prefix]int),
		perPeer:     make(map[secio.PeerID]int),
		requests:    ratelimit.NewLRU[secio.PeerID, ratelimit.Bucket](cfg.MaxTrackedPeers),
		requestRate: ratelimit.Rate{Burst: cfg.RequestBurst, Interval: cfg.RequestInterval},
		reserveRate: ratelimit.PerSecond(cfg.ReservationRate, cfg.ReservationBurst),
		connectRate: ratelimit.PerSecond(cfg.ConnectRate, cfg.ConnectBurst),
	}
}

// request takes peer's token for one hop request.
func (l *ledger) request(now time.Time, peer secio.PeerID) bool {
	return l.requests.GetOrAdd(peer).Allow(now, l.requestRate)
}

// capped reports whether per-IP and per-subnet caps apply to ip: an IP address that is
// not loopback (as the Service's admission exempts loopback by default).
func capped(ip netip.Addr) bool { return ip.IsValid() && !ip.IsLoopback() }

// reserve grants or refreshes peer's reservation, made on session from ip. A refresh
// always passes (the per-peer request bucket bounds it); a new reservation needs room in
// total and for its address and subnet, pruning stale ones first if there is none, and a
// token of the global reservation rate. It returns when the reservation expires.
func (l *ledger) reserve(now time.Time, peer secio.PeerID, session uint64, ip netip.Addr, live liveFunc) (time.Time, error) {
	ip = ip.Unmap()
	expires := now.Add(l.cfg.ReservationTTL)
	if old, ok := l.res[peer]; ok {
		l.drop(peer, old)
		l.add(peer, reservation{session: session, ip: ip, expires: expires})
		return expires, nil
	}
	if !l.room(ip) {
		l.prune(now, live)
		if !l.room(ip) {
			return time.Time{}, ErrReservationRefused
		}
	}
	if !l.reserves.Allow(now, l.reserveRate) {
		return time.Time{}, ErrRateLimited
	}
	l.add(peer, reservation{session: session, ip: ip, expires: expires})
	return expires, nil
}

// room reports whether a new reservation from ip fits.
func (l *ledger) room(ip netip.Addr) bool {
	if len(l.res) >= l.cfg.MaxReservations {
		return false
	}
	if capped(ip) {
		if l.cfg.MaxReservationsPerIP > 0 && l.perIP[ip] >= l.cfg.MaxReservationsPerIP {
			return false
		}
		if l.cfg.MaxReservationsPerSubnet > 0 && l.perSubnet[admit.Subnet(ip)] >= l.cfg.MaxReservationsPerSubnet {
			return false
		}
	}
	return true
}

func (l *ledger) add(peer secio.PeerID, r reservation) {
	l.res[peer] = r
	if capped(r.ip) {
		l.perIP[r.ip]++
		l.perSubnet[admit.Subnet(r.ip)]++
	}
}

func (l *ledger) drop(peer secio.PeerID, r reservation) {
	delete(l.res, peer)
	if capped(r.ip) {
		decr(l.perIP, r.ip)
		decr(l.perSubnet, admit.Subnet(r.ip))
	}
}

func decr[K comparable](m map[K]int, k K) {
	if m[k] <= 1 {
		delete(m, k)
	} else {
		m[k]--
	}
}

// prune drops the reservations that expired or whose session is gone.
func (l *ledger) prune(now time.Time, live liveFunc) {
	for p, r := range l.res {
		if !now.Before(r.expires) || !live(p, r.session) {
			l.drop(p, r)
		}
	}
}

// reserved reports whether target holds a live reservation, dropping a stale one.
func (l *ledger) reserved(now time.Time, target secio.PeerID, live liveFunc) bool {
	r, ok := l.res[target]
	if !ok {
		return false
	}
	if !now.Before(r.expires) || !live(target, r.session) {
		l.drop(target, r)
		return false
	}
	return true
}

// openCircuit counts a circuit from src to dst if there is room: in total and for each of
// the two peers, and a token of the global connect rate. Undo it with closeCircuit.
func (l *ledger) openCircuit(now time.Time, src, dst secio.PeerID) error {
	if l.circuits >= l.cfg.MaxCircuits || l.perPeer[src] >= l.cfg.MaxCircuitsPerPeer || l.perPeer[dst] >= l.cfg.MaxCircuitsPerPeer {
		return ErrResourceLimit
	}
	if !l.connects.Allow(now, l.connectRate) {
		return ErrRateLimited
	}
	l.circuits++
	l.perPeer[src]++
	l.perPeer[dst]++
	return nil
}

func (l *ledger) closeCircuit(src, dst secio.PeerID) {
	l.circuits--
	decr(l.perPeer, src)
	decr(l.perPeer, dst)
}
