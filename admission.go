package tendril

// Admission control: which connections a Service takes, and which sessions it lets go when
// it must make room. Modelled on go-libp2p's resource manager (limits by direction and by
// address), connection manager (low/high watermarks, protected peers) and ConnectionGater
// (bans by address before the handshake, by peer ID after it), so that no stranger can lock
// a node out:
//
//   - handshakes in progress have their own small budget, with a per-IP cap, and when it is
//     full a new connection aborts the oldest handshake: silent or trickling sockets hold a
//     slot only until newer connections need it, never the session budgets;
//   - inbound and outbound sessions have separate budgets, so inbound load never blocks
//     dialling out;
//   - inbound sessions are capped per IP and per subnet (/24 for IPv4, /64 for IPv6), except
//     from the Unlimited networks (loopback by default);
//   - when inbound sessions reach the high watermark, those with no protocol open are closed,
//     oldest first, down to the low watermark (the application can protect sessions), and an
//     inbound session that never opens a protocol is closed after IdleTimeout.
//
// Every refusal is an event at the node (EventLimitReached or EventGated, rate-limited per
// address) and a typed error (*LimitError, ErrGated). The wire has no place for a reason
// before the handshake (the connection is reset), nor after it at the connection level (the
// session is closed); refused protocol streams get a typed refusal (protocol.RefusedError).

import (
	"cmp"
	"context"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"time"

	"github.com/tendril-p2p/tendril/secio"
)

// Defaults of Admission.
const (
	DefaultMaxHandshakes       = 64
	DefaultMaxHandshakesPerIP  = 4
	DefaultMaxInboundPerIP     = 8
	DefaultMaxInboundPerSubnet = 32
	DefaultIdleTimeout         = 30 * time.Second
	DefaultGracePeriod         = time.Second
	DefaultHandlerExitTimeout  = 5 * time.Second
)

// Admission configures which connections a Service accepts and which inbound sessions it
// closes to make room. The zero value means the defaults; a field set to -1 disables what
// it bounds (where noted).
type Admission struct {
	// MaxHandshakes bounds inbound handshakes in progress. Default DefaultMaxHandshakes.
	// When all are taken, a new connection aborts the oldest one if it has run for a
	// second (or a quarter of HandshakeTimeout, if shorter; it fails with
	// ErrHandshakeEvicted): a handshake takes a few round trips, so a socket that has held
	// its slot longest is the likeliest to be stalling. If none is that old, the new
	// connection is reset.
	MaxHandshakes int
	// MaxHandshakesPerIP bounds inbound handshakes in progress from one IP address (exempt:
	// Unlimited). Beyond it connections from that address are reset at once. Default
	// DefaultMaxHandshakesPerIP.
	MaxHandshakesPerIP int

	// MaxInbound bounds inbound sessions. Default: Config.MaxConnections minus MaxOutbound
	// (at least 1).
	MaxInbound int
	// MaxOutbound bounds outbound sessions plus dials in progress; beyond it Dial returns a
	// *LimitError (ErrConnectionLimit). Inbound sessions never take these slots. Default: a
	// quarter of Config.MaxConnections, at least 1.
	MaxOutbound int
	// MaxInboundPerIP bounds inbound sessions from one IP address; MaxInboundPerSubnet from
	// one /24 (IPv4) or /64 (IPv6). Connections beyond them are reset before the handshake
	// (and, if a race let them through, closed after it). Addresses in Unlimited are
	// exempt. Defaults DefaultMaxInboundPerIP and DefaultMaxInboundPerSubnet; -1: no cap.
	MaxInboundPerIP     int
	MaxInboundPerSubnet int
	// Unlimited lists networks exempt from the per-IP and per-subnet caps (handshakes and
	// sessions), as go-libp2p exempts loopback. Nil: 127.0.0.0/8 and ::1/128. An empty
	// non-nil slice exempts nothing.
	Unlimited []netip.Prefix

	// HighWater and LowWater are the watermarks of inbound sessions: when a new inbound
	// session brings their number to HighWater, sessions with no protocol open are closed
	// (ErrTrimmed), oldest first and never one Protect accepts, until LowWater remain or no
	// such session is left. Defaults: HighWater MaxInbound, LowWater seven eighths of
	// HighWater. HighWater -1: no trimming (MaxInbound is then a hard limit only).
	HighWater int
	LowWater  int
	// GracePeriod protects a new inbound session from trimming for this long, so that a
	// peer has time to open its first protocol. Default DefaultGracePeriod; -1: none.
	GracePeriod time.Duration
	// Protect, if set, is asked about each trimming candidate; true keeps it. It runs on
	// the goroutine registering a new session, without the Service's locks held.
	Protect func(*Session) bool

	// IdleTimeout closes an inbound session on which no protocol was ever opened (by either
	// side) within this long (ErrIdleSession): a peer that only answers keepalives costs a
	// session slot for nothing. Default DefaultIdleTimeout; -1: never.
	IdleTimeout time.Duration

	// Gater, if set, is asked before every handshake and after it; see Gater.
	Gater Gater
}

// Gater decides which connections and peers a Service accepts (bans, allow lists), as
// go-libp2p's ConnectionGater does. Both methods are called concurrently, on the goroutine
// accepting or dialling the connection; a non-nil error refuses the connection and is
// reported (wrapped in ErrGated) in an EventGated and, for a dial, by Dial.
type Gater interface {
	// GateAddr is asked before the handshake: for an inbound connection as soon as it is
	// accepted (a refused one is reset, nothing is read from it), for an outbound one once
	// TCP is connected.
	GateAddr(dir Direction, remote netip.AddrPort) error
	// GatePeer is asked once the handshake has authenticated the peer, before its session
	// is registered (a refused session is closed at once). Legacy TEA sessions have no peer
	// ID and are not asked.
	GatePeer(dir Direction, peer secio.PeerID, remote netip.AddrPort) error
}

// LimitError is the error of a connection refused by an admission limit. It matches
// ErrConnectionLimit.
type LimitError struct {
	// Limit names the limit, e.g. "inbound sessions per IP".
	Limit string
	// Max is its value.
	Max int
}

func (e *LimitError) Error() string {
	return fmt.Sprintf("%s: %s (%d)", ErrConnectionLimit.Error(), e.Limit, e.Max)
}

// Is makes errors.Is(err, ErrConnectionLimit) true.
func (e *LimitError) Is(target error) bool { return target == ErrConnectionLimit }

// validate reports the first problem of an Admission given the Config's MaxConnections.
func (a *Admission) validate() error {
	for _, f := range []struct {
		name string
		v    int
		neg1 bool // -1 allowed
	}{
		{"MaxHandshakes", a.MaxHandshakes, false},
		{"MaxHandshakesPerIP", a.MaxHandshakesPerIP, false},
		{"MaxInbound", a.MaxInbound, false},
		{"MaxOutbound", a.MaxOutbound, false},
		{"MaxInboundPerIP", a.MaxInboundPerIP, true},
		{"MaxInboundPerSubnet", a.MaxInboundPerSubnet, true},
		{"HighWater", a.HighWater, true},
		{"LowWater", a.LowWater, false},
	} {
		if f.v < 0 && !(f.neg1 && f.v == -1) {
			return configError("Admission.%s %d is negative", f.name, f.v)
		}
	}
	if a.IdleTimeout < 0 && a.IdleTimeout != -1 {
		return configError("Admission.IdleTimeout %v is negative", a.IdleTimeout)
	}
	if a.GracePeriod < 0 && a.GracePeriod != -1 {
		return configError("Admission.GracePeriod %v is negative", a.GracePeriod)
	}
	for _, p := range a.Unlimited {
		if !p.IsValid() {
			return configError("Admission.Unlimited: invalid prefix %v", p)
		}
	}
	return nil
}

// withDefaults returns a copy of a with every default filled in from maxConns (the resolved
// Config.MaxConnections), and checks what only the resolved values can show.
func (a Admission) withDefaults(maxConns int) (Admission, error) {
	a.MaxHandshakes = cmp.Or(a.MaxHandshakes, DefaultMaxHandshakes)
	a.MaxHandshakesPerIP = cmp.Or(a.MaxHandshakesPerIP, DefaultMaxHandshakesPerIP)
	a.MaxOutbound = cmp.Or(a.MaxOutbound, max(maxConns/4, 1))
	a.MaxInbound = cmp.Or(a.MaxInbound, max(maxConns-a.MaxOutbound, 1))
	a.MaxInboundPerIP = cmp.Or(a.MaxInboundPerIP, DefaultMaxInboundPerIP)
	a.MaxInboundPerSubnet = cmp.Or(a.MaxInboundPerSubnet, DefaultMaxInboundPerSubnet)
	if a.Unlimited == nil {
		a.Unlimited = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::1/128")}
	} else {
		a.Unlimited = slices.Clone(a.Unlimited)
	}
	a.HighWater = cmp.Or(a.HighWater, a.MaxInbound)
	if a.HighWater > 0 && a.LowWater == 0 {
		a.LowWater = a.HighWater - max(a.HighWater/8, 1)
	}
	a.IdleTimeout = cmp.Or(a.IdleTimeout, DefaultIdleTimeout)
	a.GracePeriod = cmp.Or(a.GracePeriod, DefaultGracePeriod)
	if a.HighWater > a.MaxInbound {
		return a, configError("Admission.HighWater %d above MaxInbound %d", a.HighWater, a.MaxInbound)
	}
	if a.HighWater > 0 && a.LowWater >= a.HighWater {
		return a, configError("Admission.LowWater %d not below HighWater %d", a.LowWater, a.HighWater)
	}
	return a, nil
}

// admission is the Service's count of what it admitted. Guarded by Service.mu.
type admission struct {
	cfg        Admission
	evictAge   time.Duration        // how old a handshake must be to be evicted
	inbound    int                  // inbound sessions
	outbound   int                  // outbound sessions and dials in progress
	handshakes []*handshake         // inbound handshakes in progress, oldest first
	hsPerIP    map[netip.Addr]int   // inbound handshakes by IP (limited addresses only)
	perIP      map[netip.Addr]int   // inbound sessions by IP (limited addresses only)
	perSubnet  map[netip.Prefix]int // inbound sessions by /24 or /64 (limited addresses only)
	trimming   bool                 // a trim is running: others leave it the work

	// Inbound sessions in the order they were registered, with the time the idle timeout
	// checks them: IdleTimeout is the same for all, so the queue is sorted, and one timer
	// for the Service (armed for its head) replaces a timer per session.
	idleQ     []idleCheck
	idleTimer *time.Timer
	idleArmed bool
}

type idleCheck struct {
	id uint64 // the session's ID: a closed session is not kept alive by the queue
	at time.Time
}

func newAdmission(cfg Admission, handshakeTimeout time.Duration) admission {
	return admission{
		cfg:       cfg,
		evictAge:  min(time.Second, handshakeTimeout/4),
		hsPerIP:   make(map[netip.Addr]int),
		perIP:     make(map[netip.Addr]int),
		perSubnet: make(map[netip.Prefix]int),
	}
}

// handshake is an inbound handshake in progress.
type handshake struct {
	cancel context.CancelCauseFunc
	start  time.Time
}

// admitted is what admission counted for one connection, released exactly once: by
// setup if no session comes of it, by unregister otherwise.
type admitted struct {
	remote  netip.AddrPort // unmapped
	hs      *handshake     // inbound: the handshake slot, until the handshake ends
	dir     Direction
	limited bool // the IP is subject to the per-IP caps (not in Unlimited)
	counted bool // counted in inbound/outbound (and, if limited, per IP and subnet)
}

func (ad *admitted) ip() netip.Addr { return ad.remote.Addr() }

// subnet is the network an IP's per-subnet cap counts: its /24 (IPv4) or /64 (IPv6).
func subnet(ip netip.Addr) netip.Prefix {
	bits := 64
	if ip.Is4() {
		bits = 24
	}
	p, _ := ip.Prefix(bits)
	return p
}

// remoteAddrPort returns a connection's remote address, unmapped (zero if it is not IP).
func remoteAddrPort(c net.Conn) netip.AddrPort {
	if tc, ok := c.RemoteAddr().(*net.TCPAddr); ok {
		ap := tc.AddrPort()
		return netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
	}
	return netip.AddrPort{}
}

func (a *admission) isLimited(ip netip.Addr) bool {
	if !ip.IsValid() {
		return false
	}
	for _, p := range a.cfg.Unlimited {
		if p.Contains(ip) {
			return false
		}
	}
	return true
}

// sessionCapLocked reports the per-IP or per-subnet cap an inbound session from ip would
// exceed, if any.
func (a *admission) sessionCapLocked(ip netip.Addr) error {
	if n := a.cfg.MaxInboundPerIP; n > 0 && a.perIP[ip] >= n {
		return &LimitError{Limit: "inbound sessions per IP", Max: n}
	}
	if n := a.cfg.MaxInboundPerSubnet; n > 0 && a.perSubnet[subnet(ip)] >= n {
		return &LimitError{Limit: "inbound sessions per subnet", Max: n}
	}
	return nil
}

// admitInbound takes a handshake slot for a connection just accepted from remote, or says
// which limit refuses it. The handshake's context is ctx (the caller derives it from the
// Service's); evicting it cancels it with ErrHandshakeEvicted.
func (s *Service) admitInbound(ctx context.Context, remote netip.AddrPort) (context.Context, admitted, error) {
	ad := admitted{dir: Inbound, remote: remote}
	s.mu.Lock()
	defer s.mu.Unlock()
	a := &s.adm
	if s.closed {
		return nil, ad, ErrServiceClosed
	}
	ad.limited = a.isLimited(ad.ip())
	if ad.limited {
		if err := a.sessionCapLocked(ad.ip()); err != nil {
			return nil, ad, err
		}
		if n := a.cfg.MaxHandshakesPerIP; a.hsPerIP[ad.ip()] >= n {
			return nil, ad, &LimitError{Limit: "handshakes per IP", Max: n}
		}
	}
	now := time.Now()
	if len(a.handshakes) >= a.cfg.MaxHandshakes {
		oldest := a.handshakes[0]
		if now.Sub(oldest.start) < a.evictAge {
			return nil, ad, &LimitError{Limit: "handshakes in progress", Max: a.cfg.MaxHandshakes}
		}
		// Its setup releases the rest of its count when the handshake fails.
		a.handshakes = a.handshakes[1:]
		oldest.cancel(ErrHandshakeEvicted)
	}
	hctx, cancel := context.WithCancelCause(ctx)
	ad.hs = &handshake{cancel: cancel, start: now}
	a.handshakes = append(a.handshakes, ad.hs)
	if ad.limited {
		a.hsPerIP[ad.ip()]++
	}
	return hctx, ad, nil
}

// admitOutbound takes an outbound slot for a dial.
func (s *Service) admitOutbound() (admitted, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return admitted{}, ErrServiceClosed
	}
	if n := s.adm.cfg.MaxOutbound; s.adm.outbound >= n {
		return admitted{}, &LimitError{Limit: "outbound sessions", Max: n}
	}
	s.adm.outbound++
	return admitted{dir: Outbound, counted: true}, nil
}

// endHandshakeLocked gives back an inbound handshake slot (once).
func (s *Service) endHandshakeLocked(ad *admitted) {
	if ad.hs == nil {
		return
	}
	a := &s.adm
	if i := slices.Index(a.handshakes, ad.hs); i >= 0 {
		a.handshakes = slices.Delete(a.handshakes, i, i+1)
	}
	ad.hs.cancel(nil)
	ad.hs = nil
	if ad.limited {
		if a.hsPerIP[ad.ip()]--; a.hsPerIP[ad.ip()] <= 0 {
			delete(a.hsPerIP, ad.ip())
		}
	}
}

// releaseLocked gives back everything ad holds.
func (s *Service) releaseLocked(ad *admitted) {
	s.endHandshakeLocked(ad)
	if !ad.counted {
		return
	}
	ad.counted = false
	a := &s.adm
	if ad.dir == Outbound {
		a.outbound--
		return
	}
	a.inbound--
	if ad.limited {
		if a.perIP[ad.ip()]--; a.perIP[ad.ip()] <= 0 {
			delete(a.perIP, ad.ip())
		}
		sn := subnet(ad.ip())
		if a.perSubnet[sn]--; a.perSubnet[sn] <= 0 {
			delete(a.perSubnet, sn)
		}
	}
}

func (s *Service) release(ad *admitted) {
	s.mu.Lock()
	s.releaseLocked(ad)
	s.mu.Unlock()
}

// admitSessionLocked counts a handshaken inbound session (the handshake slot is given back)
// or says which limit refuses it. Outbound sessions hold their slot since the dial.
func (s *Service) admitSessionLocked(ad *admitted) error {
	s.endHandshakeLocked(ad)
	if ad.dir != Inbound || ad.counted {
		return nil
	}
	a := &s.adm
	if ad.limited {
		if err := a.sessionCapLocked(ad.ip()); err != nil {
			return err
		}
	}
	if n := a.cfg.MaxInbound; a.inbound >= n {
		return &LimitError{Limit: "inbound sessions", Max: n}
	}
	a.inbound++
	if ad.limited {
		a.perIP[ad.ip()]++
		a.perSubnet[subnet(ad.ip())]++
	}
	ad.counted = true
	return nil
}

// gatePeer asks the Gater about an authenticated peer.
func (s *Service) gatePeer(sess *Session) error {
	g := s.cfg.Admission.Gater
	if g == nil || !sess.secure {
		return nil
	}
	if err := g.GatePeer(sess.dir, sess.peer, sess.adm.remote); err != nil {
		return fmt.Errorf("%w: peer %s: %w", ErrGated, sess.peer, err)
	}
	return nil
}

// gateAddr asks the Gater about a remote address before the handshake.
func (s *Service) gateAddr(dir Direction, remote netip.AddrPort) error {
	g := s.cfg.Admission.Gater
	if g == nil {
		return nil
	}
	if err := g.GateAddr(dir, remote); err != nil {
		return fmt.Errorf("%w: %v: %w", ErrGated, remote, err)
	}
	return nil
}
