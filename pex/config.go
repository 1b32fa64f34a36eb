package pex

import (
	"fmt"
	"log/slog"
	"time"

	ma "github.com/multiformats/go-multiaddr"

	"github.com/tendril-p2p/tendril/peerrecord"
)

// Config shapes a PEX. A zero field takes its default (DefaultConfig); New copies the
// Config.
type Config struct {
	// MaxAnswer bounds the records in one answer, asked or given (default 32, at most
	// 1024). It is also the most signature checks one answer can cost this node.
	MaxAnswer int
	// MaxAnswerBytes bounds one answer's size (default 32 KiB, at least
	// peerrecord.MaxSize+16). An answer this node gives stops short of it; one it gets
	// above it is refused as its length arrives, before the rest is read (it is the
	// protocol's MaxMessageSize), and the peer is struck.
	MaxAnswerBytes int

	// ServeInterval and ServeBurst rate-limit answers per asking peer: a burst of
	// ServeBurst, then one per ServeInterval (defaults 30 s and 2). Requests beyond fail
	// with ErrRateLimited before any work.
	ServeInterval time.Duration
	ServeBurst    int
	// MaxAnswersPerSecond bounds the answers given to all peers together (default 50,
	// with a burst of five seconds' worth): a swarm of identities, each with its own
	// allowance, gets no more. A request refused by this bound leaves the asker's own
	// allowance as it was.
	MaxAnswersPerSecond int
	// MaxTrackedPeers bounds the peers whose rate-limit and bad-record state is kept, on
	// each side (default 1024); the least recently seen is forgotten first.
	MaxTrackedPeers int

	// BadRecordLimit is how many bad records (failing peerrecord.Parse) a peer may send
	// before its answers are ignored for IgnoreFor (defaults 8 and 10 minutes). An
	// oversize or malformed answer counts as BadRecordLimit bad records.
	BadRecordLimit int
	IgnoreFor      time.Duration

	// AskTimeout bounds one Ask whose context has no deadline (default 10 s).
	AskTimeout time.Duration
	// AskInterval is how often a random connected peer is asked while the book holds
	// fewer than WantPeers peers (defaults 10 s and 1000). Once it holds as many, the
	// interval doubles after each ask up to MaxAskInterval (default 10 minutes), and
	// falls back to AskInterval when the book shrinks.
	AskInterval time.Duration
	// FirstAsk is the wait before the first periodic ask; the waits then double up to
	// AskInterval (default 1 s, at most AskInterval). A node that joins with its
	// bootstrap peers asks them at once, when they may know little more than it does
	// (a swarm starting together); the early asks come back when they have learned.
	FirstAsk       time.Duration
	MaxAskInterval time.Duration
	WantPeers      int
	// MaxAsksInFlight bounds the automatic asks running at once (default 2). Outbound
	// sessions opened meanwhile wait in a queue of 64 peers; beyond, the periodic asks
	// catch up.
	MaxAsksInFlight int
	// NoAutoAsk turns the automatic asking off: the PEX answers, and asks only when Ask
	// is called.
	NoAutoAsk bool

	// Public reports whether a peer seen at the remote transport address is on the public
	// Internet (default IsPublic). A public asker gets no record that lists an unroutable
	// address, nor a sample made mostly of its own group; from a public answerer,
	// unroutable addresses are dropped.
	Public func(remote ma.Multiaddr) bool

	// Logger receives debug logs of refused answers and requests. Nil: silent.
	Logger *slog.Logger
}

// Bounds of Validate.
const (
	maxMaxAnswer      = 1024
	maxMaxAnswerBytes = 1 << 20
	// pendingAsks bounds the outbound sessions waiting for an ask slot.
	pendingAsks = 64
)

// DefaultConfig returns the defaults.
func DefaultConfig() Config {
	return Config{
		MaxAnswer:           32,
		MaxAnswerBytes:      32 << 10,
		ServeInterval:       30 * time.Second,
		ServeBurst:          2,
		MaxAnswersPerSecond: 50,
		MaxTrackedPeers:     1024,
		BadRecordLimit:      8,
		IgnoreFor:           10 * time.Minute,
		AskTimeout:          10 * time.Second,
		AskInterval:         10 * time.Second,
		FirstAsk:            time.Second,
		MaxAskInterval:      10 * time.Minute,
		WantPeers:           1000,
		MaxAsksInFlight:     2,
		Public:              IsPublic,
	}
}

func (c Config) withDefaults() Config {
	d := DefaultConfig()
	def := func(v *int, dv int) {
		if *v == 0 {
			*v = dv
		}
	}
	defD := func(v *time.Duration, dv time.Duration) {
		if *v == 0 {
			*v = dv
		}
	}
	def(&c.MaxAnswer, d.MaxAnswer)
	def(&c.MaxAnswerBytes, d.MaxAnswerBytes)
	def(&c.ServeBurst, d.ServeBurst)
	def(&c.MaxAnswersPerSecond, d.MaxAnswersPerSecond)
	def(&c.MaxTrackedPeers, d.MaxTrackedPeers)
	def(&c.BadRecordLimit, d.BadRecordLimit)
	def(&c.WantPeers, d.WantPeers)
	def(&c.MaxAsksInFlight, d.MaxAsksInFlight)
	defD(&c.ServeInterval, d.ServeInterval)
	defD(&c.IgnoreFor, d.IgnoreFor)
	defD(&c.AskTimeout, d.AskTimeout)
	defD(&c.AskInterval, d.AskInterval)
	defD(&c.FirstAsk, min(d.FirstAsk, c.AskInterval))
	defD(&c.MaxAskInterval, d.MaxAskInterval)
	if c.Public == nil {
		c.Public = d.Public
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

// Validate reports whether c, its zero fields taking their defaults, is usable. Its
// errors wrap ErrInvalidConfig.
func (c *Config) Validate() error {
	r := c.withDefaults()
	for _, f := range []struct {
		name string
		v    int64
	}{
		{"MaxAnswer", int64(r.MaxAnswer)}, {"MaxAnswerBytes", int64(r.MaxAnswerBytes)},
		{"ServeInterval", int64(r.ServeInterval)}, {"ServeBurst", int64(r.ServeBurst)},
		{"MaxAnswersPerSecond", int64(r.MaxAnswersPerSecond)}, {"MaxTrackedPeers", int64(r.MaxTrackedPeers)},
		{"BadRecordLimit", int64(r.BadRecordLimit)}, {"IgnoreFor", int64(r.IgnoreFor)},
		{"AskTimeout", int64(r.AskTimeout)}, {"AskInterval", int64(r.AskInterval)},
		{"MaxAskInterval", int64(r.MaxAskInterval)}, {"WantPeers", int64(r.WantPeers)},
		{"FirstAsk", int64(r.FirstAsk)},
		{"MaxAsksInFlight", int64(r.MaxAsksInFlight)},
	} {
		if f.v < 0 {
			return fmt.Errorf("%w: %s is negative", ErrInvalidConfig, f.name)
		}
	}
	switch {
	case r.MaxAnswer > maxMaxAnswer:
		return fmt.Errorf("%w: MaxAnswer %d > %d", ErrInvalidConfig, r.MaxAnswer, maxMaxAnswer)
	case r.MaxAnswerBytes > maxMaxAnswerBytes || r.MaxAnswerBytes < peerrecord.MaxSize+16:
		return fmt.Errorf("%w: MaxAnswerBytes %d outside [%d, %d]", ErrInvalidConfig, r.MaxAnswerBytes, peerrecord.MaxSize+16, maxMaxAnswerBytes)
	case r.FirstAsk > r.AskInterval:
		return fmt.Errorf("%w: FirstAsk %v > AskInterval %v", ErrInvalidConfig, r.FirstAsk, r.AskInterval)
	case r.MaxAskInterval < r.AskInterval:
		return fmt.Errorf("%w: MaxAskInterval %v < AskInterval %v", ErrInvalidConfig, r.MaxAskInterval, r.AskInterval)
	}
	return nil
}
