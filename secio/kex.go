package secio

import (
	"crypto/ecdh"
	"crypto/mlkem"
	"fmt"
	"io"
)

// KeyExchange identifies an ephemeral key exchange. Its value is the code
// sent on the wire in a ClientHello and ServerHello; the zero value is
// invalid.
type KeyExchange uint8

// The supported key exchanges.
const (
	// X25519 is the Diffie-Hellman function of [RFC 7748] over Curve25519
	// (32-byte public keys).
	//
	// [RFC 7748]: https://www.rfc-editor.org/rfc/rfc7748
	X25519 KeyExchange = 1
	// P256 is ECDH over NIST P-256 with uncompressed 65-byte public keys
	// (SEC 1, section 2.3.3).
	P256 KeyExchange = 2
	// X25519MLKEM768 is the hybrid of ML-KEM-768 ([FIPS 203]) and X25519,
	// laid out as TLS's X25519MLKEM768 ([draft-ietf-tls-ecdhe-mlkem]): the
	// dialer's share is the ML-KEM-768 encapsulation key (1184 bytes) then
	// its X25519 key, the listener's share the ML-KEM ciphertext (1088
	// bytes) then its X25519 key, and the shared secret is the ML-KEM
	// shared key followed by the X25519 one (64 bytes). It stays secure as
	// long as either half does.
	//
	// [FIPS 203]: https://doi.org/10.6028/NIST.FIPS.203
	// [draft-ietf-tls-ecdhe-mlkem]: https://datatracker.ietf.org/doc/draft-ietf-tls-ecdhe-mlkem/
	X25519MLKEM768 KeyExchange = 3
)

// DefaultKeyExchanges returns the key exchanges offered by default, most
// preferred first: X25519MLKEM768, then P-256 and X25519. Each call returns
// a new slice.
//
// The hybrid comes first because a recording of today's traffic must stay
// private once quantum computers can break elliptic curves; what it costs
// in CPU and bytes per connection is in docs/PERFORMANCE.md. The classical
// exchanges stay in the list so that a peer configured without the hybrid
// is still served, after one retry round trip. Of the two, P-256 comes
// first: crypto/ecdh makes its keys from a fixed-base table, X25519's with
// the full ladder, so P-256 connects faster.
func DefaultKeyExchanges() []KeyExchange {
	return []KeyExchange{X25519MLKEM768, P256, X25519}
}

// Valid reports whether k is a key exchange this package implements.
func (k KeyExchange) Valid() bool { return k >= X25519 && k <= X25519MLKEM768 }

// String returns "X25519", "P-256", "X25519MLKEM768" or "KeyExchange(n)".
func (k KeyExchange) String() string {
	switch k {
	case X25519:
		return "X25519"
	case P256:
		return "P-256"
	case X25519MLKEM768:
		return "X25519MLKEM768"
	}
	return fmt.Sprintf("KeyExchange(%d)", uint8(k))
}

// Sizes of the hybrid's parts.
const (
	x25519KeySize = 32
	p256KeySize   = 65
	hybridDialer  = mlkem.EncapsulationKeySize768 + x25519KeySize // 1216
	hybridListen  = mlkem.CiphertextSize768 + x25519KeySize       // 1120
	// maxShareSize is the largest share of any exchange, either side.
	maxShareSize = hybridDialer
	// maxSecretSize is the largest shared secret (the hybrid's).
	maxSecretSize = mlkem.SharedKeySize + 32
	// mlkemSeedSize is the seed of an ML-KEM-768 decapsulation key.
	mlkemSeedSize = mlkem.SeedSize
)

// dialerShareSize is the length of a dialer's key share for k (0 for a code
// this package does not implement).
func (k KeyExchange) dialerShareSize() int {
	switch k {
	case X25519:
		return x25519KeySize
	case P256:
		return p256KeySize
	case X25519MLKEM768:
		return hybridDialer
	}
	return 0
}

// listenerShareSize is the length of a listener's key share for k.
func (k KeyExchange) listenerShareSize() int {
	if k == X25519MLKEM768 {
		return hybridListen
	}
	return k.dialerShareSize()
}

func (k KeyExchange) curve() ecdh.Curve {
	if k == P256 {
		return ecdh.P256()
	}
	return ecdh.X25519()
}

// ephemeral is one side's ephemeral key material for a key exchange.
type ephemeral struct {
	kex KeyExchange
	ec  *ecdh.PrivateKey
	kem *mlkem.DecapsulationKey768 // the dialer's, for X25519MLKEM768
}

// generateEphemeral draws an ephemeral key for k from r. The scalar (and
// for the hybrid, first the ML-KEM seed) is read from r directly, and a
// P-256 scalar out of range is redrawn, so that a fixed r yields a fixed
// key.
func generateEphemeral(k KeyExchange, r io.Reader, kem bool) (ephemeral, error) {
	e := ephemeral{kex: k}
	var buf [64]byte
	defer clear(buf[:])
	if k == X25519MLKEM768 && kem {
		if _, err := io.ReadFull(r, buf[:mlkemSeedSize]); err != nil {
			return e, fmt.Errorf("secio: ephemeral key: %w", err)
		}
		dk, err := mlkem.NewDecapsulationKey768(buf[:mlkemSeedSize])
		if err != nil {
			return e, fmt.Errorf("secio: ephemeral key: %w", err)
		}
		e.kem = dk
	}
	c := k.curve()
	for range 64 {
		if _, err := io.ReadFull(r, buf[:32]); err != nil {
			return e, fmt.Errorf("secio: ephemeral key: %w", err)
		}
		priv, err := c.NewPrivateKey(buf[:32])
		if err == nil {
			e.ec = priv
			return e, nil
		}
	}
	return e, fmt.Errorf("secio: ephemeral key: no valid scalar after 64 draws")
}

// appendDialerShare appends the dialer's key share: the ML-KEM
// encapsulation key (hybrid only), then the elliptic-curve public key.
func (e *ephemeral) appendDialerShare(b []byte) []byte {
	if e.kem != nil {
		b = append(b, e.kem.EncapsulationKey().Bytes()...)
	}
	return append(b, e.ec.PublicKey().Bytes()...)
}

// encapsulate768 runs ML-KEM-768 encapsulation; r is used only by tests,
// which replace it with a derandomized one to make vectors (crypto/mlkem
// takes no randomness source).
var encapsulate768 = func(ek *mlkem.EncapsulationKey768, _ io.Reader) (shared, ct []byte, err error) {
	shared, ct = ek.Encapsulate()
	return shared, ct, nil
}

// listenerSecret runs the listener's side of the exchange with the
// dialer's share: it appends the listener's share to b and the shared
// secret to secret. Malformed shares and degenerate results (an X25519
// low-order point) wrap ErrInvalidKeyExchange.
func (e *ephemeral) listenerSecret(b, secret []byte, peer []byte, r io.Reader) (share, sec []byte, err error) {
	if e.kex == X25519MLKEM768 {
		ek, err := mlkem.NewEncapsulationKey768(peer[:mlkem.EncapsulationKeySize768])
		if err != nil {
			return b, secret, fmt.Errorf("%w: ML-KEM-768 encapsulation key: %v", ErrInvalidKeyExchange, err)
		}
		ss, ct, err := encapsulate768(ek, r)
		if err != nil {
			return b, secret, fmt.Errorf("secio: ML-KEM-768: %w", err)
		}
		b = append(b, ct...)
		secret = append(secret, ss...)
		clear(ss)
		peer = peer[mlkem.EncapsulationKeySize768:]
	}
	b = append(b, e.ec.PublicKey().Bytes()...)
	secret, err = e.ecdh(secret, peer)
	return b, secret, err
}

// dialerSecret appends the shared secret for the listener's share to
// secret.
func (e *ephemeral) dialerSecret(secret, peer []byte) ([]byte, error) {
	if e.kex == X25519MLKEM768 {
		ss, err := e.kem.Decapsulate(peer[:mlkem.CiphertextSize768])
		if err != nil {
			return secret, fmt.Errorf("%w: ML-KEM-768 ciphertext: %v", ErrInvalidKeyExchange, err)
		}
		secret = append(secret, ss...)
		clear(ss)
		peer = peer[mlkem.CiphertextSize768:]
	}
	return e.ecdh(secret, peer)
}

// ecdh appends the elliptic-curve shared secret with the peer's public key.
func (e *ephemeral) ecdh(secret, peer []byte) ([]byte, error) {
	c := e.kex
	if c == X25519MLKEM768 {
		c = X25519
	}
	pub, err := c.curve().NewPublicKey(peer)
	if err != nil {
		return secret, fmt.Errorf("%w: %s public key: %v", ErrInvalidKeyExchange, c, err)
	}
	s, err := e.ec.ECDH(pub)
	if err != nil {
		return secret, fmt.Errorf("%w: %s: %v", ErrInvalidKeyExchange, c, err)
	}
	secret = append(secret, s...)
	clear(s)
	return secret, nil
}
