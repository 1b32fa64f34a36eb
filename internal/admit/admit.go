// Package admit keeps the books of a tendril Service's admission control: the handshakes
// in progress and which of them gives way to a newcomer, how fast a subnet may start
// handshakes, the sessions admitted by direction, by address and by subnet, which inbound
// sessions a trim at the high watermark closes, and when inbound sessions are due for
// their idle check.
//
// A Ledger knows addresses, counts and the time it is told, never connections or
// sessions: those are its caller's (the root package's admission.go and trim.go), which
// holds one lock around every call, cancels the handshakes the ledger evicts and closes
// the sessions it picks. Every method that needs the time takes it as an argument, so the
// decisions are tested on a fixed clock, without sockets or sleeps.
//
// Everything a peer can make the ledger hold is bounded: one Handshake per handshake slot
// (Limits.MaxHandshakes), per-address and per-subnet counts only for what is counted
// (handshakes and sessions), one idle check per inbound session, and at most
// MaxRateBuckets subnets' handshake rates.
package admit

import (
	"net/netip"
	"slices"
	"time"
)

// Limits are a Ledger's bounds, resolved: the caller has filled in its defaults. A cap of
// zero or less means no cap where noted.
type Limits struct {
	// MaxHandshakes bounds inbound handshakes in progress, from all addresses (at least 1).
	MaxHandshakes int
	// MaxHandshakesPerIP bounds them from one address; <= 0: no cap.
	MaxHandshakesPerIP int
	// MaxHandshakesPerSubnet bounds them from one subnet (Subnet); <= 0: no cap.
	MaxHandshakesPerSubnet int
	// EvictAge is how long a handshake whose first message has arrived must have run
	// before a newcomer may take its slot (a silent one gives way at any age).
	EvictAge time.Duration
	// HandshakeRate is how many handshakes per second one subnet may start, HandshakeBurst
	// how many at once; a handshake starts when its first message has arrived (Heard).
	// HandshakeRate <= 0: no limit.
	HandshakeRate  int
	HandshakeBurst int

	// MaxInbound and MaxOutbound bound sessions by direction (outbound: with the dials in
	// progress).
	MaxInbound  int
	MaxOutbound int
	// MaxInboundPerIP and MaxInboundPerSubnet bound inbound sessions from one address and
	// one subnet; <= 0: no cap.
	MaxInboundPerIP     int
	MaxInboundPerSubnet int
	// Unlimited lists the networks exempt from every per-address and per-subnet cap and
	// from the handshake rate.
	Unlimited []netip.Prefix

	// HighWater and LowWater are the watermarks of inbound sessions (HighWater <= 0: no
	// trimming); GracePeriod spares new sessions from trimming (<= 0: none).
	HighWater   int
	LowWater    int
	GracePeriod time.Duration
	// IdleTimeout is when an inbound session's idle check is due after it opened; <= 0:
	// never.
	IdleTimeout time.Duration
}

// Limit names one of the Limits, for a refusal. None refuses nothing.
type Limit uint8

// The limits a connection can be refused by.
const (
	None                Limit = iota
	Handshakes                // handshakes in progress (MaxHandshakes)
	HandshakesPerIP           // MaxHandshakesPerIP
	HandshakesPerSubnet       // MaxHandshakesPerSubnet
	HandshakeRate             // HandshakeRate, per subnet
	Inbound                   // MaxInbound
	InboundPerIP              // MaxInboundPerIP
	InboundPerSubnet          // MaxInboundPerSubnet
	Outbound                  // MaxOutbound
)

var limitNames = [...]string{
	None:                "none",
	Handshakes:          "handshakes in progress",
	HandshakesPerIP:     "handshakes per IP",
	HandshakesPerSubnet: "handshakes per subnet",
	HandshakeRate:       "new handshakes per second per subnet",
	Inbound:             "inbound sessions",
	InboundPerIP:        "inbound sessions per IP",
	InboundPerSubnet:    "inbound sessions per subnet",
	Outbound:            "outbound sessions",
}

// String names the limit as a *tendril.LimitError does, e.g. "handshakes per IP".
func (k Limit) String() string {
	if int(k) < len(limitNames) {
		return limitNames[k]
	}
	return "unknown limit"
}

// Max returns the value of limit k.
func (lim *Limits) Max(k Limit) int {
	switch k {
	case Handshakes:
		return lim.MaxHandshakes
	case HandshakesPerIP:
		return lim.MaxHandshakesPerIP
	case HandshakesPerSubnet:
		return lim.MaxHandshakesPerSubnet
	case HandshakeRate:
		return lim.HandshakeRate
	case Inbound:
		return lim.MaxInbound
	case InboundPerIP:
		return lim.MaxInboundPerIP
	case InboundPerSubnet:
		return lim.MaxInboundPerSubnet
	case Outbound:
		return lim.MaxOutbound
	}
	return 0
}

// Subnet returns the network that an address's per-subnet caps and handshake rate count:
// its /24 for IPv4, its /64 for IPv6 (one site's or one subscriber's usual allocation).
func Subnet(ip netip.Addr) netip.Prefix {
	bits := 64
	if ip.Is4() {
		bits = 24
	}
	p, _ := ip.Prefix(bits)
	return p
}

// Ledger is the count of what a Service admitted. It is not safe for concurrent use: its
// caller serialises every call (the Service's lock), Victims excepted.
type Ledger struct {
	lim Limits

	// Handshakes in progress (inbound), oldest first, and their counts by address and
	// subnet (limited addresses only). At most MaxHandshakes entries in each.
	hs          []*Handshake
	hsPerIP     map[netip.Addr]int
	hsPerSubnet map[netip.Prefix]int
	rate        rateBook // new handshakes per subnet

	// Sessions (and, outbound, dials in progress). The maps hold limited addresses only,
	// at most MaxInbound entries.
	inbound   int
	outbound  int
	perIP     map[netip.Addr]int
	perSubnet map[netip.Prefix]int

	trimming  bool        // a trim is running: others leave it the work
	idle      []idleCheck // inbound sessions awaiting their idle check, by due time
	idleArmed bool        // the caller's timer is armed for idle[0]
}

// New returns an empty Ledger with the given limits (kept as they are: the caller must
// not change them afterwards).
func New(lim Limits) *Ledger {
	return &Ledger{
		lim:         lim,
		hsPerIP:     make(map[netip.Addr]int),
		hsPerSubnet: make(map[netip.Prefix]int),
		rate:        newRateBook(lim.HandshakeRate, lim.HandshakeBurst),
		perIP:       make(map[netip.Addr]int),
		perSubnet:   make(map[netip.Prefix]int),
	}
}

// Limits returns the ledger's limits.
func (l *Ledger) Limits() *Limits { return &l.lim }

// Ticket is what the ledger counted for one connection: a handshake slot (inbound, until
// the handshake ends), then a session. The caller keeps it with the connection and gives
// it back with Release, on every path, once or more (Release is idempotent).
type Ticket struct {
	addr    netip.Addr // the remote address, unmapped (zero if not IP)
	hs      *Handshake // the handshake slot, until EndHandshake
	session uint64     // the session's ID once its idle check is queued
	inbound bool
	limited bool // addr is subject to the per-address and per-subnet caps
	counted bool // counted in inbound or outbound (and, if limited, per address and subnet)
	idle    bool // an idle check may be queued for it
}

// Handshake returns the ticket's handshake slot, nil once the handshake has ended.
func (t *Ticket) Handshake() *Handshake { return t.hs }

// Addr returns the remote address the ticket was admitted for (zero for outbound tickets).
func (t *Ticket) Addr() netip.Addr { return t.addr }

// Counted reports whether the ticket holds a session slot.
func (t *Ticket) Counted() bool { return t.counted }

// limited reports whether ip is subject to the per-address and per-subnet caps.
func (l *Ledger) limited(ip netip.Addr) bool {
	if !ip.IsValid() {
		return false
	}
	for _, p := range l.lim.Unlimited {
		if p.Contains(ip) {
			return false
		}
	}
	return true
}

// sessionCap reports the per-address or per-subnet session cap an inbound session from
// ip (limited) would exceed, if any.
func (l *Ledger) sessionCap(ip netip.Addr) Limit {
	if n := l.lim.MaxInboundPerIP; n > 0 && l.perIP[ip] >= n {
		return InboundPerIP
	}
	if n := l.lim.MaxInboundPerSubnet; n > 0 && l.perSubnet[Subnet(ip)] >= n {
		return InboundPerSubnet
	}
	return None
}

// AdmitOutbound takes an outbound slot for a dial, or names the limit that refuses it.
func (l *Ledger) AdmitOutbound() (Ticket, Limit) {
	if l.outbound >= l.lim.MaxOutbound {
		return Ticket{}, Outbound
	}
	l.outbound++
	return Ticket{counted: true}, None
}

// AdmitSession counts a handshaken inbound session (its handshake slot is given back), or
// names the limit that refuses it; the caller then releases t. An outbound ticket holds
// its slot since the dial: nothing to do.
func (l *Ledger) AdmitSession(t *Ticket) Limit {
	l.EndHandshake(t)
	if !t.inbound || t.counted {
		return None
	}
	if t.limited {
		if k := l.sessionCap(t.addr); k != None {
			return k
		}
	}
	if l.inbound >= l.lim.MaxInbound {
		return Inbound
	}
	l.inbound++
	if t.limited {
		l.perIP[t.addr]++
		l.perSubnet[Subnet(t.addr)]++
	}
	t.counted = true
	return None
}

// Release gives back everything t holds: its handshake slot, its session slot and its
// idle check. Releasing twice is harmless.
func (l *Ledger) Release(t *Ticket) {
	l.EndHandshake(t)
	if t.idle {
		t.idle = false
		if i := slices.IndexFunc(l.idle, func(c idleCheck) bool { return c.session == t.session }); i >= 0 {
			l.idle = slices.Delete(l.idle, i, i+1)
		}
	}
	if !t.counted {
		return
	}
	t.counted = false
	if !t.inbound {
		l.outbound--
		return
	}
	l.inbound--
	if t.limited {
		decr(l.perIP, t.addr)
		decr(l.perSubnet, Subnet(t.addr))
	}
}

// decr takes one from m[k], deleting the entry at zero, so that a map holds only what is
// counted.
func decr[K comparable](m map[K]int, k K) {
	if m[k]--; m[k] <= 0 {
		delete(m, k)
	}
}

// Inbound returns the number of inbound sessions counted.
func (l *Ledger) Inbound() int { return l.inbound }

// Outbound returns the number of outbound sessions and dials in progress counted.
func (l *Ledger) Outbound() int { return l.outbound }

// Handshakes returns the number of inbound handshakes holding a slot.
func (l *Ledger) Handshakes() int { return len(l.hs) }
