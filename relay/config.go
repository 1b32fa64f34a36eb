package relay

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/tendril-p2p/tendril/internal/defaults"
	"github.com/tendril-p2p/tendril/secio"
)

// RelayConfig bounds what a Relay does for others. A zero field takes its default
// (DefaultRelayConfig); NewRelay copies the Config. Everything a circuit holds on the
// relay is also charged to the Service's own budgets: its two streams count against each
// session's mux limits and memory budgets (Config.MaxSessionMemory, MaxMemory), and the
// sessions they run on were admitted like any other (Config.Admission).
type RelayConfig struct {
	// ReservationTTL is how long a reservation lasts unless refreshed (default 1 h). A
	// reservation also ends with the session it was made on.
	ReservationTTL time.Duration
	// MaxReservations bounds the reservations held at once (default 128);
	// MaxReservationsPerIP and MaxReservationsPerSubnet those from one IP address and from
	// one /24 (IPv4) or /64 (IPv6), as the sessions' remote addresses say (defaults 4 and
	// 16; -1: no cap; loopback and non-IP transports are exempt, as from the Service's
	// admission). Stale reservations (expired, or their session gone) are pruned when
	// room runs out.
	MaxReservations          int
	MaxReservationsPerIP     int
	MaxReservationsPerSubnet int
	// ReservationRate and ReservationBurst bound new reservations, all peers together,
	// per second (defaults 4 and 32); refreshes do not count.
	ReservationRate  int
	ReservationBurst int

	// MaxCircuits bounds the circuits open at once, those being set up included (default
	// 64); MaxCircuitsPerPeer those one peer is an end of, as dialer or target (default 8).
	MaxCircuits        int
	MaxCircuitsPerPeer int
	// ConnectRate and ConnectBurst bound circuit requests that pass the counts above, all
	// peers together, per second (defaults 16 and 64): each costs a stream to the target.
	ConnectRate  int
	ConnectBurst int

	// MaxCircuitBytes bounds what one circuit carries in each direction, frame headers
	// included (default 1 MiB); MaxCircuitDuration its life (default 5 min). When either
	// is reached the relay closes the circuit and tells both ends why (ErrCircuitBytes,
	// ErrCircuitDuration). The defaults carry a handshake (about 5 KiB), the coordination
	// of a hole punch and a low-rate conversation, and keep a relay's bandwidth to at most
	// MaxCircuits x 2 MiB per five minutes: a relay is a way to meet, not a tunnel. Raise
	// them for a relay meant to carry sessions that cannot go direct.
	MaxCircuitBytes    int64
	MaxCircuitDuration time.Duration

	// RequestInterval and RequestBurst rate-limit hop requests (reservations and circuits
	// alike) per peer: a burst of RequestBurst, then one per RequestInterval (defaults
	// 1 s and 8). Requests beyond are answered StatusRateLimited before any other work.
	// The state of at most MaxTrackedPeers peers is kept (default 1024).
	RequestInterval time.Duration
	RequestBurst    int
	MaxTrackedPeers int

	// RequestTimeout bounds the wait for a hop request once its stream is open (default
	// 10 s); ConnectTimeout the stop exchange with the target (default 10 s).
	RequestTimeout time.Duration
	ConnectTimeout time.Duration

	// Logger receives debug logs of refused requests and closed circuits. Nil: silent.
	Logger *slog.Logger
}

// DefaultRelayConfig returns the defaults of RelayConfig.
func DefaultRelayConfig() RelayConfig {
	return RelayConfig{
		ReservationTTL:           time.Hour,
		MaxReservations:          128,
		MaxReservationsPerIP:     4,
		MaxReservationsPerSubnet: 16,
		ReservationRate:          4,
		ReservationBurst:         32,
		MaxCircuits:              64,
		MaxCircuitsPerPeer:       8,
		ConnectRate:              16,
		ConnectBurst:             64,
		MaxCircuitBytes:          1 << 20,
		MaxCircuitDuration:       5 * time.Minute,
		RequestInterval:          time.Second,
		RequestBurst:             8,
		MaxTrackedPeers:          1024,
		RequestTimeout:           10 * time.Second,
		ConnectTimeout:           10 * time.Second,
	}
}

func (c RelayConfig) withDefaults() RelayConfig {
	d := DefaultRelayConfig()
	defaults.Set(&c.ReservationTTL, d.ReservationTTL)
	defaults.Set(&c.MaxReservations, d.MaxReservations)
	defaults.Set(&c.MaxReservationsPerIP, d.MaxReservationsPerIP)
	defaults.Set(&c.MaxReservationsPerSubnet, d.MaxReservationsPerSubnet)
	defaults.Set(&c.ReservationRate, d.ReservationRate)
	defaults.Set(&c.ReservationBurst, d.ReservationBurst)
	defaults.Set(&c.MaxCircuits, d.MaxCircuits)
	defaults.Set(&c.MaxCircuitsPerPeer, d.MaxCircuitsPerPeer)
	defaults.Set(&c.ConnectRate, d.ConnectRate)
	defaults.Set(&c.ConnectBurst, d.ConnectBurst)
	defaults.Set(&c.MaxCircuitBytes, d.MaxCircuitBytes)
	defaults.Set(&c.MaxCircuitDuration, d.MaxCircuitDuration)
	defaults.Set(&c.RequestInterval, d.RequestInterval)
	defaults.Set(&c.RequestBurst, d.RequestBurst)
	defaults.Set(&c.MaxTrackedPeers, d.MaxTrackedPeers)
	defaults.Set(&c.RequestTimeout, d.RequestTimeout)
	defaults.Set(&c.ConnectTimeout, d.ConnectTimeout)
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

// Validate reports whether c, its zero fields taking their defaults, is usable. Its
// errors wrap ErrInvalidConfig.
func (c *RelayConfig) Validate() error {
	r := c.withDefaults()
	for _, f := range []struct {
		name string
		v    int64
		min  int64
	}{
		{"ReservationTTL", int64(r.ReservationTTL), int64(time.Second)},
		{"MaxReservations", int64(r.MaxReservations), 1},
		{"MaxReservationsPerIP", int64(r.MaxReservationsPerIP), -1},
		{"MaxReservationsPerSubnet", int64(r.MaxReservationsPerSubnet), -1},
		{"ReservationRate", int64(r.ReservationRate), 1},
		{"ReservationBurst", int64(r.ReservationBurst), 1},
		{"MaxCircuits", int64(r.MaxCircuits), 1},
		{"MaxCircuitsPerPeer", int64(r.MaxCircuitsPerPeer), 1},
		{"ConnectRate", int64(r.ConnectRate), 1},
		{"ConnectBurst", int64(r.ConnectBurst), 1},
		{"MaxCircuitBytes", r.MaxCircuitBytes, maxFrame + maxHeader},
		{"MaxCircuitDuration", int64(r.MaxCircuitDuration), int64(time.Second)},
		{"RequestInterval", int64(r.RequestInterval), 1},
		{"RequestBurst", int64(r.RequestBurst), 1},
		{"MaxTrackedPeers", int64(r.MaxTrackedPeers), 1},
		{"RequestTimeout", int64(r.RequestTimeout), 1},
		{"ConnectTimeout", int64(r.ConnectTimeout), 1},
	} {
		if f.v < f.min {
			return fmt.Errorf("%w: %s %d below %d", ErrInvalidConfig, f.name, f.v, f.min)
		}
	}
	switch {
	case r.ReservationTTL > maxSeconds*time.Second:
		return fmt.Errorf("%w: ReservationTTL %v above a day", ErrInvalidConfig, r.ReservationTTL)
	case r.MaxCircuitDuration > maxSeconds*time.Second:
		return fmt.Errorf("%w: MaxCircuitDuration %v above a day", ErrInvalidConfig, r.MaxCircuitDuration)
	}
	return nil
}

// ClientConfig shapes a Client: the side that reserves slots on relays and accepts the
// circuits they bring. A zero field takes its default; NewClient copies the Config.
type ClientConfig struct {
	// Accept, if set, decides whether to accept a circuit from dialer through relay
	// (dialer as the relay names it; the handshake through the circuit must then prove
	// that identity, or the session is closed). Nil: accept all.
	Accept func(dialer, relay secio.PeerID) bool
	// AnyRelay accepts circuits from any connected peer acting as relay. Off by default:
	// only relays this Client holds a reservation with may bring circuits, so that no
	// peer can make this node run handshakes through it unasked.
	AnyRelay bool
	// MaxCircuits bounds the relayed sessions (and their handshakes) this Client serves at
	// once, through all relays (default 16): a relay, even a hostile one, can make this
	// node hold no more. Each also takes the Service's handshake and inbound slots
	// (counted against its global limits: a relayed connection has no IP address).
	MaxCircuits int
	// RequestTimeout bounds the wait for a stop request once its stream is open, and for
	// a relay's answer to a reservation whose context has no deadline (default 10 s).
	RequestTimeout time.Duration
	// RetryInterval is the first wait after a failed refresh of a reservation; the waits
	// double up to MaxRetryInterval (defaults 5 s and 5 min).
	RetryInterval    time.Duration
	MaxRetryInterval time.Duration
	// Logger receives debug logs of refused circuits and failed refreshes. Nil: silent.
	Logger *slog.Logger
}

// DefaultClientConfig returns the defaults of ClientConfig.
func DefaultClientConfig() ClientConfig {
	return ClientConfig{
		MaxCircuits:      16,
		RequestTimeout:   10 * time.Second,
		RetryInterval:    5 * time.Second,
		MaxRetryInterval: 5 * time.Minute,
	}
}

func (c ClientConfig) withDefaults() ClientConfig {
	d := DefaultClientConfig()
	defaults.Set(&c.MaxCircuits, d.MaxCircuits)
	defaults.Set(&c.RequestTimeout, d.RequestTimeout)
	defaults.Set(&c.RetryInterval, d.RetryInterval)
	defaults.Set(&c.MaxRetryInterval, d.MaxRetryInterval)
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

// Validate reports whether c, its zero fields taking their defaults, is usable. Its
// errors wrap ErrInvalidConfig.
func (c *ClientConfig) Validate() error {
	r := c.withDefaults()
	switch {
	case r.MaxCircuits < 1:
		return fmt.Errorf("%w: MaxCircuits %d below 1", ErrInvalidConfig, r.MaxCircuits)
	case r.RequestTimeout < 0 || r.RetryInterval < 0:
		return fmt.Errorf("%w: negative duration", ErrInvalidConfig)
	case r.MaxRetryInterval < r.RetryInterval:
		return fmt.Errorf("%w: MaxRetryInterval %v < RetryInterval %v", ErrInvalidConfig, r.MaxRetryInterval, r.RetryInterval)
	}
	return nil
}
