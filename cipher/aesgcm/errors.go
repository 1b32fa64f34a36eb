package aesgcm

import "errors"

// Errors returned by this package; errors carrying details wrap them, so
// callers test with errors.Is.
var (
	// ErrKeySize reports a key that is neither 16 nor 32 bytes long.
	ErrKeySize = errors.New("aesgcm: invalid key size")

	// ErrOpen reports a ciphertext that failed authentication (or is
	// shorter than a tag). It says nothing about why, on purpose. The
	// standard-library implementation returns crypto/cipher's own error
	// instead.
	ErrOpen = errors.New("aesgcm: message authentication failed")
)
