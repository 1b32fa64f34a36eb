package aead

import "errors"

// Errors returned by this package. Errors carrying details wrap one of these
// sentinels, so callers test them with errors.Is.
var (
	// ErrUnknownSuite reports a Suite value or suite name that this package
	// does not implement (including the zero Suite).
	ErrUnknownSuite = errors.New("aead: unknown suite")

	// ErrKeySize reports a key whose length does not match the suite's
	// KeySize.
	ErrKeySize = errors.New("aead: invalid key size")
)
