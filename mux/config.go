package mux

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/hashicorp/yamux"
)

// FrameHeaderSize is the size of a yamux frame header.
const FrameHeaderSize = 12

// Limits checked by Config.Validate.
const (
	// MinStreamWindow is the smallest stream window yamux allows (256 KiB).
	MinStreamWindow = 256 << 10
	// MaxStreamWindowLimit is the largest stream window this package accepts
	// (16 MiB).
	MaxStreamWindowLimit = 16 << 20
)

// Config tunes a session. A nil *Config means DefaultConfig(). A zero field
// means its default; durations that can be disabled are disabled by a negative
// value. Client and Server copy the Config: changing it afterwards has no
// effect, and they never modify it.
type Config struct {
	// MaxStreamWindow is the receive window of each stream, and so the largest
	// data frame the peer sends. Default 1 MiB (yamux's own default, 256 KiB,
	// caps throughput on real links); range MinStreamWindow to
	// MaxStreamWindowLimit.
	MaxStreamWindow uint32

	// MaxStreams caps the streams alive in the session, inbound and outbound
	// together. Default 1024. A stream stops counting once both sides closed
	// it or either side reset it.
	MaxStreams int

	// AcceptBacklog caps the inbound streams waiting for AcceptStream (more
	// are reset) and the outbound streams not yet acknowledged by the peer
	// (OpenStream waits beyond it). Default 64: yamux keeps a queue of this
	// size per session, and Serve takes streams from it as they arrive.
	AcceptBacklog int

	// KeepAliveInterval is the period of keepalive pings; a ping unanswered
	// within ConnectionWriteTimeout closes the session with
	// ErrKeepAliveTimeout. Default 30s; negative disables keepalives.
	KeepAliveInterval time.Duration

	// ConnectionWriteTimeout bounds how long a frame may wait to be written to
	// the connection, and how long a ping waits for its answer. Default 10s.
	ConnectionWriteTimeout time.Duration

	// StreamOpenTimeout is how long an opened stream may stay unacknowledged
	// by the peer (its AcceptStream) before the whole session is closed, as
	// yamux does: an unresponsive peer. Default 30s; negative disables.
	StreamOpenTimeout time.Duration

	// StreamCloseTimeout is how long a stream closed locally waits for the
	// peer to close its side before it is reset and freed. Default 5m;
	// negative disables (not recommended: a peer could hold streams open).
	StreamCloseTimeout time.Duration

	// Logger receives yamux's log lines: its errors at Warn (they are mostly
	// caused by peers), its warnings at Debug. Nil is silent.
	Logger *slog.Logger
}

// DefaultConfig returns a new Config with every field at its default.
func DefaultConfig() *Config {
	return &Config{
		MaxStreamWindow:        1 << 20,
		MaxStreams:             1024,
		AcceptBacklog:          64,
		KeepAliveInterval:      30 * time.Second,
		ConnectionWriteTimeout: 10 * time.Second,
		StreamOpenTimeout:      30 * time.Second,
		StreamCloseTimeout:     5 * time.Minute,
	}
}

// Validate reports whether c is usable (zero fields count as their defaults).
func (c *Config) Validate() error {
	_, err := c.populate()
	return err
}

// populate returns a copy of c with defaults filled in, validated.
func (c *Config) populate() (*Config, error) {
	d := DefaultConfig()
	if c == nil {
		return d, nil
	}
	out := *c
	if out.MaxStreamWindow == 0 {
		out.MaxStreamWindow = d.MaxStreamWindow
	}
	if out.MaxStreams == 0 {
		out.MaxStreams = d.MaxStreams
	}
	if out.AcceptBacklog == 0 {
		out.AcceptBacklog = d.AcceptBacklog
	}
	if out.KeepAliveInterval == 0 {
		out.KeepAliveInterval = d.KeepAliveInterval
	}
	if out.ConnectionWriteTimeout == 0 {
		out.ConnectionWriteTimeout = d.ConnectionWriteTimeout
	}
	if out.StreamOpenTimeout == 0 {
		out.StreamOpenTimeout = d.StreamOpenTimeout
	}
	if out.StreamCloseTimeout == 0 {
		out.StreamCloseTimeout = d.StreamCloseTimeout
	}
	switch {
	case out.MaxStreamWindow < MinStreamWindow || out.MaxStreamWindow > MaxStreamWindowLimit:
		return nil, fmt.Errorf("%w: MaxStreamWindow %d outside [%d, %d]", ErrInvalidConfig, out.MaxStreamWindow, MinStreamWindow, MaxStreamWindowLimit)
	case out.MaxStreams < 0:
		return nil, fmt.Errorf("%w: negative MaxStreams", ErrInvalidConfig)
	case out.AcceptBacklog < 0:
		return nil, fmt.Errorf("%w: negative AcceptBacklog", ErrInvalidConfig)
	case out.ConnectionWriteTimeout < 0:
		return nil, fmt.Errorf("%w: negative ConnectionWriteTimeout", ErrInvalidConfig)
	}
	return &out, nil
}

// MaxFrameSize returns the largest yamux frame, header included, that a
// session with this configuration sends or receives when both sides use it:
// MaxStreamWindow + FrameHeaderSize. Give the secure connection a frame limit
// of at least this so that one yamux frame is one secure frame. A nil cfg
// means the defaults.
func MaxFrameSize(cfg *Config) int {
	c, err := cfg.populate()
	if err != nil {
		c = DefaultConfig()
		if cfg != nil && cfg.MaxStreamWindow > c.MaxStreamWindow {
			c.MaxStreamWindow = min(cfg.MaxStreamWindow, MaxStreamWindowLimit)
		}
	}
	return int(c.MaxStreamWindow) + FrameHeaderSize
}

// yamuxConfig converts a populated Config.
func (c *Config) yamuxConfig() *yamux.Config {
	y := &yamux.Config{
		// Also sizes yamux's semaphore of unacknowledged opens, which the
		// tracker mirrors so that OpenStream can wait for it under a context.
		AcceptBacklog:          c.AcceptBacklog,
		EnableKeepAlive:        c.KeepAliveInterval > 0,
		KeepAliveInterval:      c.KeepAliveInterval,
		ConnectionWriteTimeout: c.ConnectionWriteTimeout,
		MaxStreamWindowSize:    c.MaxStreamWindow,
		StreamOpenTimeout:      max(c.StreamOpenTimeout, 0),
		StreamCloseTimeout:     max(c.StreamCloseTimeout, 0),
	}
	if y.KeepAliveInterval <= 0 {
		y.KeepAliveInterval = time.Hour // unused, but yamux requires it positive
	}
	if c.Logger != nil {
		y.Logger = slogAdapter{c.Logger}
	} else {
		// Not LogOutput = io.Discard: yamux would make a log.Logger per
		// session and format every line (a reset connection logs one).
		y.Logger = discardLogger{}
	}
	return y
}
