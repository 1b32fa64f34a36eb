package holepunch

import (
	"fmt"
	"log/slog"
	"time"

	ma "github.com/multiformats/go-multiaddr"

	"github.com/tendril-p2p/tendril/addrbook"
	"github.com/tendril-p2p/tendril/internal/defaults"
)

// Defaults of Config.
const (
	DefaultMaxAttempts    = 3
	DefaultAttemptTimeout = 5 * time.Second
	DefaultAttemptWindow  = time.Minute
	DefaultMaxConcurrent  = 8
	DefaultMaxAddrs       = 8
	DefaultStreamTimeout  = 10 * time.Second
	DefaultAttemptRate    = 2 // attempts a second, both roles, after a burst of DefaultAttemptBurst
	DefaultAttemptBurst   = 8
)

// maxTrackedPeers bounds the peers whose attempts the limiter remembers.
const maxTrackedPeers = 1024

// Config configures a Puncher. The zero value is usable: every zero field takes its
// default.
type Config struct {
	// Addrs returns the addresses this node tells the other end to dial: where its NAT
	// maps its listen ports. Nil: reach.Candidates of identify's observed addresses and
	// the Service's listen addresses (each observed IP with each listen port).
	Addrs func() []ma.Multiaddr

	// Allow reports whether an address the other end gave may be dialled. Nil: public
	// IPs only (addrbook.IsPublic). A lab whose "public" side uses documentation ranges
	// sets its own.
	Allow func(ma.Multiaddr) bool

	// MaxAttempts is how many attempts one punch makes, and how many a peer may ask for
	// within AttemptWindow. Default DefaultMaxAttempts.
	MaxAttempts int
	// AttemptTimeout bounds one attempt's dials and handshake. Default
	// DefaultAttemptTimeout (a dropped SYN is sent again after 1 s, then 3 s).
	AttemptTimeout time.Duration
	// AttemptWindow is the window of the per-peer limit. Default DefaultAttemptWindow.
	AttemptWindow time.Duration
	// MaxConcurrent bounds the punches in flight, in both roles. Default
	// DefaultMaxConcurrent.
	MaxConcurrent int
	// AttemptRate bounds the attempts a second in total, in both roles, after a burst of
	// AttemptBurst: identities cost nothing, so the per-peer limit alone would let many
	// relayed strangers make this node dial at MaxConcurrent's pace. An attempt this node
	// starts waits for a token; one it is asked for is refused without one. Defaults
	// DefaultAttemptRate and DefaultAttemptBurst.
	AttemptRate  int
	AttemptBurst int
	// MaxAddrs bounds the addresses sent, and those accepted and dialled, per attempt.
	// Default DefaultMaxAddrs; at most 32.
	MaxAddrs int
	// StreamTimeout bounds the wait for each message of an attempt. Default
	// DefaultStreamTimeout.
	StreamTimeout time.Duration

	// Logger receives debug logs. Nil: silent.
	Logger *slog.Logger
}

// Validate reports a Config that New refuses: negative values, MaxAddrs over 32.
func (c Config) Validate() error {
	switch {
	case c.MaxAttempts < 0, c.AttemptTimeout < 0, c.AttemptWindow < 0, c.MaxConcurrent < 0, c.AttemptRate < 0, c.AttemptBurst < 0,
		c.MaxAddrs < 0, c.StreamTimeout < 0:
		return fmt.Errorf("%w: negative value", ErrInvalidConfig)
	case c.MaxAddrs > 32:
		return fmt.Errorf("%w: MaxAddrs %d over 32", ErrInvalidConfig, c.MaxAddrs)
	}
	return nil
}

func (c Config) withDefaults() Config {
	defaults.Set(&c.MaxAttempts, DefaultMaxAttempts)
	defaults.Set(&c.MaxConcurrent, DefaultMaxConcurrent)
	defaults.Set(&c.AttemptRate, DefaultAttemptRate)
	defaults.Set(&c.AttemptBurst, DefaultAttemptBurst)
	defaults.Set(&c.MaxAddrs, DefaultMaxAddrs)
	defaults.Set(&c.AttemptTimeout, DefaultAttemptTimeout)
	defaults.Set(&c.AttemptWindow, DefaultAttemptWindow)
	defaults.Set(&c.StreamTimeout, DefaultStreamTimeout)
	if c.Allow == nil {
		c.Allow = addrbook.IsPublic
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}
