package tendril

import (
	"cmp"
	"log/slog"
	"net/netip"
	"slices"
	"time"

	"github.com/tendril-p2p/tendril/cipher/aead"
	"github.com/tendril-p2p/tendril/mux"
	"github.com/tendril-p2p/tendril/protocol"
	"github.com/tendril-p2p/tendril/secio"
	"github.com/tendril-p2p/tendril/transport"
)

// Defaults of Config. A zero field means its default.
const (
	DefaultMaxConnections     = 512
	DefaultMaxMessageSize     = protocol.DefaultMaxMessageSize
	DefaultSendQueueBytes     = 16 << 20
	DefaultDialTimeout        = 10 * time.Second
	DefaultHandshakeTimeout   = 10 * time.Second
	DefaultNegotiationTimeout = 10 * time.Second
	DefaultShutdownTimeout    = 5 * time.Second
	DefaultEventBuffer        = 256
	DefaultMaxMemory          = 1 << 30
	DefaultRequestTimeout     = 10 * time.Second
	DefaultMaxRequests        = 256
)

// Config configures a Service. The zero value is usable: every zero field takes its default.
// New copies the Config; changing it afterwards has no effect.
type Config struct {
	// PrivateKey is the node's identity. Nil: a fresh key is generated, so the node gets a
	// new peer ID each run (use secio.LoadOrCreateKeyFile to keep one).
	PrivateKey *secio.PrivateKey

	// Protocols are the protocols this node speaks. Names must be unique. More can be added
	// and removed while the Service runs (Service.AddProtocol, Service.RemoveProtocol).
	Protocols []Protocol

	// Ciphers is the AEAD suites offered, in preference order. Nil: aead.Preferred(), which
	// puts AES-128-GCM first where the CPU has AES instructions, ChaCha20-Poly1305 otherwise.
	Ciphers []aead.Suite

	// KeyExchanges is the secio key exchanges accepted, in preference order. Nil:
	// secio.DefaultKeyExchanges(), the post-quantum hybrids P256MLKEM768 and X25519MLKEM768
	// first, then P-256 and X25519. A dialer sends a key share for the first; a listener that prefers another
	// asks for it, at the cost of one more round trip.
	KeyExchanges []secio.KeyExchange

	// MaxConnections is the session budget that Admission splits by direction when its
	// MaxInbound and MaxOutbound are zero: a quarter (at least 1) for outbound sessions and
	// dials in progress, the rest for inbound sessions. Handshakes in progress are not
	// counted here (Admission.MaxHandshakes). Default DefaultMaxConnections.
	MaxConnections int

	// Admission holds the limits by direction, address and subnet, the watermarks, the idle
	// timeout and the Gater that decide which connections the Service takes (admission.go).
	// The zero value means the defaults.
	Admission Admission

	// MaxMessageSize bounds one protocol message, in both directions. Default 4 MiB.
	MaxMessageSize int

	// SendQueueBytes bounds the bytes queued for sending on one session, all protocols
	// together. Messages are counted when queued; beyond the bound Send returns
	// ErrSessionBlocked and SendContext waits. Default 16 MiB; at least MaxMessageSize.
	SendQueueBytes int

	// DialTimeout bounds the TCP connect of a Dial. Default 10 s.
	DialTimeout time.Duration
	// RequirePeerID makes Dial refuse an address without /p2p/ID (ErrInvalidAddr): such an
	// address reaches whoever answers there, unverified. Off by default.
	RequirePeerID bool
	// HandshakeTimeout bounds the secio handshake. Default 10 s.
	HandshakeTimeout time.Duration
	// NegotiationTimeout bounds protocol negotiation on a stream this node opens. Default
	// 10 s. A stream the peer opens gets half as long again to send its request. At most
	// 32 streams a peer opens negotiate at once in a session; more wait, unacknowledged, in
	// the mux's accept backlog (so the peer's opens slow down), and beyond it are refused.
	NegotiationTimeout time.Duration
	// ShutdownTimeout bounds the graceful part of Close. Default 5 s.
	ShutdownTimeout time.Duration
	// HandlerExitTimeout bounds how long a session that has ended waits for its handlers to
	// return once their Context is done. A handler still running then is logged (warning)
	// and abandoned: the session is unregistered, Session.Done closed and
	// EventSessionClosed emitted without it, and Close does not wait for it. Default
	// DefaultHandlerExitTimeout (5 s).
	HandlerExitTimeout time.Duration

	// RequestTimeout bounds a Session.Request whose context has no deadline. Default
	// DefaultRequestTimeout (10 s).
	RequestTimeout time.Duration
	// MaxRequests bounds the requests a session has in flight at once (Session.Request);
	// beyond, Request fails with ErrTooManyRequests. Default DefaultMaxRequests (256). What
	// the peer may make this node serve at once is bounded by the mux's MaxStreams (see
	// StreamHandler).
	MaxRequests int

	// MaxFrameSize is the secio frame limit. Zero: large enough for one full yamux frame of
	// the mux window, so that every yamux frame is one encrypted frame.
	MaxFrameSize int

	// MaxSessionMemory bounds what one peer can make this node buffer: what its session's
	// streams hold received and unread, and the windows of streams that grew (see
	// mux.Budget). Data beyond it resets its stream (mux.ErrMemoryBudget), windows stop
	// growing, and the session lives on. Zero: the mux's MaxSessionMemory (64 MiB by
	// default: one stream at full speed on a 100 ms path, whose window grows to 32 MiB,
	// and room for many more).
	MaxSessionMemory int64

	// MaxMemory bounds the same for all sessions together, and with it the record buffers
	// of every connection, handshakes included (at most 64 KiB beyond what has arrived of
	// a record; see secio.MemoryBudget). Default DefaultMaxMemory (1 GiB).
	// Its last eighth is kept for sessions holding at most mux.NewcomerShare (1 MiB), so
	// that sessions filling it cannot lock out a new peer or this node's own streams.
	MaxMemory int64

	// Mux configures the stream multiplexer. Nil: mux.DefaultConfig(). Its keepalive
	// (KeepAliveInterval, answered within ConnectionWriteTimeout) is run by the Service for
	// all sessions from one timer, rather than by a goroutine per session.
	Mux *mux.Config

	// Transports dial and listen: for each address, the first that handles it. Nil: TCP
	// (transport/tcp) and WebSocket (transport/ws: /tcp/N/ws, and /tcp/N/wss when dialling
	// or with a certificate). Add a transport/memory host to run nodes in one process.
	Transports []transport.Transport

	// TrustedProxies lists the networks of the reverse proxies this node runs behind:
	// their connections may begin with a PROXY protocol v1/v2 header (TCP, WebSocket) and
	// their WebSocket upgrades may carry X-Forwarded-For, and the Service believes them:
	// the session's remote address is the client's, and admission counts the client's
	// address and subnet (per-IP and per-subnet caps, handshake rate) as if it had
	// connected itself. The proxies' own connections are exempt from those caps until
	// then. From addresses outside these networks such headers are not believed. Nil:
	// none (behind a proxy on loopback, every client would then look like 127.0.0.1,
	// which Admission.Unlimited exempts by default: trust the proxy to keep the caps).
	TrustedProxies []netip.Prefix

	// LegacyTEA enables the insecure TEA legacy framing for ListenLegacy and DialLegacy.
	// Nil (the default): the node never speaks it.
	LegacyTEA *LegacyTEAConfig

	// ResetOnClose closes TCP connections with a reset (SO_LINGER 0) instead of a FIN, as
	// go-libp2p does, so that closed connections leave no socket in TIME_WAIT: a node that
	// churns through many short connections would otherwise hold thousands of them. A
	// graceful close between tendril nodes leaves none without it (the listener resets the
	// connection once the dialer's FIN has come: see secio.Conn.Close); this covers the
	// rest: sessions aborted, peers that never close their side. The cost: bytes still in
	// the kernel's send buffer when a session closes are dropped, so the peer may see a
	// reset instead of the last frames of a graceful close. Default false.
	ResetOnClose bool

	// EventBuffer is the capacity of the Events channel. Default 256. Events that do not
	// fit are dropped and counted (Service.DroppedEvents); the Service never blocks on them.
	// Only lifecycle events may use the second half (see Service.Events).
	EventBuffer int

	// Logger receives the Service's logs. Nil: silent.
	Logger *slog.Logger
}

// LegacyTEAConfig configures the TEA legacy mode. TEA has no integrity protection and no peer
// authentication: sessions in this mode are marked insecure and have no peer ID.
type LegacyTEAConfig struct {
	// Key is the 16-byte key both sides share.
	Key []byte
}

// Validate reports the first problem with the configuration, wrapping ErrInvalidConfig.
// Zero fields are valid (they mean their defaults).
func (c *Config) Validate() error {
	if c == nil {
		return nil
	}
	if c.MaxConnections < 0 || c.MaxMessageSize < 0 || c.SendQueueBytes < 0 || c.EventBuffer < 0 || c.MaxFrameSize < 0 ||
		c.MaxSessionMemory < 0 || c.MaxMemory < 0 || c.MaxRequests < 0 {
		return configError("negative limit")
	}
	if c.DialTimeout < 0 || c.HandshakeTimeout < 0 || c.NegotiationTimeout < 0 || c.ShutdownTimeout < 0 || c.HandlerExitTimeout < 0 ||
		c.RequestTimeout < 0 {
		return configError("negative timeout")
	}
	if err := c.Admission.validate(); err != nil {
		return err
	}
	maxConns := c.MaxConnections
	maxConns = cmp.Or(maxConns, DefaultMaxConnections)
	if _, err := c.Admission.withDefaults(maxConns); err != nil {
		return err
	}
	maxMsg := c.MaxMessageSize
	maxMsg = cmp.Or(maxMsg, DefaultMaxMessageSize)
	if c.SendQueueBytes != 0 && c.SendQueueBytes < maxMsg {
		return configError("SendQueueBytes %d smaller than MaxMessageSize %d", c.SendQueueBytes, maxMsg)
	}
	seen := make(map[string]bool, len(c.Protocols))
	for i := range c.Protocols {
		p := &c.Protocols[i]
		if err := p.validate(); err != nil {
			return configError("%w", err)
		}
		if seen[p.Name] {
			return configError("%w %q: registered twice", ErrInvalidProtocol, p.Name)
		}
		seen[p.Name] = true
	}
	for _, s := range c.Ciphers {
		if !s.Valid() {
			return configError("unknown cipher suite %d", s)
		}
	}
	for _, k := range c.KeyExchanges {
		if !k.Valid() {
			return configError("unknown key exchange %d", k)
		}
	}
	if c.Mux != nil || c.MaxSessionMemory != 0 {
		m := mux.Config{}
		if c.Mux != nil {
			m = *c.Mux
		}
		if c.MaxSessionMemory != 0 {
			m.MaxSessionMemory = c.MaxSessionMemory
		}
		if err := m.Validate(); err != nil {
			return configError("%w", err)
		}
	}
	for _, p := range c.TrustedProxies {
		if !p.IsValid() {
			return configError("invalid trusted proxy network %v", p)
		}
	}
	for i, t := range c.Transports {
		if t == nil {
			return configError("Transports[%d] is nil", i)
		}
	}
	if c.LegacyTEA != nil && len(c.LegacyTEA.Key) != 16 {
		return configError("legacy TEA key must be 16 bytes, got %d", len(c.LegacyTEA.Key))
	}
	return nil
}

// withDefaults returns a copy of c with every zero field set to its default.
func (c Config) withDefaults() Config {
	c.MaxConnections = cmp.Or(c.MaxConnections, DefaultMaxConnections)
	c.MaxMessageSize = cmp.Or(c.MaxMessageSize, DefaultMaxMessageSize)
	c.SendQueueBytes = cmp.Or(c.SendQueueBytes, max(DefaultSendQueueBytes, c.MaxMessageSize))
	c.DialTimeout = cmp.Or(c.DialTimeout, DefaultDialTimeout)
	c.HandshakeTimeout = cmp.Or(c.HandshakeTimeout, DefaultHandshakeTimeout)
	c.NegotiationTimeout = cmp.Or(c.NegotiationTimeout, DefaultNegotiationTimeout)
	c.ShutdownTimeout = cmp.Or(c.ShutdownTimeout, DefaultShutdownTimeout)
	c.HandlerExitTimeout = cmp.Or(c.HandlerExitTimeout, DefaultHandlerExitTimeout)
	c.RequestTimeout = cmp.Or(c.RequestTimeout, DefaultRequestTimeout)
	c.MaxRequests = cmp.Or(c.MaxRequests, DefaultMaxRequests)
	c.Admission, _ = c.Admission.withDefaults(c.MaxConnections) // checked by Validate
	c.EventBuffer = cmp.Or(c.EventBuffer, DefaultEventBuffer)
	c.MaxMemory = cmp.Or(c.MaxMemory, DefaultMaxMemory)
	if c.Mux == nil {
		c.Mux = mux.DefaultConfig()
	} else {
		m := *c.Mux
		c.Mux = &m
	}
	c.Mux.KeepAliveInterval = cmp.Or(c.Mux.KeepAliveInterval, mux.DefaultConfig().KeepAliveInterval)
	c.Mux.ConnectionWriteTimeout = cmp.Or(c.Mux.ConnectionWriteTimeout, mux.DefaultConfig().ConnectionWriteTimeout)
	if c.MaxSessionMemory != 0 {
		c.Mux.MaxSessionMemory = c.MaxSessionMemory
	}
	c.MaxFrameSize = cmp.Or(c.MaxFrameSize, mux.MaxFrameSize(c.Mux))
	if c.Ciphers == nil {
		c.Ciphers = aead.Preferred()
	} else {
		c.Ciphers = append([]aead.Suite(nil), c.Ciphers...)
	}
	c.Protocols = append([]Protocol(nil), c.Protocols...)
	c.Transports = slices.Clone(c.Transports)
	c.TrustedProxies = slices.Clone(c.TrustedProxies)
	if c.LegacyTEA != nil {
		l := LegacyTEAConfig{Key: append([]byte(nil), c.LegacyTEA.Key...)}
		c.LegacyTEA = &l
	}
	c.Logger = cmp.Or(c.Logger, slog.New(slog.DiscardHandler))
	return c
}
