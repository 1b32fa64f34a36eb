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
	// P256MLKEM768 is the hybrid of ECDH over P-256 and ML-KEM-768, laid out as
	// TLS's SecP256r1MLKEM768 ([draft-ietf-tls-ecdhe-mlkem]): the elliptic-curve
	// part comes first, in both shares and in the secret. The dialer's share is
	// its uncompressed P-256 key (65 bytes) then the ML-KEM-768 encapsulation key
	// (1184), the listener's its P-256 key then the ML-KEM ciphertext (1088), and
	// the shared secret the ECDH output followed by the ML-KEM shared key (64
	// bytes). It stays secure as long as either half does.
	P256MLKEM768 KeyExchange = 4
)

// DefaultKeyExchanges returns the key exchanges offered by default, most
// preferred first: P256MLKEM768, X25519MLKEM768, then P-256 and X25519. Each
// call returns a new slice.
//
// The hybrids come first because a recording of today's traffic must stay
// private once quantum computers can break elliptic curves; what they cost in
// CPU and bytes per connection is in docs/PERFORMANCE.md. Of each pair, the
// P-256 one comes first: crypto/ecdh makes a P-256 key from a precomputed
// fixed-base table and an X25519 key with the full ladder, so P-256 connects
// faster, and its ECDH costs the same. X25519MLKEM768 stays in the list for
// peers that offer only the TLS default, the classical exchanges for peers
// configured without a hybrid; either is served after one retry round trip
// at most.
func DefaultKeyExchanges() []KeyExchange {
	return []KeyExchange{P256MLKEM768, X25519MLKEM768, P256, X25519}
}

// Valid reports whether k is a key exchange this package implements.
func (k KeyExchange) Valid() bool { return k >= X25519 && k <= P256MLKEM768 }

// String returns "X25519", "P-256", "X25519MLKEM768", "P256MLKEM768" or
// "KeyExchange(n)".
func (k KeyExchange) String() string {
	if k.Valid() {
		return kexWireNames[k]
	}
	return fmt.Sprintf("KeyExchange(%d)", uint8(k))
}

// kexWireNames holds the names String returns, indexed by KeyExchange.
var kexWireNames = [...]string{
	X25519:         "X25519",
	P256:           "P-256",
	X25519MLKEM768: "X25519MLKEM768",
	P256MLKEM768:   "P256MLKEM768",
}

// hybrid reports whether k combines ML-KEM-768 with an elliptic curve.
func (k KeyExchange) hybrid() bool { return k == X25519MLKEM768 || k == P256MLKEM768 }

// classical returns the elliptic-curve exchange of k: k itself, or a hybrid's
// curve part.
func (k KeyExchange) classical() KeyExchange {
	switch k {
	case X25519MLKEM768:
		return X25519
	case P256MLKEM768:
		return P256
	}
	return k
}

// curveFirst reports whether k's shares and secret put the elliptic-curve part
// before the ML-KEM part (SecP256r1MLKEM768's order; X25519MLKEM768 has ML-KEM
// first).
func (k KeyExchange) curveFirst() bool { return k != X25519MLKEM768 }

// Sizes of the shares' parts.
const (
	x25519KeySize = 32
	p256KeySize   = 65
	// maxShareSize is the largest share of any exchange, either side
	// (P256MLKEM768's dialer share, 1249 bytes).
	maxShareSize = p256KeySize + mlkem.EncapsulationKeySize768
	// maxListenerShare is the largest listener's share (P256MLKEM768's, 1153).
	maxListenerShare = p256KeySize + mlkem.CiphertextSize768
	// maxSecretSize is the largest shared secret (a hybrid's).
	maxSecretSize = mlkem.SharedKeySize + 32
	// mlkemSeedSize is the seed of an ML-KEM-768 decapsulation key.
	mlkemSeedSize = mlkem.SeedSize
)

// curveKeySize is the length of k's elliptic-curve public key.
func (k KeyExchange) curveKeySize() int {
	if k.classical() == P256 {
		return p256KeySize
	}
	return x25519KeySize
}

// dialerShareSize is the length of a dialer's key share for k (0 for a code
// this package does not implement).
func (k KeyExchange) dialerShareSize() int {
	switch {
	case !k.Valid():
		return 0
	case k.hybrid():
		return k.curveKeySize() + mlkem.EncapsulationKeySize768
	}
	return k.curveKeySize()
}

// listenerShareSize is the length of a listener's key share for k.
func (k KeyExchange) listenerShareSize() int {
	if k.hybrid() {
		return k.curveKeySize() + mlkem.CiphertextSize768
	}
	return k.dialerShareSize()
}

func (k KeyExchange) curve() ecdh.Curve {
	if k.classical() == P256 {
		return ecdh.P256()
	}
	return ecdh.X25519()
}

// splitShare splits a share of k into its elliptic-curve and ML-KEM parts (the
// ML-KEM part is empty for a classical exchange); share has k's size.
func (k KeyExchange) splitShare(share []byte) (curve, kem []byte) {
	n := k.curveKeySize()
	switch {
	case !k.hybrid():
		return share, nil
	case k.curveFirst():
		return share[:n], share[n:]
	}
	return share[len(share)-n:], share[:len(share)-n]
}

// ephemeral is one side's ephemeral key material for a key exchange.
type ephemeral struct {
	kex KeyExchange
	ec  *ecdh.PrivateKey
	kem *mlkem.DecapsulationKey768 // the dialer's, for a hybrid
}

// generateEphemeral draws an ephemeral key for k from r. The scalar (and
// for a hybrid's dialer, first the ML-KEM seed) is read from r directly, and a
// P-256 scalar out of range is redrawn, so that a fixed r yields a fixed
// key.
func generateEphemeral(k KeyExchange, r io.Reader, kem bool) (ephemeral, error) {
	e := ephemeral{kex: k}
	var buf [64]byte
	defer clear(buf[:])
	if k.hybrid() && kem {
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

// appendParts appends a share or a secret made of an elliptic-curve part and,
// for a hybrid, an ML-KEM part, in e's exchange's order.
func (e *ephemeral) appendParts(b, curve, kem []byte) []byte {
	if e.kex.curveFirst() {
		return append(append(b, curve...), kem...)
	}
	return append(append(b, kem...), curve...)
}

// appendDialerShare appends the dialer's key share.
func (e *ephemeral) appendDialerShare(b []byte) []byte {
	var ek []byte
	if e.kem != nil {
		ek = e.kem.EncapsulationKey().Bytes()
	}
	return e.appendParts(b, e.ec.PublicKey().Bytes(), ek)
}

// encapsulate768 runs ML-KEM-768 encapsulation; r is used only by tests,
// which replace it with a derandomized one to make vectors (crypto/mlkem
// takes no randomness source).
var encapsulate768 = func(ek *mlkem.EncapsulationKey768, _ io.Reader) (shared, ct []byte, err error) {
	shared, ct = ek.Encapsulate()
	return shared, ct, nil
}

// listenerSecret runs the listener's side of the exchange with the
// dialer's share (of the exchange's size): it appends the listener's share
// to b and the shared secret to secret. Malformed shares and degenerate
// results (an X25519 low-order point) wrap ErrInvalidKeyExchange.
func (e *ephemeral) listenerSecret(b, secret []byte, peer []byte, r io.Reader) (share, sec []byte, err error) {
	peerCurve, peerKEM := e.kex.splitShare(peer)
	var ss, ct []byte
	if e.kex.hybrid() {
		ek, err := mlkem.NewEncapsulationKey768(peerKEM)
		if err != nil {
			return b, secret, fmt.Errorf("%w: ML-KEM-768 encapsulation key: %v", ErrInvalidKeyExchange, err)
		}
		if ss, ct, err = encapsulate768(ek, r); err != nil {
			return b, secret, fmt.Errorf("secio: ML-KEM-768: %w", err)
		}
		defer clear(ss)
	}
	var ecBuf [32]byte
	ecSecret, err := e.ecdh(ecBuf[:0], peerCurve)
	defer clear(ecBuf[:])
	if err != nil {
		return b, secret, err
	}
	return e.appendParts(b, e.ec.PublicKey().Bytes(), ct), e.appendParts(secret, ecSecret, ss), nil
}

// dialerSecret appends the shared secret for the listener's share (of the
// exchange's size) to secret.
func (e *ephemeral) dialerSecret(secret, peer []byte) ([]byte, error) {
	peerCurve, ct := e.kex.splitShare(peer)
	var ss []byte
	if e.kex.hybrid() {
		var err error
		if ss, err = e.kem.Decapsulate(ct); err != nil {
			return secret, fmt.Errorf("%w: ML-KEM-768 ciphertext: %v", ErrInvalidKeyExchange, err)
		}
		defer clear(ss)
	}
	var ecBuf [32]byte
	ecSecret, err := e.ecdh(ecBuf[:0], peerCurve)
	defer clear(ecBuf[:])
	if err != nil {
		return secret, err
	}
	return e.appendParts(secret, ecSecret, ss), nil
}

// ecdh appends the elliptic-curve shared secret with the peer's public key.
func (e *ephemeral) ecdh(secret, peer []byte) ([]byte, error) {
	c := e.kex.classical()
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
