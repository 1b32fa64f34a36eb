package mux

import (
	"cmp"
	"fmt"
	"log/slog"
	"time"
)

// Limits checked by Config.Validate.
const (
	// MinStreamWindow is the smallest MaxStreamWindow: the initial window every yamux
	// stream has (256 KiB).
	MinStreamWindow = InitialStreamWindow
	// MaxStreamWindowLimit is the largest MaxStreamWindow this package accepts (64 MiB).
	MaxStreamWindowLimit = 64 << 20
	// MinDataFrame and MaxDataFrameLimit bound Config.MaxDataFrame.
	MinDataFrame      = 1 << 10
	MaxDataFrameLimit = 1 << 20
)

// Config tunes a session. A nil *Config means DefaultConfig(). A zero field means its
// default; durations that can be disabled are disabled by a negative value. Client and
// Server copy what they need: changing the Config afterwards has no effect, and they never
// modify it.
type Config struct {
	// MaxStreamWindow is the largest receive window a stream grows to. Every stream starts
	// at InitialStreamWindow (256 KiB, the yamux specification's) and its window doubles
	// each time the application has read half of it within 1.5 round trips, i.e. while
	// the window, not the reader, limits the stream, up to this size and as far as the
	// memory budgets allow. A stream moves at most one window per round trip: 32 MiB is
	// 335 MB/s at 100 ms. Default 32 MiB; range MinStreamWindow to MaxStreamWindowLimit.
	MaxStreamWindow uint32

	// MaxDataFrame caps the body of each data frame sent, so that a bulk stream cannot
	// hold the connection for long while others wait; frames written together are still
	// handed to the connection in one Write. Default 64 KiB; range MinDataFrame to
	// MaxDataFrameLimit.
	MaxDataFrame uint32

	// MaxSessionMemory is the session's memory budget in bytes: the receive windows of all
	// its streams together, each charged its window plus one 16 KiB buffer chunk (see
	// Budget). Default 64 MiB: one stream at its largest window and a hundred more at
	// their initial window, or 240 streams at their initial window. At least
	// MinStreamWindow + 16 KiB.
	MaxSessionMemory int64

	// Memory, if not nil, is a budget shared by every session using this Config: each
	// session's reservations are charged to it as well as to MaxSessionMemory.
	Memory *Budget

	// MaxStreams caps the streams alive in the session, inbound and outbound together.
	// Default 1024. A stream stops counting once both sides closed it, or either side
	// reset it, or this side closed it with Close.
	MaxStreams int

	// AcceptBacklog caps the inbound streams waiting for AcceptStream or for a Serve
	// handler (more are reset) and the outbound streams not yet acknowledged by the peer
	// (OpenStream waits beyond it). Default 64.
	AcceptBacklog int

	// ServeConcurrency caps the Serve handlers running at once; streams beyond it wait in
	// the accept backlog, unacknowledged (see Serve). Default: MaxStreams (1024).
	ServeConcurrency int

	// UselessFrames is how many frames per second the peer may send that make this side
	// work for nothing: streams opened and reset before this side acknowledged them (the
	// rapid reset attack), streams opened beyond MaxStreams or the backlog, frames for
	// streams never opened, empty frames without flags. Bursts of ten seconds' worth pass;
	// beyond that the session is closed with ErrPeerMisbehaving. Default 100; negative:
	// no limit.
	UselessFrames int

	// KeepAliveInterval is the period of keepalive pings; a ping unanswered within
	// ConnectionWriteTimeout closes the session with ErrKeepAliveTimeout. The session runs
	// them from a timer, with no goroutine in between. Default 30s; negative disables
	// keepalives (tendril's Service pings its sessions itself).
	KeepAliveInterval time.Duration

	// ConnectionWriteTimeout bounds how long a write to the connection may block before
	// the session is closed, and how long a ping waits for its answer. Default 10s.
	ConnectionWriteTimeout time.Duration

	// StreamOpenTimeout is how long an opened stream may stay unacknowledged by the peer
	// once its opening was sent, before the whole session is closed as unresponsive (as
	// yamux does). Default 30s; negative disables.
	StreamOpenTimeout time.Duration

	// Logger receives the session's log lines (protocol errors by the peer at Warn, the
	// rest at Debug). Nil is silent.
	Logger *slog.Logger
}

// DefaultConfig returns a new Config with every field at its default.
func DefaultConfig() *Config {
	return &Config{
		MaxStreamWindow:        32 << 20,
		MaxDataFrame:           64 << 10,
		MaxSessionMemory:       64 << 20,
		MaxStreams:             1024,
		AcceptBacklog:          64,
		ServeConcurrency:       1024,
		UselessFrames:          100,
		KeepAliveInterval:      30 * time.Second,
		ConnectionWriteTimeout: 10 * time.Second,
		StreamOpenTimeout:      30 * time.Second,
	}
}

// Validate reports whether c is usable (zero fields count as their defaults).
func (c *Config) Validate() error {
	_, err := c.withDefaults()
	return err
}

// withDefaults returns a copy of c with defaults filled in, validated.
func (c *Config) withDefaults() (*Config, error) {
	d := DefaultConfig()
	if c == nil {
		return d, nil
	}
	out := *c
	out.MaxStreamWindow = cmp.Or(out.MaxStreamWindow, d.MaxStreamWindow)
	out.MaxDataFrame = cmp.Or(out.MaxDataFrame, d.MaxDataFrame)
	out.MaxSessionMemory = cmp.Or(out.MaxSessionMemory, d.MaxSessionMemory)
	out.MaxStreams = cmp.Or(out.MaxStreams, d.MaxStreams)
	out.AcceptBacklog = cmp.Or(out.AcceptBacklog, d.AcceptBacklog)
	out.ServeConcurrency = cmp.Or(out.ServeConcurrency, out.MaxStreams)
	out.UselessFrames = cmp.Or(out.UselessFrames, d.UselessFrames)
	out.KeepAliveInterval = cmp.Or(out.KeepAliveInterval, d.KeepAliveInterval)
	out.ConnectionWriteTimeout = cmp.Or(out.ConnectionWriteTimeout, d.ConnectionWriteTimeout)
	out.StreamOpenTimeout = cmp.Or(out.StreamOpenTimeout, d.StreamOpenTimeout)
	switch {
	case out.MaxStreamWindow < MinStreamWindow || out.MaxStreamWindow > MaxStreamWindowLimit:
		return nil, fmt.Errorf("%w: MaxStreamWindow %d outside [%d, %d]", ErrInvalidConfig, out.MaxStreamWindow, MinStreamWindow, MaxStreamWindowLimit)
	case out.MaxDataFrame < MinDataFrame || out.MaxDataFrame > MaxDataFrameLimit:
		return nil, fmt.Errorf("%w: MaxDataFrame %d outside [%d, %d]", ErrInvalidConfig, out.MaxDataFrame, MinDataFrame, MaxDataFrameLimit)
	case out.MaxSessionMemory < streamCharge(InitialStreamWindow):
		return nil, fmt.Errorf("%w: MaxSessionMemory %d below one stream's %d", ErrInvalidConfig, out.MaxSessionMemory, streamCharge(InitialStreamWindow))
	case out.MaxStreams < 0:
		return nil, fmt.Errorf("%w: negative MaxStreams", ErrInvalidConfig)
	case out.AcceptBacklog < 0:
		return nil, fmt.Errorf("%w: negative AcceptBacklog", ErrInvalidConfig)
	case out.ServeConcurrency < 0:
		return nil, fmt.Errorf("%w: negative ServeConcurrency", ErrInvalidConfig)
	case out.ConnectionWriteTimeout < 0:
		return nil, fmt.Errorf("%w: negative ConnectionWriteTimeout", ErrInvalidConfig)
	}
	return &out, nil
}

// streamCharge is what a stream with receive window w costs its budget.
func streamCharge(w uint32) int64 { return int64(w) + chunkSize }

// writeBatch is the most stream data one Write to the connection carries: a writer sends
// up to this much of its stream (in frames of MaxDataFrame) at once, so that large writes
// cost few secure frames and syscalls while others wait at most this long.
const writeBatch = 256 << 10

// maxControlBytes bounds the control frames (window updates, acknowledgements, pings,
// resets) sent in front of data in one Write; more go in the next.
const maxControlBytes = 64 * FrameHeaderSize

// MaxFrameSize returns the largest Write a session with this configuration makes to its
// connection: give the secure connection a frame limit of at least this, so that each
// Write is one secure frame. A nil cfg means the defaults.
func MaxFrameSize(cfg *Config) int {
	c, err := cfg.withDefaults()
	if err != nil {
		c = DefaultConfig()
	}
	batch := max(writeBatch, int(c.MaxDataFrame))
	frames := (batch + int(c.MaxDataFrame) - 1) / int(c.MaxDataFrame)
	return maxControlBytes + batch + frames*FrameHeaderSize
}
