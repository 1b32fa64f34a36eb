package reach

import (
	"fmt"
	"log/slog"
	"time"

	ma "github.com/multiformats/go-multiaddr"
	"github.com/tendril-p2p/tendril/addrbook"
	"github.com/tendril-p2p/tendril/internal/defaults"
	"github.com/tendril-p2p/tendril/internal/ratelimit"
)

// Defaults of Config. docs/RELIABILITY.md ("Reachability") says why these values.
const (
	DefaultMaxCandidates      = 4
	DefaultDialBackTimeout    = 3 * time.Second
	DefaultServeBurst         = 3
	DefaultServeInterval      = 20 * time.Second
	DefaultMaxConcurrentDials = 8
	DefaultDialRate           = 8
	DefaultMaxTrackedIPs      = 1024
	DefaultConfirmations      = 2
	DefaultRecheckInterval    = 10 * time.Minute
	DefaultMaxResultAge       = time.Hour
	DefaultRequestTimeout     = 10 * time.Second
	DefaultMaxAddrs           = 16
	DefaultEventBuffer        = 64
)

// Config configures a Reach. The zero value is usable: every zero field takes its
// default. New copies the Config.
type Config struct {
	// MaxCandidates bounds the addresses one request asks to be dialled back at, both
	// those this node asks and those it serves (more is a malformed request). Default
	// DefaultMaxCandidates; at most MaxCandidatesLimit.
	MaxCandidates int
	// DialBackTimeout bounds one dial-back: the connect and the handshake up to the
	// requester's proven identity. An address behind a NAT drops the dial, so this is also
	// how long a private address takes to be found so. Default DefaultDialBackTimeout.
	DialBackTimeout time.Duration
	// ServeBurst and ServeInterval bound the requests served per requester address (an
	// IPv4 address, an IPv6 /64), whatever peer IDs ask from there: ServeBurst at once,
	// then one every ServeInterval; beyond, the answer is ErrRateLimited and nothing is
	// dialled. A client paces its own requests to one server the same way. Defaults
	// DefaultServeBurst and DefaultServeInterval.
	ServeBurst    int
	ServeInterval time.Duration
	// MaxConcurrentDials bounds the dial-backs this node runs at once for all requesters;
	// DialRate bounds how many it starts per second (twice that at once). A request that
	// finds no room for some candidates gets them back as not dialled (or ErrBusy if
	// none), never waits. Defaults DefaultMaxConcurrentDials and DefaultDialRate.
	MaxConcurrentDials int
	DialRate           int
	// MaxTrackedIPs bounds the requester addresses whose rate the server remembers; when
	// all are recent, a request from a new one is refused (ErrBusy). Default
	// DefaultMaxTrackedIPs.
	MaxTrackedIPs int

	// Confirmations is how many address groups must agree before an address is Public
	// (dialled back) or Private (not), and outnumber those that disagree. Default
	// DefaultConfirmations (2): one peer, or several in one group, decides nothing.
	Confirmations int
	// Group returns the address group of a peer's address (as this node sees it); answers
	// from one group count once. Nil: addrbook.GroupOf, which puts every loopback and
	// private address in one group ("local"): tests and labs on such addresses set their
	// own.
	Group func(ma.Multiaddr) addrbook.Group
	// RecheckInterval is how old a decided address's answers may grow before it is asked
	// about again; MaxResultAge is when an answer stops counting. Defaults
	// DefaultRecheckInterval and DefaultMaxResultAge.
	RecheckInterval time.Duration
	MaxResultAge    time.Duration
	// RequestTimeout bounds one request to a server, its dial-backs included. Default
	// DefaultRequestTimeout.
	RequestTimeout time.Duration
	// MaxAddrs bounds the addresses tracked (candidates from every source together).
	// Default DefaultMaxAddrs.
	MaxAddrs int
	// EventBuffer is the capacity of the Events channel; events that find it full are
	// dropped and counted (Reach.DroppedEvents). Default DefaultEventBuffer.
	EventBuffer int

	// Logger receives debug records. Nil: silent.
	Logger *slog.Logger
}

// MaxCandidatesLimit is the largest Config.MaxCandidates: the wire's count is one byte,
// and every candidate is a dial someone else makes.
const MaxCandidatesLimit = 16

// Validate reports the first problem with c, wrapping ErrInvalidConfig. Zero fields are
// valid (they mean their defaults).
func (c *Config) Validate() error {
	if c.MaxCandidates < 0 || c.MaxCandidates > MaxCandidatesLimit {
		return fmt.Errorf("%w: MaxCandidates %d not in [0, %d]", ErrInvalidConfig, c.MaxCandidates, MaxCandidatesLimit)
	}
	for _, f := range []struct {
		name string
		v    int
	}{
		{"ServeBurst", c.ServeBurst}, {"MaxConcurrentDials", c.MaxConcurrentDials}, {"DialRate", c.DialRate},
		{"MaxTrackedIPs", c.MaxTrackedIPs}, {"Confirmations", c.Confirmations}, {"MaxAddrs", c.MaxAddrs},
		{"EventBuffer", c.EventBuffer},
	} {
		if f.v < 0 {
			return fmt.Errorf("%w: %s %d is negative", ErrInvalidConfig, f.name, f.v)
		}
	}
	for _, f := range []struct {
		name string
		v    time.Duration
	}{
		{"DialBackTimeout", c.DialBackTimeout}, {"ServeInterval", c.ServeInterval},
		{"RecheckInterval", c.RecheckInterval}, {"MaxResultAge", c.MaxResultAge},
		{"RequestTimeout", c.RequestTimeout},
	} {
		if f.v < 0 {
			return fmt.Errorf("%w: %s %v is negative", ErrInvalidConfig, f.name, f.v)
		}
	}
	return nil
}

// serveRate is the per-requester rate a server allows, and the pace at which this node
// asks each server (assumed to run the same defaults).
func (c *Config) serveRate() ratelimit.Rate {
	return ratelimit.Rate{Burst: c.ServeBurst, Interval: c.ServeInterval}
}

// setDefaults fills the zero fields.
func (c *Config) setDefaults() {
	defaults.Set(&c.MaxCandidates, DefaultMaxCandidates)
	defaults.Set(&c.ServeBurst, DefaultServeBurst)
	defaults.Set(&c.MaxConcurrentDials, DefaultMaxConcurrentDials)
	defaults.Set(&c.DialRate, DefaultDialRate)
	defaults.Set(&c.MaxTrackedIPs, DefaultMaxTrackedIPs)
	defaults.Set(&c.Confirmations, DefaultConfirmations)
	defaults.Set(&c.MaxAddrs, DefaultMaxAddrs)
	defaults.Set(&c.EventBuffer, DefaultEventBuffer)
	defaults.Set(&c.DialBackTimeout, DefaultDialBackTimeout)
	defaults.Set(&c.ServeInterval, DefaultServeInterval)
	defaults.Set(&c.RecheckInterval, DefaultRecheckInterval)
	defaults.Set(&c.MaxResultAge, DefaultMaxResultAge)
	defaults.Set(&c.RequestTimeout, DefaultRequestTimeout)
	if c.Group == nil {
		c.Group = addrbook.GroupOf
	}
}
