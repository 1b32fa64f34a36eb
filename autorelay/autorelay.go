// Package autorelay keeps a node that cannot be dialled reachable: while the node needs it
// (Config.Needed, typically "reach does not say this node is public"), it holds
// reservations on up to MaxRelays of its connected peers that serve the relay protocol
// (their identify says so), and publishes the circuit addresses at which it can then be
// dialled (Addrs, Config.OnChange), for identify to put in the node's record. Peers that
// dial such an address reach it through the relay; package holepunch then turns the
// relayed session into a direct one where the NATs allow.
//
// Bounds: at most MaxRelays reservations, one attempt per Interval, a relay that refused
// waits RetryAfter before it is asked again (the peers remembered are those with sessions).
package autorelay

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	ma "github.com/multiformats/go-multiaddr"

	"github.com/tendril-p2p/tendril"
	"github.com/tendril-p2p/tendril/identify"
	"github.com/tendril-p2p/tendril/internal/defaults"
	"github.com/tendril-p2p/tendril/relay"
	"github.com/tendril-p2p/tendril/secio"
)

// Defaults of Config.
const (
	DefaultMaxRelays  = 2
	DefaultInterval   = time.Second
	DefaultRetryAfter = time.Minute
	reserveTimeout    = 10 * time.Second
)

// ErrInvalidConfig reports a Config that New refuses.
var ErrInvalidConfig = errors.New("autorelay: invalid config")

// Config configures an AutoRelay. The zero value is usable.
type Config struct {
	// MaxRelays is how many reservations to hold. Default DefaultMaxRelays.
	MaxRelays int
	// Needed reports whether the node needs relays now. Nil: always.
	Needed func() bool
	// Relays lists relays to use besides the connected peers that serve the protocol
	// (dialled when needed, each with its /p2p/ID).
	Relays []tendril.Addr
	// Public reports whether an address of a relay's may be published as the start of a
	// circuit address (others cannot reach a relay at a private one). Nil: every
	// address.
	Public func(ma.Multiaddr) bool
	// OnChange is called, from the AutoRelay's goroutine, with the circuit addresses
	// whenever they change.
	OnChange func([]ma.Multiaddr)
	// Interval is how often the AutoRelay looks at its reservations and the sessions.
	// Default DefaultInterval.
	Interval time.Duration
	// RetryAfter is how long a relay that refused a reservation is left alone. Default
	// DefaultRetryAfter.
	RetryAfter time.Duration
	// Logger receives debug logs. Nil: silent.
	Logger *slog.Logger
}

// AutoRelay holds relay reservations while the node needs them. Create it with New; Close
// it before the Client and the Service.
type AutoRelay struct {
	svc *tendril.Service
	id  *identify.Identify
	cl  *relay.Client
	cfg Config
	log *slog.Logger
	sub *tendril.Subscription

	ctx    context.Context
	cancel context.CancelFunc
	done   chan struct{}

	mu      sync.Mutex // guards held, addrs, refused
	held    map[secio.PeerID]*relay.Reservation
	addrs   []ma.Multiaddr
	refused map[secio.PeerID]time.Time // relays that refused, until when they are left alone
}

// New starts an AutoRelay that reserves through cl.
func New(svc *tendril.Service, id *identify.Identify, cl *relay.Client, cfg Config) (*AutoRelay, error) {
	if svc == nil || id == nil || cl == nil {
		return nil, fmt.Errorf("%w: a Service, an Identify and a relay Client are required", ErrInvalidConfig)
	}
	if cfg.MaxRelays < 0 || cfg.Interval < 0 || cfg.RetryAfter < 0 {
		return nil, fmt.Errorf("%w: negative value", ErrInvalidConfig)
	}
	for _, r := range cfg.Relays {
		if r.Peer.IsZero() {
			return nil, fmt.Errorf("%w: relay %s has no /p2p/ID", ErrInvalidConfig, r)
		}
	}
	defaults.Set(&cfg.MaxRelays, DefaultMaxRelays)
	defaults.Set(&cfg.Interval, DefaultInterval)
	defaults.Set(&cfg.RetryAfter, DefaultRetryAfter)
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	a := &AutoRelay{
		svc: svc, id: id, cl: cl, cfg: cfg, log: cfg.Logger,
		sub:     svc.Subscribe(0),
		done:    make(chan struct{}),
		held:    make(map[secio.PeerID]*relay.Reservation),
		refused: make(map[secio.PeerID]time.Time),
	}
	a.ctx, a.cancel = context.WithCancel(context.Background())
	go a.run()
	return a, nil
}

// Close gives up the reservations and stops.
func (a *AutoRelay) Close() error {
	a.cancel()
	a.sub.Close()
	<-a.done
	a.mu.Lock()
	defer a.mu.Unlock()
	for p, r := range a.held {
		r.Close()
		delete(a.held, p)
	}
	return nil
}

// Addrs returns the circuit addresses of the reservations held: each relay's address,
// then /p2p/RELAY/p2p-circuit (a peer dials it with /p2p/THIS-NODE after it).
func (a *AutoRelay) Addrs() []ma.Multiaddr {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Clone(a.addrs)
}

// Relays returns the peers this node holds reservations with.
func (a *AutoRelay) Relays() []secio.PeerID {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := make([]secio.PeerID, 0, len(a.held))
	for p := range a.held {
		out = append(out, p)
	}
	return out
}

func (a *AutoRelay) run() {
	defer close(a.done)
	tick := time.NewTicker(a.cfg.Interval)
	defer tick.Stop()
	for {
		a.step()
		select {
		case <-tick.C:
		case _, ok := <-a.sub.C(): // sessions and protocols change: look again soon
			if !ok {
				return
			}
			select { // coalesce a burst of events into one step
			case <-time.After(50 * time.Millisecond):
			case <-a.ctx.Done():
				return
			}
		case <-a.ctx.Done():
			return
		}
	}
}

// step drops what is no longer needed or working, and reserves on new relays.
func (a *AutoRelay) step() {
	needed := a.cfg.Needed == nil || a.cfg.Needed()
	now := time.Now()
	a.mu.Lock()
	for p, r := range a.held {
		gone := a.svc.Session(p) == nil && r.Err() != nil // its session closed and remaking it failed
		if !needed || gone {
			r.Close()
			delete(a.held, p)
		}
	}
	for p, until := range a.refused {
		if now.After(until) || a.svc.Session(p) == nil {
			delete(a.refused, p)
		}
	}
	want := a.cfg.MaxRelays - len(a.held)
	a.mu.Unlock()
	if needed && want > 0 {
		for _, c := range a.candidates() {
			if want == 0 || a.ctx.Err() != nil {
				break
			}
			ctx, cancel := context.WithTimeout(a.ctx, reserveTimeout)
			r, err := a.cl.Reserve(ctx, c)
			cancel()
			a.mu.Lock()
			if err != nil {
				a.refused[c.Peer] = time.Now().Add(a.cfg.RetryAfter)
				a.log.Debug("autorelay: reservation failed", "relay", c, "err", err)
			} else if a.ctx.Err() != nil {
				r.Close()
			} else {
				a.held[c.Peer] = r
				want--
				a.log.Debug("autorelay: reserved", "relay", c)
			}
			a.mu.Unlock()
		}
	}
	a.publish()
}

// candidates returns relays to ask, in order: the configured ones, then connected peers
// whose identify lists the hop protocol, at an address others can reach them at.
func (a *AutoRelay) candidates() []tendril.Addr {
	a.mu.Lock()
	skip := func(p secio.PeerID) bool {
		_, held := a.held[p]
		_, refused := a.refused[p]
		return held || refused
	}
	var out []tendril.Addr
	for _, r := range a.cfg.Relays {
		if !skip(r.Peer) {
			out = append(out, r)
		}
	}
	a.mu.Unlock()
	for _, s := range a.svc.Sessions() {
		p := s.Peer()
		if s.Relayed() || p.IsZero() {
			continue
		}
		a.mu.Lock()
		sk := skip(p)
		a.mu.Unlock()
		if sk || slices.ContainsFunc(out, func(x tendril.Addr) bool { return x.Peer == p }) {
			continue
		}
		info, ok := a.id.Info(p)
		if !ok || !slices.ContainsFunc(info.Protocols, func(pv identify.ProtoVersions) bool { return pv.Name == relay.HopProtocol }) {
			continue
		}
		if addr, ok := a.reachableAt(s, info); ok {
			out = append(out, addr)
		}
	}
	return out
}

// reachableAt returns an address at which others can reach the relay behind s: the one
// this node dialled, or else the first allowed address of its signed record.
func (a *AutoRelay) reachableAt(s *tendril.Session, info identify.Info) (tendril.Addr, bool) {
	ok := func(m ma.Multiaddr) bool {
		return len(m) > 0 && (a.cfg.Public == nil || a.cfg.Public(m)) && !isCircuit(m)
	}
	if s.Direction() == tendril.Outbound && ok(s.RemoteAddr().Transport) {
		return tendril.Addr{Transport: s.RemoteAddr().Transport, Peer: s.Peer()}, true
	}
	if info.Record != nil {
		for _, m := range info.Record.Addrs() {
			if ok(m) {
				return tendril.Addr{Transport: m, Peer: s.Peer()}, true
			}
		}
	}
	return tendril.Addr{}, false
}

// publish recomputes the circuit addresses and reports a change.
func (a *AutoRelay) publish() {
	a.mu.Lock()
	var addrs []ma.Multiaddr
	for _, r := range a.held {
		if m, err := CircuitAddr(r.Relay()); err == nil {
			addrs = append(addrs, m)
		}
	}
	slices.SortFunc(addrs, func(x, y ma.Multiaddr) int { return compareBytes(x.Bytes(), y.Bytes()) })
	changed := !slices.EqualFunc(addrs, a.addrs, func(x, y ma.Multiaddr) bool { return x.Equal(y) })
	a.addrs = addrs
	a.mu.Unlock()
	if changed && a.cfg.OnChange != nil {
		a.cfg.OnChange(slices.Clone(addrs))
	}
}

func compareBytes(x, y []byte) int { return slices.Compare(x, y) }

// CircuitAddr is the address of this node through the relay at r: r's transport address
// and /p2p-circuit, the form of a relayed session's RemoteAddr (a dialer appends
// /p2p/TARGET). The relay's peer ID is not part of it: a multiaddr cannot carry a tendril
// peer ID (go-multiaddr's /p2p/ takes only SHA-256 and identity multihashes). Dial finds
// the relay's ID from the session with it, or learns it by dialling the relay; the target's
// identity is verified end to end either way.
func CircuitAddr(r tendril.Addr) (ma.Multiaddr, error) {
	if len(r.Transport) == 0 || isCircuit(r.Transport) {
		return nil, fmt.Errorf("%w: relay address %s", ErrInvalidConfig, r)
	}
	c, err := ma.NewComponent("p2p-circuit", "")
	if err != nil {
		return nil, err
	}
	out := make(ma.Multiaddr, 0, len(r.Transport)+1)
	out = append(out, r.Transport...)
	return append(out, *c), nil
}

// IsCircuit reports whether m is a circuit address (it has /p2p-circuit).
func IsCircuit(m ma.Multiaddr) bool { return isCircuit(m) }

func isCircuit(m ma.Multiaddr) bool {
	for _, c := range m {
		if c.Protocol().Code == ma.P_CIRCUIT {
			return true
		}
	}
	return false
}

// Dial dials addr through its relay if it is a circuit address (CircuitAddr's form, with
// addr.Peer the target), directly otherwise (svc.Dial): a dial function for
// connmgr.Config.Dial. The relay is the peer of this node's direct session at the relay's
// address if there is one; otherwise the address is dialled, and whoever answers there
// relays (the target's identity is verified end to end through the circuit).
func Dial(ctx context.Context, svc *tendril.Service, addr tendril.Addr) (*tendril.Session, error) {
	if !isCircuit(addr.Transport) {
		return svc.Dial(ctx, addr)
	}
	if addr.Peer.IsZero() {
		return nil, fmt.Errorf("%w: %s: a circuit address needs the target's /p2p/ID", relay.ErrInvalidCircuit, addr)
	}
	at := relayTransport(addr.Transport)
	if len(at) == 0 || isCircuit(at) {
		return nil, fmt.Errorf("%w: %s", relay.ErrInvalidCircuit, addr)
	}
	var relayID secio.PeerID
	for _, s := range svc.Sessions() {
		if !s.Relayed() && s.Direction() == tendril.Outbound && s.RemoteAddr().Transport.Equal(at) {
			relayID = s.Peer()
			break
		}
	}
	if relayID.IsZero() {
		s, err := svc.Dial(ctx, tendril.Addr{Transport: at})
		if err != nil {
			return nil, fmt.Errorf("autorelay: dial relay %s: %w", at, err)
		}
		relayID = s.Peer()
	}
	if relayID == addr.Peer { // the target itself answers at the relay's address
		return svc.Session(addr.Peer), nil
	}
	return relay.Dial(ctx, svc, relay.Circuit{Relay: tendril.Addr{Transport: at, Peer: relayID}, Target: addr.Peer})
}

// relayTransport returns the part of a circuit address before /p2p-circuit.
func relayTransport(m ma.Multiaddr) ma.Multiaddr {
	for i, c := range m {
		if c.Protocol().Code == ma.P_CIRCUIT {
			return m[:i]
		}
	}
	return m
}
