//go:build !amd64 || purego

package aesgcm

import "crypto/cipher"

// bestImpl: without the amd64 kernels, only the standard library.
func bestImpl() impl { return implStdlib }

// available lists the implementations this build and CPU can run.
func available() []impl { return []impl{implStdlib} }

// newVAES has no kernel to offer in this build: the standard library.
func newVAES(key []byte, _ impl) (cipher.AEAD, error) { return newStdlib(key) }
