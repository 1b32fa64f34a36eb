package tendril

// Admission control: which connections a Service takes, and which sessions it lets go when
// it must make room. Modelled on go-libp2p's resource manager (limits by direction and by
// address), connection manager (low/high watermarks, protected peers) and ConnectionGater
// (bans by address before the handshake, by peer ID after it), so that no stranger can lock
// a node out:
//
//   - handshakes in progress have their own small budget, capped per IP and per subnet; a
//     handshake is silent until its first message has arrived in full, and a newcomer that
//     finds no room takes the slot of the oldest silent one (in its subnet, if that is what
//     is full), whatever its age: sockets that never speak hold a slot only until someone
//     needs it, never the session budgets;
//   - each subnet may start only so many handshakes per second (counted when the first
//     message arrives), which bounds the key exchanges and signatures it can make the node
//     compute;
//   - inbound and outbound sessions have separate budgets, so inbound load never blocks
//     dialling out;
//   - inbound sessions are capped per IP and per subnet (/24 for IPv4, /64 for IPv6), except
//     from the Unlimited networks (loopback by default);
//   - when inbound sessions reach the high watermark, those with no protocol open are closed,
//     oldest first, down to the low watermark (the application can protect sessions), and an
//     inbound session that never opens a protocol is closed after IdleTimeout.
//
// The arithmetic (counts, slots, eviction, rates, trim victims, idle checks) is
// internal/admit's Ledger; this file and trim.go are its glue: the Service's lock around
// it, the contexts of handshakes it evicts, the sessions it closes, the events.
//
// Every refusal is an event at the node (EventLimitReached or EventGated, rate-limited per
// address) and a typed error (*LimitError, ErrGated). The wire has no place for a reason
// before the handshake (the connection is reset), nor after it at the connection level (the
// session is closed); refused protocol streams get a typed refusal (protocol.RefusedError).

import (
	"cmp"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"syscall"
	"time"

	"github.com/tendril-p2p/tendril/internal/admit"
	"github.com/tendril-p2p/tendril/secio"
	"github.com/tendril-p2p/tendril/transport"
)

// Defaults of Admission.
const (
	DefaultMaxHandshakes          = 64
	DefaultMaxHandshakesPerIP     = 4
	DefaultMaxHandshakesPerSubnet = 16
	DefaultHandshakeRate          = 8
	DefaultHandshakeBurst         = 32
	DefaultMaxInboundPerIP        = 8
	DefaultMaxInboundPerSubnet    = 32
	DefaultIdleTimeout            = 30 * time.Second
	DefaultGracePeriod            = time.Second
	DefaultHandlerExitTimeout     = 5 * time.Second
)

// Admission configures which connections a Service accepts and which inbound sessions it
// closes to make room. The zero value means the defaults; a field set to -1 disables what
// it bounds (where noted).
type Admission struct {
	// MaxHandshakes bounds inbound handshakes in progress. Default DefaultMaxHandshakes.
	// A handshake is silent until the dialer's first message (its ClientHello) has arrived
	// in full, which a dialer sends at once: the Service looks, without reading, when it
	// accepts the connection, and counts the bytes its handshake reads after that. When
	// all slots are taken, a new connection aborts the oldest silent handshake, whatever
	// its age (it fails with ErrHandshakeEvicted): a socket that has said nothing costs its
	// holder nothing, so it keeps its slot only until someone needs it. If none is silent,
	// the new connection aborts the oldest handshake if that has run for a second (or a
	// quarter of HandshakeTimeout, if shorter): a handshake takes a few round trips, so the
	// one that has held its slot longest is the likeliest to be stalling. Otherwise the
	// new connection is reset.
	MaxHandshakes int
	// MaxHandshakesPerIP bounds inbound handshakes in progress from one IP address (exempt:
	// Unlimited). Beyond it connections from that address are reset at once. Default
	// DefaultMaxHandshakesPerIP.
	MaxHandshakesPerIP int
	// MaxHandshakesPerSubnet bounds inbound handshakes in progress from one /24 (IPv4) or
	// /64 (IPv6), so that one network's sockets never hold more than this share of
	// MaxHandshakes (exempt: Unlimited). A connection from a subnet at the cap aborts that
	// subnet's oldest silent handshake (ErrHandshakeEvicted), or is reset if none is
	// silent. Default DefaultMaxHandshakesPerSubnet; -1: no cap.
	MaxHandshakesPerSubnet int
	// HandshakeRate bounds how many handshakes per second one /24 (IPv4) or /64 (IPv6) may
	// start, with HandshakeBurst at once (a token bucket per subnet; exempt: Unlimited). A
	// handshake starts, and is counted, when the dialer's first message has arrived in
	// full: that is when the listener would begin its key exchange and signature (about
	// 380 us for the default hybrid exchange), which this bounds; silent sockets are not
	// counted, so they cannot use up their neighbours' rate. Beyond it the connection is
	// reset (or its handshake aborted) before that work, with a *LimitError in an
	// EventLimitReached. The Service remembers the rates of at most 1,024 subnets at once;
	// docs/RELIABILITY.md says why these defaults. Defaults DefaultHandshakeRate (per
	// second) and DefaultHandshakeBurst; HandshakeRate -1: no limit.
	HandshakeRate  int
	HandshakeBurst int

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
	// sessions) and from HandshakeRate, as go-libp2p exempts loopback. Nil: 127.0.0.0/8
	// and ::1/128. An empty non-nil slice exempts nothing.
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
		{"MaxHandshakesPerSubnet", a.MaxHandshakesPerSubnet, true},
		{"HandshakeRate", a.HandshakeRate, true},
		{"HandshakeBurst", a.HandshakeBurst, false},
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
	a.MaxHandshakesPerSubnet = cmp.Or(a.MaxHandshakesPerSubnet, DefaultMaxHandshakesPerSubnet)
	a.HandshakeRate = cmp.Or(a.HandshakeRate, DefaultHandshakeRate)
	a.HandshakeBurst = cmp.Or(a.HandshakeBurst, DefaultHandshakeBurst)
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

// admission is the Service's admission state: the ledger, guarded by Service.mu, and the
// timer of the idle checks.
type admission struct {
	cfg    Admission
	ledger *admit.Ledger

	// One timer for the Service runs the idle checks (trim.go), armed for the ledger's
	// next one: IdleTimeout is the same for all, so a timer per session is not needed.
	idleTimer *time.Timer
}

// newAdmission returns the admission state; connections from trusted proxies are exempt
// from the per-address caps until they name their client (Service.readdress).
func newAdmission(cfg Admission, handshakeTimeout time.Duration, trusted []netip.Prefix) admission {
	lim := ledgerLimits(cfg, handshakeTimeout)
	lim.Unlimited = append(slices.Clip(lim.Unlimited), trusted...)
	return admission{cfg: cfg, ledger: admit.New(lim)}
}

// ledgerLimits are the ledger's limits from a resolved Admission (whose -1, none, is the
// ledger's "zero or less") and the eviction age of a handshake that has spoken.
func ledgerLimits(a Admission, handshakeTimeout time.Duration) admit.Limits {
	return admit.Limits{
		MaxHandshakes:          a.MaxHandshakes,
		MaxHandshakesPerIP:     a.MaxHandshakesPerIP,
		MaxHandshakesPerSubnet: a.MaxHandshakesPerSubnet,
		EvictAge:               min(time.Second, handshakeTimeout/4),
		HandshakeRate:          a.HandshakeRate,
		HandshakeBurst:         a.HandshakeBurst,
		MaxInbound:             a.MaxInbound,
		MaxOutbound:            a.MaxOutbound,
		MaxInboundPerIP:        a.MaxInboundPerIP,
		MaxInboundPerSubnet:    a.MaxInboundPerSubnet,
		Unlimited:              a.Unlimited,
		HighWater:              a.HighWater,
		LowWater:               a.LowWater,
		GracePeriod:            a.GracePeriod,
		IdleTimeout:            a.IdleTimeout,
	}
}

// limitError is the typed error of a refusal by the ledger.
func (a *admission) limitError(k admit.Limit) error {
	return &LimitError{Limit: k.String(), Max: a.ledger.Limits().Max(k)}
}

// admitted is what admission counted for one connection, released exactly once: by
// setup if no session comes of it, by unregister otherwise.
type admitted struct {
	dir Direction
	t   admit.Ticket
}

// ip is the remote address an inbound connection was admitted for (zero for outbound ones,
// which admission counts without an address).
func (ad *admitted) ip() netip.Addr { return ad.t.Addr() }

// admitInbound takes a handshake slot for a connection just accepted from remote, or says
// which limit refuses it; spoke says that the dialer's first message has already arrived
// (firstMessageIn). The handshake's context is ctx (the caller derives it from the
// Service's); evicting it cancels it with ErrHandshakeEvicted.
func (s *Service) admitInbound(ctx context.Context, remote netip.AddrPort, spoke bool) (context.Context, admitted, error) {
	ad := admitted{dir: Inbound}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, ad, ErrServiceClosed
	}
	t, evicted, k := s.adm.ledger.AdmitInbound(time.Now(), remote.Addr(), spoke)
	if k != admit.None {
		return nil, ad, s.adm.limitError(k)
	}
	if evicted != nil {
		// Its setup gives back its ticket when the handshake fails; the ledger has
		// already freed its slot.
		evicted.Cancel(ErrHandshakeEvicted)
	}
	hctx, cancel := context.WithCancelCause(ctx)
	t.Handshake().Cancel = cancel
	ad.t = t
	return hctx, ad, nil
}

// admitOutbound takes an outbound slot for a dial.
func (s *Service) admitOutbound() (admitted, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return admitted{}, ErrServiceClosed
	}
	t, k := s.adm.ledger.AdmitOutbound()
	if k != admit.None {
		return admitted{}, s.adm.limitError(k)
	}
	return admitted{dir: Outbound, t: t}, nil
}

// releaseLocked gives back everything ad holds, and cancels its handshake's context if
// the handshake was still running.
func (s *Service) releaseLocked(ad *admitted) {
	if h := ad.t.Handshake(); h != nil {
		h.Cancel(nil)
	}
	s.adm.ledger.Release(&ad.t)
}

func (s *Service) release(ad *admitted) {
	s.mu.Lock()
	s.releaseLocked(ad)
	s.mu.Unlock()
}

// admitSessionLocked counts a handshaken inbound session (the handshake slot is given back)
// or says which limit refuses it. Outbound sessions hold their slot since the dial.
func (s *Service) admitSessionLocked(ad *admitted) error {
	if h := ad.t.Handshake(); h != nil {
		h.Cancel(nil)
	}
	if k := s.adm.ledger.AdmitSession(&ad.t); k != admit.None {
		return s.adm.limitError(k)
	}
	return nil
}

// watchHello returns the connection an inbound handshake reads: raw, watched until the
// dialer's first message has arrived if it had not when the connection was accepted
// (helloConn).
func (s *Service) watchHello(raw net.Conn, ad *admitted) net.Conn {
	h := ad.t.Handshake()
	if h == nil || !h.Silent() {
		return raw
	}
	return &helloConn{Conn: raw, w: &helloWatch{s: s, h: h}}
}

// heard tells the ledger that h's first message has arrived, and returns the limit error
// that aborts the handshake, if the subnet's handshake rate refuses it.
func (s *Service) heard(h *admit.Handshake) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if k := s.adm.ledger.Heard(time.Now(), h); k != admit.None {
		return s.adm.limitError(k)
	}
	return nil
}

// helloConn is an accepted connection whose dialer had not sent its whole first handshake
// message when it was accepted, under its secio handshake: it counts the bytes read
// until that message (a 4-byte big-endian length, then that many bytes: docs/secio.md,
// section 2.1) has arrived in full. Then the ledger hears of it (Service.heard): the
// handshake has spoken, and its subnet's handshake rate is charged; if the rate refuses
// it, the Read that completed the message fails with the *LimitError instead of
// returning it, so secio spends nothing on it. From then on Read costs a nil check; the
// watch's state is dropped, and the connection stays under the secure connection for the
// session's life as 24 bytes. Everything else (deadlines, Close, addresses) is the
// embedded connection's; CloseWrite and SetLinger are passed on, for secio's close of the
// session.
type helloConn struct {
	net.Conn
	w *helloWatch // nil once the first message has arrived
}

// helloWatch counts the first message's bytes. Only the handshake's goroutine uses it.
type helloWatch struct {
	s      *Service
	h      *admit.Handshake
	got    uint64 // bytes read so far
	need   uint64 // the message's size with its length, once the length has arrived
	prefix [4]byte
}

func (c *helloConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if c.w == nil || n == 0 || !c.w.complete(p[:n]) {
		return n, err
	}
	return c.heard(n, err)
}

// heard ends the watch once the first message is in: the Read's result (n, err), or the
// ledger's refusal.
func (c *helloConn) heard(n int, err error) (int, error) {
	w := c.w
	c.w = nil
	if lerr := w.s.heard(w.h); lerr != nil {
		return 0, lerr
	}
	return n, err
}

// complete counts b, read from the connection, and reports whether the first message has
// now arrived in full.
func (w *helloWatch) complete(b []byte) bool {
	for len(b) > 0 && w.got < uint64(len(w.prefix)) {
		w.prefix[w.got] = b[0]
		w.got++
		b = b[1:]
	}
	if w.got < uint64(len(w.prefix)) {
		return false
	}
	if w.need == 0 {
		w.need = uint64(len(w.prefix)) + uint64(binary.BigEndian.Uint32(w.prefix[:]))
	}
	w.got += uint64(len(b))
	return w.got >= w.need
}

// SyscallConn passes the socket's on: secio asks it how much of a long record has arrived,
// to read the record straight into one buffer (helloConn's Read returns the socket's bytes
// unchanged, so what the socket holds is what secio will read).
func (c *helloConn) SyscallConn() (syscall.RawConn, error) {
	if sc, ok := c.Conn.(syscall.Conn); ok {
		return sc.SyscallConn()
	}
	return nil, errors.ErrUnsupported
}

// CloseWrite half-closes the connection if it can (secio's close waits for the peer's
// after its close record).
func (c *helloConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return fmt.Errorf("tendril: %T cannot half-close", c.Conn)
}

// SetLinger passes the socket's linger on: secio's close, on the listener's side, resets
// the connection once the peer has closed its side (see secio.Conn.Close), and a refused
// connection is reset (abortConn).
func (c *helloConn) SetLinger(sec int) error {
	if l, ok := c.Conn.(lingerer); ok {
		return l.SetLinger(sec)
	}
	return fmt.Errorf("tendril: %T has no linger", c.Conn)
}

// gatePeer asks the Gater about an authenticated peer.
func (s *Service) gatePeer(sess *Session) error {
	g := s.cfg.Admission.Gater
	if g == nil || !sess.secure {
		return nil
	}
	if err := g.GatePeer(sess.dir, sess.peer, transport.RemoteAddrPort(sess.conn)); err != nil {
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
