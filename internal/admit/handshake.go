package admit

// Handshake slots. A connection just accepted takes one before anything is read from it,
// and keeps it until its handshake ends. The slots are few (MaxHandshakes) and capped per
// address and per subnet. A handshake is silent until the dialer's first message has
// arrived in full: the caller says at admission whether it already has (it can look
// without reading), and tells the ledger later when it does (Heard). A silent socket
// costs its holder nothing, so it holds its slot only until someone needs it. A newcomer
// that finds no room:
//
//   - from an address at MaxHandshakesPerIP, is refused: one address, one party;
//   - from a subnet at MaxHandshakesPerSubnet, takes the slot of that subnet's oldest
//     silent handshake, else is refused;
//   - when all MaxHandshakes are taken, takes the slot of the oldest silent handshake, else
//     of the oldest handshake if it has run EvictAge (a handshake takes a few round trips;
//     the one that has held its slot longest is the likeliest to be stalling), else is
//     refused.
//
// A handshake that has spoken is thus only ever evicted by age, and a stream of sockets
// that never speak cannot keep one out however young they are; a subnet's sockets cannot
// hold more than its share, and only evict their own once they hold it. A dialer whose
// first message had arrived when it was accepted has spoken from the start, so a burst of
// newcomers accepted faster than the listener reads cannot evict it.

import (
	"net/netip"
	"slices"
	"time"
)

// Handshake is an inbound handshake holding a slot.
type Handshake struct {
	// Cancel aborts the handshake; the caller sets it. The ledger never calls it: it hands
	// an evicted handshake back to the caller, which does.
	Cancel func(cause error)

	addr    netip.Addr
	start   time.Time
	limited bool
	spoke   bool // its first message has arrived in full
	ended   bool // it holds no slot any more
}

// Silent reports whether h's first message has yet to arrive in full: until it has, h
// gives its slot to a newcomer that needs one, at any age.
func (h *Handshake) Silent() bool { return !h.spoke }

// AdmitInbound takes a handshake slot for a connection accepted at now from addr, or
// names the limit that refuses it. spoke says that the dialer's first message has already
// arrived in full; the subnet's handshake rate is then charged at once (as Heard does).
// If the slot was another handshake's, that one is returned (evicted, its counts
// released): the caller cancels it. A connection whose session would exceed a per-address
// or per-subnet session cap is refused at once.
func (l *Ledger) AdmitInbound(now time.Time, addr netip.Addr, spoke bool) (t Ticket, evicted *Handshake, refused Limit) {
	t = Ticket{addr: addr, inbound: true, limited: l.limited(addr)}
	var subnet netip.Prefix
	if t.limited {
		if k := l.sessionCap(addr); k != None {
			return t, nil, k
		}
		if n := l.lim.MaxHandshakesPerIP; n > 0 && l.hsPerIP[addr] >= n {
			return t, nil, HandshakesPerIP
		}
		subnet = Subnet(addr)
		if n := l.lim.MaxHandshakesPerSubnet; n > 0 && l.hsPerSubnet[subnet] >= n {
			evicted = l.oldestSilent(func(h *Handshake) bool { return h.limited && Subnet(h.addr) == subnet })
			if evicted == nil {
				return t, nil, HandshakesPerSubnet
			}
		}
	}
	if evicted == nil && len(l.hs) >= l.lim.MaxHandshakes {
		evicted = l.oldestSilent(nil)
		if evicted == nil {
			if oldest := l.hs[0]; now.Sub(oldest.start) >= l.lim.EvictAge {
				evicted = oldest
			} else {
				return t, nil, Handshakes
			}
		}
	}
	if spoke && t.limited && !l.rate.take(now, subnet) {
		return t, nil, HandshakeRate
	}
	if evicted != nil {
		l.endHandshake(evicted)
	}
	h := &Handshake{addr: addr, start: now, limited: t.limited, spoke: spoke}
	l.hs = append(l.hs, h)
	if t.limited {
		l.hsPerIP[addr]++
		l.hsPerSubnet[subnet]++
	}
	t.hs = h
	return t, evicted, None
}

// oldestSilent returns the oldest silent handshake that in accepts (nil: any), or nil.
func (l *Ledger) oldestSilent(in func(*Handshake) bool) *Handshake {
	for _, h := range l.hs {
		if h.Silent() && (in == nil || in(h)) {
			return h
		}
	}
	return nil
}

// Heard records that h's first message has arrived in full at now: from then on h is
// evicted only by age. It charges h's subnet one handshake of its rate; if the subnet has
// none left, it names the limit instead, and the caller aborts the handshake before
// spending anything on the message. A handshake that has ended, or was heard already, is
// not charged again.
func (l *Ledger) Heard(now time.Time, h *Handshake) Limit {
	if h.ended || h.spoke {
		return None
	}
	if h.limited && !l.rate.take(now, Subnet(h.addr)) {
		return HandshakeRate
	}
	h.spoke = true
	return None
}

// EndHandshake gives back t's handshake slot, if it still holds one.
func (l *Ledger) EndHandshake(t *Ticket) {
	if t.hs == nil {
		return
	}
	if !t.hs.ended {
		l.endHandshake(t.hs)
	}
	t.hs = nil
}

// endHandshake removes h from the slots and its counts.
func (l *Ledger) endHandshake(h *Handshake) {
	h.ended = true
	if i := slices.Index(l.hs, h); i >= 0 {
		l.hs = slices.Delete(l.hs, i, i+1)
	}
	if h.limited {
		decr(l.hsPerIP, h.addr)
		decr(l.hsPerSubnet, Subnet(h.addr))
	}
}

// Readdress moves t, an inbound ticket still in its handshake, to addr: a trusted proxy
// has said on whose behalf its connection comes. The handshake keeps its slot and age;
// its counts move to addr, which must have room under the per-address and per-subnet
// caps (no-one is evicted for it: the client is known only now, and its handshake has
// already taken a slot). If it has already spoken, addr's subnet is charged its rate. On
// refusal nothing changes and the limit is named; the caller then releases t.
func (l *Ledger) Readdress(now time.Time, t *Ticket, addr netip.Addr) Limit {
	h := t.hs
	if h == nil || h.ended || !t.inbound || t.counted {
		return None
	}
	limited := l.limited(addr)
	if limited {
		if k := l.sessionCap(addr); k != None {
			return k
		}
		if n := l.lim.MaxHandshakesPerIP; n > 0 && l.hsPerIP[addr] >= n {
			return HandshakesPerIP
		}
		if n := l.lim.MaxHandshakesPerSubnet; n > 0 && l.hsPerSubnet[Subnet(addr)] >= n {
			return HandshakesPerSubnet
		}
		if h.spoke && !l.rate.take(now, Subnet(addr)) {
			return HandshakeRate
		}
	}
	if h.limited {
		decr(l.hsPerIP, h.addr)
		decr(l.hsPerSubnet, Subnet(h.addr))
	}
	if limited {
		l.hsPerIP[addr]++
		l.hsPerSubnet[Subnet(addr)]++
	}
	h.addr, h.limited = addr, limited
	t.addr, t.limited = addr, limited
	return None
}
