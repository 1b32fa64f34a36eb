package secio

import (
	"cmp"
	"crypto/rand"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"time"

	"github.com/tendril-p2p/tendril/cipher/aead"
)

// Defaults and limits of Config and LegacyConfig.
const (
	// DefaultHandshakeTimeout bounds a handshake when Config.HandshakeTimeout
	// is zero.
	DefaultHandshakeTimeout = 10 * time.Second
	// DefaultHelloTimeout bounds how long a Server waits for the dialer's
	// first message when Config.HelloTimeout is zero.
	DefaultHelloTimeout = 3 * time.Second
	// DefaultMaxFrameSize is the largest plaintext per frame when
	// MaxFrameSize is zero (1 MiB).
	DefaultMaxFrameSize = 1 << 20
	// MaxFrameSizeLimit is the largest MaxFrameSize accepted (16 MiB).
	MaxFrameSizeLimit = 16 << 20
	// MinFrameSize is the smallest MaxFrameSize accepted (1 KiB), locally
	// and in a remote hello.
	MinFrameSize = 1 << 10
	// maxListLen caps the number of key exchanges or ciphers in a
	// ClientHello.
	maxListLen = 16
)

// Config configures Client and Server. A Config must not be modified after
// it has been passed to Client or Server; it may be shared by many
// connections.
type Config struct {
	// PrivateKey is the local identity. Required.
	PrivateKey *PrivateKey

	// ExpectedPeer, if not zero, is the only remote identity accepted;
	// another fails with ErrPeerIDMismatch. A Client checks it as soon as it
	// has decrypted the listener's identity, before it reveals its own or
	// accepts any data.
	ExpectedPeer PeerID

	// Ciphers lists the AEAD suites offered, most preferred first. Nil
	// means aead.Preferred().
	Ciphers []aead.Suite

	// KeyExchanges lists the ephemeral key exchanges accepted, most
	// preferred first. Nil means DefaultKeyExchanges() (P256MLKEM768,
	// X25519MLKEM768, then P-256 and X25519). A Client sends a key share for the first; a
	// Server uses the dialer's share if its exchange is in this list, and
	// otherwise asks for a share of its most preferred one that the dialer
	// offers (one more round trip).
	KeyExchanges []KeyExchange

	// HandshakeTimeout bounds the whole handshake. Zero means
	// DefaultHandshakeTimeout.
	HandshakeTimeout time.Duration

	// HelloTimeout bounds how long a Server waits for the dialer's first
	// message (within HandshakeTimeout), so that a connection that says
	// nothing is dropped early. Zero means DefaultHelloTimeout. Servers
	// only; it needs a connection with deadlines.
	HelloTimeout time.Duration

	// MaxFrameSize is the largest plaintext carried by one frame, in bytes,
	// and the largest this side accepts. Each side advertises its value in
	// its hello and sends frames of at most the smaller of the two. Zero
	// means DefaultMaxFrameSize; otherwise it must lie in
	// [MinFrameSize, MaxFrameSizeLimit].
	MaxFrameSize int

	// Rand is the source of the handshake nonces and ephemeral keys. Nil
	// means crypto/rand; set it only for reproducible tests. (ML-KEM
	// encapsulation takes no randomness source in crypto/mlkem: it always
	// uses crypto/rand, except in this package's own tests.)
	Rand io.Reader

	// Logger receives debug records about handshakes (never key material).
	// Nil means silent.
	Logger *slog.Logger

	// Memory, if not nil, is charged for the read buffers each Conn holds
	// beyond its own small array, from the handshake on; a Conn whose
	// buffer it refuses fails with ErrMemoryBudget (see MemoryBudget). Nil
	// charges nothing; the buffers are bounded all the same.
	Memory MemoryBudget
}

// DefaultConfig returns a Config with every optional field set to its
// default. PrivateKey is left nil and must be set by the caller.
func DefaultConfig() *Config {
	return &Config{
		Ciphers:          aead.Preferred(),
		KeyExchanges:     DefaultKeyExchanges(),
		HandshakeTimeout: DefaultHandshakeTimeout,
		HelloTimeout:     DefaultHelloTimeout,
		MaxFrameSize:     DefaultMaxFrameSize,
	}
}

// listEntry is an entry of a Config's preference lists: a cipher suite or a key exchange.
type listEntry interface {
	~uint8
	Valid() bool
	String() string
}

// validateList checks a preference list: nil (the defaults), or 1 to maxListLen valid
// entries, none listed twice. what names an entry in the errors, invalid says what is wrong
// with one that is not valid.
func validateList[T listEntry](list []T, what, invalid string) error {
	if list == nil {
		return nil
	}
	if len(list) == 0 || len(list) > maxListLen {
		return fmt.Errorf("%w: %d %ss, want 1 to %d", ErrInvalidConfig, len(list), what, maxListLen)
	}
	for i, v := range list {
		if !v.Valid() {
			return fmt.Errorf("%w: %s %d %s", ErrInvalidConfig, what, uint8(v), invalid)
		}
		if slices.Contains(list[:i], v) {
			return fmt.Errorf("%w: %s %s listed twice", ErrInvalidConfig, what, v)
		}
	}
	return nil
}

// Validate reports the first problem of c, wrapped in ErrInvalidConfig.
func (c *Config) Validate() error {
	if c == nil {
		return fmt.Errorf("%w: nil Config (PrivateKey is required)", ErrInvalidConfig)
	}
	if c.PrivateKey == nil || c.PrivateKey.pub == nil {
		return fmt.Errorf("%w: PrivateKey is required", ErrInvalidConfig)
	}
	if err := validateList(c.Ciphers, "cipher", "is not a valid suite"); err != nil {
		return err
	}
	if err := validateList(c.KeyExchanges, "key exchange", "is not supported"); err != nil {
		return err
	}
	if c.HandshakeTimeout < 0 {
		return fmt.Errorf("%w: negative HandshakeTimeout %v", ErrInvalidConfig, c.HandshakeTimeout)
	}
	if c.HelloTimeout < 0 {
		return fmt.Errorf("%w: negative HelloTimeout %v", ErrInvalidConfig, c.HelloTimeout)
	}
	if err := validFrameSize(c.MaxFrameSize); err != nil {
		return err
	}
	return nil
}

func validFrameSize(n int) error {
	if n != 0 && (n < MinFrameSize || n > MaxFrameSizeLimit) {
		return fmt.Errorf("%w: MaxFrameSize %d outside [%d, %d]", ErrInvalidConfig, n, MinFrameSize, MaxFrameSizeLimit)
	}
	return nil
}

// resolved is a validated Config with defaults filled in.
type resolved struct {
	key      *PrivateKey
	expected PeerID
	ciphers  []aead.Suite
	kexes    []KeyExchange
	timeout  time.Duration
	maxFrame int
	rand     io.Reader
	logger   *slog.Logger
	memory   MemoryBudget

	helloTimeout time.Duration
}

// Defaults shared by every handshake; never modified.
var (
	defaultCiphers = aead.Preferred()
	defaultKexes   = DefaultKeyExchanges()
)

// withDefaults validates c and fills r with its values, zero ones replaced by the defaults
// (in place: the handshake state keeps r, and its size class matters).
func (c *Config) withDefaults(r *resolved) error {
	if err := c.Validate(); err != nil {
		return err
	}
	*r = resolved{
		key:      c.PrivateKey,
		expected: c.ExpectedPeer,
		ciphers:  c.Ciphers,
		kexes:    c.KeyExchanges,
		timeout:  c.HandshakeTimeout,
		maxFrame: c.MaxFrameSize,
		rand:     c.Rand,
		logger:   c.Logger,
		memory:   c.Memory,

		helloTimeout: c.HelloTimeout,
	}
	if r.ciphers == nil {
		r.ciphers = defaultCiphers
	}
	if r.kexes == nil {
		r.kexes = defaultKexes
	}
	r.timeout = cmp.Or(r.timeout, DefaultHandshakeTimeout)
	r.helloTimeout = cmp.Or(r.helloTimeout, DefaultHelloTimeout)
	r.maxFrame = cmp.Or(r.maxFrame, DefaultMaxFrameSize)
	r.rand = cmp.Or(r.rand, rand.Reader)
	return nil
}

// LegacyConfig configures LegacyTEA. Nil means the defaults.
type LegacyConfig struct {
	// MaxFrameSize is the largest plaintext carried by one frame, sent or
	// accepted. Both sides must use the same value (there is no
	// negotiation in legacy mode). Zero means DefaultMaxFrameSize; otherwise
	// it must lie in [MinFrameSize, MaxFrameSizeLimit].
	MaxFrameSize int

	// Memory, if not nil, is charged for the Conn's read buffers, as
	// Config.Memory.
	Memory MemoryBudget
}

// DefaultLegacyConfig returns a LegacyConfig with its defaults set.
func DefaultLegacyConfig() *LegacyConfig {
	return &LegacyConfig{MaxFrameSize: DefaultMaxFrameSize}
}

// Validate reports the first problem of c, wrapped in ErrInvalidConfig. A
// nil LegacyConfig is valid.
func (c *LegacyConfig) Validate() error {
	if c == nil {
		return nil
	}
	return validFrameSize(c.MaxFrameSize)
}
