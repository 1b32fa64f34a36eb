package ws

import (
	"cmp"
	"crypto/tls"
	"fmt"
	"strings"
	"time"
)

// Defaults and limits of a Config.
const (
	// DefaultMaxMessage is Config.MaxMessage's default: a tendril record of 64 KiB (the
	// mux's largest data frame) with its secio and mux overhead fits in one message, with
	// room to spare.
	DefaultMaxMessage = 65 << 10
	// MinMessage and MaxMessageLimit bound Config.MaxMessage.
	MinMessage      = 1 << 10
	MaxMessageLimit = 16 << 20

	// DefaultMaxRequestHeader is Config.MaxRequestHeader's default: 8 KiB, several times
	// what a browser's upgrade request takes, and the longest header line nginx accepts
	// by default.
	DefaultMaxRequestHeader = 8 << 10
	// MinRequestHeader and MaxRequestHeaderLimit bound Config.MaxRequestHeader.
	MinRequestHeader      = 1 << 10
	MaxRequestHeaderLimit = 1 << 20

	// DefaultCloseTimeout is Config.CloseTimeout's default.
	DefaultCloseTimeout = time.Second
	// DefaultFrameGrace is Config.FrameGrace's default.
	DefaultFrameGrace = 2 * time.Second
	// DefaultBacklog is Config.Backlog's default.
	DefaultBacklog = 128
	// DefaultPendingTimeout is Config.PendingTimeout's default.
	DefaultPendingTimeout = 5 * time.Second
)

// Config configures a Transport or a Handler. A nil *Config means DefaultConfig(); a zero
// field means its default. New and NewHandler copy it: changing it afterwards has no
// effect, and they never modify it (nor the tls.Configs it points to).
type Config struct {
	// TLS is the server configuration of /wss (and /tls/ws) listeners, with their
	// certificate (see LoadCertificate, SelfSigned). Nil: such listeners are refused
	// (ErrNoTLS); /ws listeners and all dialling work without it.
	TLS *tls.Config

	// ClientTLS configures dialling /wss. Nil: the system's roots, the dialled host as the
	// server name. A ServerName left empty is set to the dialled host. Not used in a
	// browser (GOOS=js), where the browser does TLS.
	ClientTLS *tls.Config

	// MaxMessage is the longest WebSocket message accepted, in bytes; a longer one closes
	// the connection with status 1009 and ErrMessageTooBig. Writes longer than it are sent
	// as several messages, so peers with the same setting never refuse each other's; the
	// byte stream does not depend on where messages end. It bounds what a browser buffers
	// per message; natively nothing is buffered per message. Default DefaultMaxMessage;
	// range MinMessage to MaxMessageLimit.
	MaxMessage int

	// Path is the HTTP path of the WebSocket endpoint, dialled and served: dialler and
	// listener must agree, since a multiaddr does not carry it. Default "/". It must start
	// with "/" and hold no query or fragment.
	Path string

	// MaxRequestHeader bounds the HTTP upgrade request a listener reads (request line and
	// headers), and the response a dialler reads, in bytes; a longer request is answered
	// 431. Default DefaultMaxRequestHeader; range MinRequestHeader to
	// MaxRequestHeaderLimit.
	MaxRequestHeader int

	// CloseTimeout bounds Close: it sends a close frame and waits that long at most for
	// the peer's, reading and dropping what the peer still sends (which spares the peer a
	// TCP reset that would drop data it has not read yet). Default DefaultCloseTimeout.
	CloseTimeout time.Duration

	// FrameGrace has no effect. It bounded how long a read whose deadline passed in the
	// middle of a frame went on reading that frame, when a read interrupted there lost the
	// stream; the frames are now read so that one interrupted anywhere goes on where it
	// stopped, and a deadline interrupts a read at once wherever it passes, as on TCP.
	// It is still validated (not negative).
	//
	// Deprecated: kept so that Configs that set it still compile.
	FrameGrace time.Duration

	// KeepAlive is the TCP keepalive period of dialled and accepted connections, as in
	// net.Dialer: 0 the operating system's default, negative off.
	KeepAlive time.Duration

	// Backlog bounds the upgrade requests a Handler holds for its Accept; when it is full,
	// requests are answered 503 at once. Default DefaultBacklog.
	Backlog int

	// PendingTimeout bounds how long a Handler holds a request until the Service takes
	// it up (Accept, then Upgrade); it is answered 503 after that. Default
	// DefaultPendingTimeout.
	PendingTimeout time.Duration
}

// DefaultConfig returns a new Config with every field at its default (TLS and ClientTLS
// nil).
func DefaultConfig() *Config {
	return &Config{
		MaxMessage:       DefaultMaxMessage,
		Path:             "/",
		MaxRequestHeader: DefaultMaxRequestHeader,
		CloseTimeout:     DefaultCloseTimeout,
		FrameGrace:       DefaultFrameGrace,
		Backlog:          DefaultBacklog,
		PendingTimeout:   DefaultPendingTimeout,
	}
}

// Validate reports whether c is usable (zero fields count as their defaults).
func (c *Config) Validate() error {
	_, err := c.withDefaults()
	return err
}

// withDefaults returns a copy of c with the defaults filled in, validated.
func (c *Config) withDefaults() (*Config, error) {
	d := DefaultConfig()
	if c == nil {
		return d, nil
	}
	out := *c
	out.MaxMessage = cmp.Or(out.MaxMessage, d.MaxMessage)
	out.Path = cmp.Or(out.Path, d.Path)
	out.MaxRequestHeader = cmp.Or(out.MaxRequestHeader, d.MaxRequestHeader)
	out.CloseTimeout = cmp.Or(out.CloseTimeout, d.CloseTimeout)
	out.FrameGrace = cmp.Or(out.FrameGrace, d.FrameGrace)
	out.Backlog = cmp.Or(out.Backlog, d.Backlog)
	out.PendingTimeout = cmp.Or(out.PendingTimeout, d.PendingTimeout)
	switch {
	case out.MaxMessage < MinMessage || out.MaxMessage > MaxMessageLimit:
		return nil, configError("MaxMessage %d outside [%d, %d]", out.MaxMessage, MinMessage, MaxMessageLimit)
	case !strings.HasPrefix(out.Path, "/") || strings.ContainsAny(out.Path, "?# \t\r\n"):
		return nil, configError("Path %q: want an absolute path without query, fragment or spaces", out.Path)
	case out.MaxRequestHeader < MinRequestHeader || out.MaxRequestHeader > MaxRequestHeaderLimit:
		return nil, configError("MaxRequestHeader %d outside [%d, %d]", out.MaxRequestHeader, MinRequestHeader, MaxRequestHeaderLimit)
	case out.CloseTimeout < 0:
		return nil, configError("CloseTimeout %v is negative", out.CloseTimeout)
	case out.FrameGrace < 0:
		return nil, configError("FrameGrace %v is negative", out.FrameGrace)
	case out.Backlog < 0:
		return nil, configError("Backlog %d is negative", out.Backlog)
	case out.PendingTimeout < 0:
		return nil, configError("PendingTimeout %v is negative", out.PendingTimeout)
	}
	return &out, nil
}

func configError(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalidConfig, fmt.Sprintf(format, args...))
}
