package connmgr

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"time"

	"github.com/tendril-p2p/tendril"
)

// Config shapes a Manager. A zero field takes its default (DefaultConfig); New copies
// the Config, so changing it afterwards has no effect.
type Config struct {
	// Target is the number of outbound sessions the Manager keeps up from the address
	// book (default 8, Bitcoin Core's count of outbound peers). Only outbound sessions
	// count: inbound ones are the peers' choice, so an attacker connecting in could
	// otherwise stop this node from choosing any peer of its own. Sessions with kept
	// peers (KeepConnected) do not count either: see KeepConnected.
	Target int
	// MaxDialing bounds the book dials in progress at once (default 4). Dials overlap
	// so that a node reaches Target in about two handshakes' time, not eight; the
	// bound keeps a book full of unreachable addresses from holding many sockets.
	MaxDialing int
	// MaxPerGroup bounds the outbound sessions and dials in progress with addresses of
	// one group (addrbook.Group: an IPv4 /16, an IPv6 /32, a DNS domain), so that one
	// operator's addresses, however many fill the book, take at most this many of the
	// Target slots (default 2; -1: no cap). The local and memory groups are exempt:
	// every peer on a LAN, and every in-process peer, is in them, so they cannot be
	// diverse. No other group is exempt, not even when the book offers no other: that
	// is exactly the book an attacker feeding it one /16 would make. An operator whose
	// peers all share a /16 raises the cap.
	MaxPerGroup int
	// Backoff is how long a book address waits after failed dials (defaults: Base 1 s,
	// Max 5 min, Factor 2, Jitter 0.2); KeptBackoff the same for kept peers' addresses
	// (defaults as Backoff but Max 30 s: an application that must not lose a peer wants
	// it back soon after it returns).
	Backoff     BackoffConfig
	KeptBackoff BackoffConfig
	// StableAfter is how long a session must last for its address's failures to be
	// forgotten (default 10 s). A session that ends sooner counts as one more failure,
	// so a peer that accepts and closes at once is redialled at the backoff's pace,
	// not every round.
	StableAfter time.Duration
	// DialTimeout bounds one dial: connect, handshake and the protocols opened on
	// connect (default 30 s).
	DialTimeout time.Duration
	// Dial connects to a book address (nil: the Service's Dial). A node that reaches
	// peers at relay circuit addresses sets one that dials those through the relay
	// (package node does, with relay.Dial); it must return the session with addr.Peer.
	Dial func(ctx context.Context, addr tendril.Addr) (*tendril.Session, error)
	// Interval is how often the Manager checks its sessions when nothing wakes it
	// (default 1 s). A session closing, a dial ending, Refresh and KeepConnected wake it
	// at once, and it wakes when the next backoff ends.
	Interval time.Duration
	// EventBuffer is the capacity of the Events channel (default 256).
	EventBuffer int

	// Now is the clock (nil: time.Now). Tests set it to a fixed clock.
	Now func() time.Time
	// Rand draws the backoff jitter (nil: seeded from crypto/rand). The Manager uses it
	// under its lock; give each Manager a Source of its own.
	Rand rand.Source
	// Logger receives the Manager's logs (nil: silent).
	Logger *slog.Logger
}

// BackoffConfig is an exponential backoff with jitter; see Backoff.
type BackoffConfig struct {
	// Base is the wait after the first failure.
	Base time.Duration
	// Max bounds the wait before jitter.
	Max time.Duration
	// Factor multiplies the wait after each further failure (at least 1).
	Factor float64
	// Jitter spreads each wait uniformly over ±Jitter of it (0 to 1; -1: none), so that
	// nodes that lost a peer together do not redial it together.
	Jitter float64
}

// DefaultConfig returns the defaults.
func DefaultConfig() Config {
	return Config{
		Target:      8,
		MaxDialing:  4,
		MaxPerGroup: 2,
		Backoff:     BackoffConfig{Base: time.Second, Max: 5 * time.Minute, Factor: 2, Jitter: 0.2},
		KeptBackoff: BackoffConfig{Base: time.Second, Max: 30 * time.Second, Factor: 2, Jitter: 0.2},
		StableAfter: 10 * time.Second,
		DialTimeout: 30 * time.Second,
		Interval:    time.Second,
		EventBuffer: 256,
	}
}

func (b BackoffConfig) withDefaults(d BackoffConfig) BackoffConfig {
	if b.Base == 0 {
		b.Base = d.Base
	}
	if b.Max == 0 {
		b.Max = d.Max
	}
	if b.Factor == 0 {
		b.Factor = d.Factor
	}
	switch b.Jitter {
	case 0:
		b.Jitter = d.Jitter
	case -1:
		b.Jitter = 0
	}
	return b
}

// withDefaults returns c with its zero fields set to their defaults.
func (c Config) withDefaults() Config {
	d := DefaultConfig()
	def := func(v *int, dv int) {
		if *v == 0 {
			*v = dv
		}
	}
	def(&c.Target, d.Target)
	def(&c.MaxDialing, d.MaxDialing)
	def(&c.MaxPerGroup, d.MaxPerGroup)
	def(&c.EventBuffer, d.EventBuffer)
	c.Backoff = c.Backoff.withDefaults(d.Backoff)
	c.KeptBackoff = c.KeptBackoff.withDefaults(d.KeptBackoff)
	for _, p := range []struct{ v, dv *time.Duration }{
		{&c.StableAfter, &d.StableAfter}, {&c.DialTimeout, &d.DialTimeout}, {&c.Interval, &d.Interval},
	} {
		if *p.v == 0 {
			*p.v = *p.dv
		}
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return c
}

// Validate reports whether c, with its zero fields taking their defaults, is usable.
// Its errors wrap ErrInvalidConfig.
func (c *Config) Validate() error {
	r := c.withDefaults()
	for _, f := range []struct {
		name string
		v    int
	}{{"Target", r.Target}, {"MaxDialing", r.MaxDialing}, {"EventBuffer", r.EventBuffer}} {
		if f.v < 0 {
			return fmt.Errorf("%w: %s is %d", ErrInvalidConfig, f.name, f.v)
		}
	}
	if r.MaxPerGroup < -1 {
		return fmt.Errorf("%w: MaxPerGroup is %d (-1: no cap)", ErrInvalidConfig, r.MaxPerGroup)
	}
	if r.StableAfter < 0 || r.DialTimeout < 0 || r.Interval < 0 {
		return fmt.Errorf("%w: negative duration", ErrInvalidConfig)
	}
	for _, b := range []struct {
		name string
		b    BackoffConfig
	}{{"Backoff", r.Backoff}, {"KeptBackoff", r.KeptBackoff}} {
		if err := b.b.validate(); err != nil {
			return fmt.Errorf("%w: %s: %s", ErrInvalidConfig, b.name, err)
		}
	}
	return nil
}

func (b BackoffConfig) validate() error {
	switch {
	case b.Base < 0 || b.Max < b.Base:
		return fmt.Errorf("want 0 <= Base (%v) <= Max (%v)", b.Base, b.Max)
	case b.Factor < 1:
		return fmt.Errorf("factor %v < 1", b.Factor)
	case b.Jitter < 0 || b.Jitter > 1:
		return fmt.Errorf("jitter %v outside 0..1", b.Jitter)
	}
	return nil
}
