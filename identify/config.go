package identify

import (
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"time"
	"unicode/utf8"

	ma "github.com/multiformats/go-multiaddr"
	"github.com/tendril-p2p/tendril/internal/ratelimit"
	"github.com/tendril-p2p/tendril/secio"
)

// Defaults of Config.
const (
	DefaultUpdateBurst    = 8
	DefaultUpdateInterval = 5 * time.Second
	DefaultMaxDropped     = 64
	DefaultPushDelay      = 100 * time.Millisecond
)

// ErrInvalidConfig is wrapped by every error of Config.Validate and New.
var ErrInvalidConfig = errors.New("identify: invalid config")

// Config configures an Identify. The zero value is usable except for PrivateKey: every
// other zero field takes its default. New copies the Config.
type Config struct {
	// PrivateKey is the Service's identity key (its tendril.Config.PrivateKey), which signs
	// this node's peer records. Required: the Service does not hand its key out, and New
	// checks that this one is the Service's.
	PrivateKey *secio.PrivateKey

	// Agent names the software, e.g. "chat/1.2 tendril/v0.9". At most MaxAgent bytes of
	// UTF-8. Default "tendril/" and the module's version ("tendril/(devel)" if the build
	// does not say).
	Agent string

	// Addrs returns the transport multiaddrs (without /p2p/) this node advertises in its
	// signed record; identify calls it at New, when a session opens, when a listener
	// starts or closes, and on Identify.Update. At most peerrecord.MaxAddrs are used. Nil: DefaultAddrs, the
	// Service's listen addresses with unspecified IPs replaced by the machine's interface
	// addresses.
	Addrs func() []ma.Multiaddr

	// Public reports whether an address is on the public Internet. A peer seen at a
	// public address is sent a record of this node's public addresses only, so that no
	// private or loopback address of this node reaches a stranger on the Internet, and so
	// that peer exchange can pass the record on to other public peers (it never passes on
	// a record listing an unroutable address to them). Peers on the LAN, loopback or in
	// the same process get the record of every address. Nil: addrbook.IsPublic (a
	// test lab whose "public" hosts use documentation ranges sets its own).
	Public func(ma.Multiaddr) bool

	// OnIdentify, if set, is called with what a peer said each time an update of its is
	// accepted (the first on every session, then its pushes). It runs on that session's
	// handler goroutine, without identify's locks held: calls for one session are
	// sequential, and a slow callback delays only that session's identify stream.
	OnIdentify func(Info)

	// OnError, if set, is called when a peer's identify stream is closed because of what
	// it sent: the error wraps ErrTooLarge, ErrMalformed, ErrBadRecord, ErrWrongPeer or
	// ErrFlood. It runs as OnIdentify does. An application that wants such peers gone
	// disconnects them here.
	OnError func(peer secio.PeerID, err error)

	// UpdateBurst and UpdateInterval bound the updates accepted from one session: a
	// token bucket of UpdateBurst, refilled by one every UpdateInterval. Updates beyond
	// it are dropped before they are parsed, so a peer can make this node verify at most
	// UpdateBurst signatures at once and one per UpdateInterval after. This node paces its
	// own pushes to half the burst and an interval a quarter longer, so that peers with
	// the same settings never drop each other's updates. Defaults DefaultUpdateBurst and
	// DefaultUpdateInterval.
	UpdateBurst    int
	UpdateInterval time.Duration

	// MaxDropped is how many updates one session may have dropped by the rate limit
	// before its identify stream is closed with ErrFlood. Default DefaultMaxDropped.
	MaxDropped int

	// PushDelay is how long a change (listen address, protocol) waits before it is pushed,
	// so that a burst of changes goes out as one update carrying the last state. Default
	// DefaultPushDelay.
	PushDelay time.Duration

	// Logger receives identify's logs. Nil: silent.
	Logger *slog.Logger
}

// Validate reports the first problem with the configuration, wrapping ErrInvalidConfig.
func (c *Config) Validate() error {
	switch {
	case c.PrivateKey == nil:
		return fmt.Errorf("%w: PrivateKey is required", ErrInvalidConfig)
	case len(c.Agent) > MaxAgent:
		return fmt.Errorf("%w: Agent is %d bytes, at most %d", ErrInvalidConfig, len(c.Agent), MaxAgent)
	case !utf8.ValidString(c.Agent):
		return fmt.Errorf("%w: Agent is not UTF-8", ErrInvalidConfig)
	case c.UpdateBurst < 0 || c.UpdateInterval < 0 || c.MaxDropped < 0 || c.PushDelay < 0:
		return fmt.Errorf("%w: negative limit", ErrInvalidConfig)
	}
	return nil
}

// setDefaults fills the zero fields.
func (c *Config) setDefaults() {
	if c.Agent == "" {
		c.Agent = defaultAgent()
	}
	if c.UpdateBurst == 0 {
		c.UpdateBurst = DefaultUpdateBurst
	}
	if c.UpdateInterval == 0 {
		c.UpdateInterval = DefaultUpdateInterval
	}
	if c.MaxDropped == 0 {
		c.MaxDropped = DefaultMaxDropped
	}
	if c.PushDelay == 0 {
		c.PushDelay = DefaultPushDelay
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
}

// updateRate is what this node accepts from each session.
func (c *Config) updateRate() ratelimit.Rate {
	return ratelimit.Rate{Burst: c.UpdateBurst, Interval: c.UpdateInterval}
}

// pushRate is how fast this node pushes to each session: half the burst and an interval
// a quarter longer than it accepts, the margin absorbing the network's jitter (a push
// that waited in a queue arrives close behind the next).
func (c *Config) pushRate() ratelimit.Rate {
	return ratelimit.Rate{Burst: max(1, c.UpdateBurst/2), Interval: c.UpdateInterval * 5 / 4}
}

// defaultAgent is "tendril/" and the version of the tendril module in this build.
func defaultAgent() string {
	v := "(devel)"
	if bi, ok := debug.ReadBuildInfo(); ok {
		if bi.Main.Path == modulePath && bi.Main.Version != "" {
			v = bi.Main.Version
		}
		for _, d := range bi.Deps {
			if d.Path == modulePath && d.Version != "" {
				v = d.Version
			}
		}
	}
	return "tendril/" + v
}

const modulePath = "github.com/tendril-p2p/tendril"
