// Package aead names the authenticated ciphers tendril negotiates on the wire
// and builds them from vetted primitives: AES-GCM from package
// [github.com/tendril-p2p/tendril/cipher/aesgcm] (vector AES kernels) or
// crypto/aes with crypto/cipher, ChaCha20-Poly1305 from
// golang.org/x/crypto/chacha20poly1305.
//
// AES-GCM uses aesgcm's kernels where the CPU has them (amd64 with VAES and
// VPCLMULQDQ) and crypto/cipher's GCM otherwise and in purego builds;
// [Implementation] tells which. Setting TENDRIL_AESGCM=stdlib in the
// environment before start-up switches the kernels off (to measure the
// stack with the standard library's GCM); TENDRIL_AESGCM=vaes256 keeps them
// to 256-bit vectors. See package aesgcm.
//
// The package owns the wire names, key and nonce sizes, and the preference
// order for the running CPU ([Preferred]). It does not manage nonces: every
// [cipher.AEAD] returned by [New] takes a 12-byte nonce that the caller must
// never reuse with the same key (secio uses per-direction counters).
package aead

import (
	"crypto/aes"
	"crypto/cipher"
	"fmt"

	"github.com/tendril-p2p/tendril/cipher/aesgcm"
	"golang.org/x/crypto/chacha20poly1305"
)

// Suite identifies an AEAD construction. The zero value is not a valid suite.
type Suite uint8

// The supported suites. Values start at 1 so that the zero Suite is invalid.
const (
	// AES128GCM is AES-128 in Galois/Counter Mode with a 12-byte nonce and a
	// 16-byte tag (wire name "AES-128-GCM").
	AES128GCM Suite = iota + 1
	// AES256GCM is AES-256 in Galois/Counter Mode with a 12-byte nonce and a
	// 16-byte tag (wire name "AES-256-GCM").
	AES256GCM
	// ChaCha20Poly1305 is the IETF ChaCha20-Poly1305 of RFC 8439 with a
	// 12-byte nonce and a 16-byte tag (wire name "CHACHA20-POLY1305").
	ChaCha20Poly1305
)

// Sizes shared by every suite.
const (
	nonceSize = 12
	tagSize   = 16
)

// Valid reports whether s is one of the suites this package implements.
func (s Suite) Valid() bool {
	return s >= AES128GCM && s <= ChaCha20Poly1305
}

// String returns the suite's wire name ("AES-128-GCM", "AES-256-GCM" or
// "CHACHA20-POLY1305"), or "Suite(n)" for an invalid value.
func (s Suite) String() string {
	if s.Valid() {
		return suiteNames[s]
	}
	return fmt.Sprintf("Suite(%d)", uint8(s))
}

// suiteNames holds the wire names, indexed by Suite, for String and ParseSuite.
var suiteNames = [...]string{
	AES128GCM:        "AES-128-GCM",
	AES256GCM:        "AES-256-GCM",
	ChaCha20Poly1305: "CHACHA20-POLY1305",
}

// ParseSuite returns the suite whose wire name is name. Names are matched
// exactly (they are case-sensitive on the wire). An unknown name yields an
// error wrapping [ErrUnknownSuite].
func ParseSuite(name string) (Suite, error) {
	for s := AES128GCM; s.Valid(); s++ {
		if suiteNames[s] == name {
			return s, nil
		}
	}
	return 0, fmt.Errorf("%w: %q", ErrUnknownSuite, name)
}

// KeySize returns the key length in bytes that [New] requires for s: 16 for
// AES-128-GCM, 32 for AES-256-GCM and ChaCha20-Poly1305, 0 for an invalid
// suite.
func (s Suite) KeySize() int {
	switch s {
	case AES128GCM:
		return 16
	case AES256GCM:
		return 32
	case ChaCha20Poly1305:
		return chacha20poly1305.KeySize
	}
	return 0
}

// NonceSize returns the nonce length in bytes (12 for every suite, 0 for an
// invalid suite).
func (s Suite) NonceSize() int {
	if !s.Valid() {
		return 0
	}
	return nonceSize
}

// Overhead returns how many bytes Seal adds to a plaintext (the 16-byte
// tag for every suite, 0 for an invalid suite).
func (s Suite) Overhead() int {
	if !s.Valid() {
		return 0
	}
	return tagSize
}

// New returns the AEAD for suite s keyed with key. The key must be exactly
// s.KeySize() bytes, else the error wraps [ErrKeySize]; an invalid suite
// yields an error wrapping [ErrUnknownSuite]. The returned AEAD does not
// retain key.
func New(s Suite, key []byte) (cipher.AEAD, error) {
	if !s.Valid() {
		return nil, fmt.Errorf("%w: %d", ErrUnknownSuite, uint8(s))
	}
	if len(key) != s.KeySize() {
		return nil, fmt.Errorf("%w: %s needs %d bytes, got %d", ErrKeySize, s, s.KeySize(), len(key))
	}
	switch s {
	case AES128GCM, AES256GCM:
		if useVAES {
			g, err := aesgcm.New(key)
			if err != nil {
				return nil, fmt.Errorf("aead: %s: %w", s, err)
			}
			return g, nil
		}
		block, err := aes.NewCipher(key)
		if err != nil {
			return nil, fmt.Errorf("aead: %s: %w", s, err)
		}
		g, err := cipher.NewGCM(block)
		if err != nil {
			return nil, fmt.Errorf("aead: %s: %w", s, err)
		}
		return g, nil
	default: // ChaCha20Poly1305
		c, err := chacha20poly1305.New(key)
		if err != nil {
			return nil, fmt.Errorf("aead: %s: %w", s, err)
		}
		return c, nil
	}
}
