package secio

import (
	"crypto/ecdh"
	"fmt"
	"io"
)

// KeyExchange identifies an ephemeral Diffie-Hellman group. Its value is the
// code sent on the wire in a Propose; the zero value is invalid.
type KeyExchange uint8

// The supported key exchanges. Code 3 is reserved for a hybrid X25519 +
// ML-KEM-768 exchange.
const (
	// X25519 is the Diffie-Hellman function of [RFC 7748] over Curve25519
	// (32-byte public keys).
	//
	// [RFC 7748]: https://www.rfc-editor.org/rfc/rfc7748
	X25519 KeyExchange = 1
	// P256 is ECDH over NIST P-256 with uncompressed 65-byte public keys
	// (SEC 1, section 2.3.3).
	P256 KeyExchange = 2
)

// DefaultKeyExchanges returns the key exchanges offered by default, most
// preferred first: P-256, then X25519. Each call returns a new slice.
//
// P-256 comes first for speed, both being 128-bit secure, constant-time
// and from crypto/ecdh: a handshake costs each side a key generation and
// an ECDH, and crypto/ecdh makes a P-256 key with a precomputed fixed-base
// table (about 15 us here) but an X25519 key with the same Montgomery
// ladder as the ECDH (about 45 us); the ECDHs cost about the same (52-56
// us). That is about 55 us of CPU per connection (both ends) of roughly
// 700, measured as 5-10% more connections per second. See
// docs/PERFORMANCE.md.
func DefaultKeyExchanges() []KeyExchange { return []KeyExchange{P256, X25519} }

// Valid reports whether k is a key exchange this package implements.
func (k KeyExchange) Valid() bool { return k == X25519 || k == P256 }

// String returns "X25519", "P-256", or "KeyExchange(n)".
func (k KeyExchange) String() string {
	switch k {
	case X25519:
		return "X25519"
	case P256:
		return "P-256"
	}
	return fmt.Sprintf("KeyExchange(%d)", uint8(k))
}

// publicKeySize is the length of k's public keys on the wire (0 for a code
// this package does not implement).
func (k KeyExchange) publicKeySize() int {
	switch k {
	case X25519:
		return 32
	case P256:
		return 65
	}
	return 0
}

// maxPublicKeySize is the largest publicKeySize.
const maxPublicKeySize = 65

func (k KeyExchange) curve() ecdh.Curve {
	if k == P256 {
		return ecdh.P256()
	}
	return ecdh.X25519()
}

// generateEphemeral draws an ephemeral private key for k from r into buf,
// which it clears. The scalar bytes are read from r directly (and rejected
// and redrawn when out of range for P-256), so that a fixed r yields a
// fixed key.
func generateEphemeral(k KeyExchange, r io.Reader, buf *[32]byte) (*ecdh.PrivateKey, error) {
	c := k.curve()
	for range 64 {
		if _, err := io.ReadFull(r, buf[:]); err != nil {
			return nil, fmt.Errorf("secio: ephemeral key: %w", err)
		}
		priv, err := c.NewPrivateKey(buf[:])
		clear(buf[:])
		if err == nil {
			return priv, nil
		}
	}
	return nil, fmt.Errorf("secio: ephemeral key: no valid scalar after 64 draws")
}

// sharedSecret runs ECDH with the peer's encoded public key. Malformed keys
// and degenerate results (an X25519 low-order point gives all zeros, which
// crypto/ecdh refuses) wrap ErrInvalidKeyExchange.
func sharedSecret(k KeyExchange, priv *ecdh.PrivateKey, peer []byte) ([]byte, error) {
	pub, err := k.curve().NewPublicKey(peer)
	if err != nil {
		return nil, fmt.Errorf("%w: %s public key: %v", ErrInvalidKeyExchange, k, err)
	}
	s, err := priv.ECDH(pub)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrInvalidKeyExchange, k, err)
	}
	return s, nil
}
