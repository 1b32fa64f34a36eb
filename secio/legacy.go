package secio

import (
	"fmt"
	"net"

	"github.com/tendril-p2p/tendril/cipher/tea"
)

// LegacyKeySize is the length of the shared key of LegacyTEA.
const LegacyKeySize = tea.KeySize

// LegacyTEA wraps conn in the legacy TEA framing, for peers that speak
// nothing else. There is no handshake: both sides must already share the
// 16-byte key. Each frame is a 4-byte big-endian length followed by a
// cipher/tea ciphertext of at most cfg.MaxFrameSize bytes of plaintext
// (nil cfg means the defaults).
//
// Legacy mode is NOT secure. TEA has no integrity check: an attacker on the
// path can modify, truncate, reorder or replay frames without detection,
// and nothing authenticates the peer. The returned Conn reports
// Secure() == false and a zero RemotePeer. Use it only where the remote
// cannot be upgraded, and never negotiate it: Client and Server never fall
// back to it.
//
// On error conn is left open and untouched.
func LegacyTEA(conn net.Conn, key []byte, cfg *LegacyConfig) (*Conn, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if len(key) != LegacyKeySize {
		return nil, fmt.Errorf("%w: legacy TEA key is %d bytes, want %d", ErrInvalidKey, len(key), LegacyKeySize)
	}
	maxFrame := DefaultMaxFrameSize
	if cfg != nil && cfg.MaxFrameSize != 0 {
		maxFrame = cfg.MaxFrameSize
	}
	tc, err := tea.NewCipher(key)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidKey, err)
	}
	c := newConn(conn)
	if cfg != nil {
		c.in.mem = cfg.Memory
	}
	c.in.tea = tc
	c.in.maxLen = tea.CiphertextLen(maxFrame)
	c.out.tea = tc
	c.out.maxLen = maxFrame
	return c, nil
}
