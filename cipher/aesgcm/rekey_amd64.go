//go:build amd64 && !purego

package aesgcm

import "fmt"

// Rekey replaces g's key with key (16 or 32 bytes) in place: it zeroes the
// whole key schedule, then expands the new key into it (round keys, the hash
// key H and its powers), so that nothing is allocated and no byte of the
// previous key's schedule is left in g (an AES-128 key fills fewer round keys
// than an AES-256 one; the zeroing covers the rest). A key of another length
// yields an error wrapping [ErrKeySize] and leaves g unchanged. Rekey must not
// run concurrently with Seal, Open or SealWithByte on g. It does not retain
// key.
//
// Package secio moves each direction of a connection to its next key this
// way. Only the kernels' AEAD has it: crypto/cipher's GCM (other CPUs, purego
// builds, TENDRIL_AESGCM=stdlib) can be neither rekeyed nor cleared, and a
// caller replaces it with a new one and drops the old, whose key schedule the
// garbage collector frees without overwriting.
func (g *vaesGCM) Rekey(key []byte) error {
	if len(key) != 16 && len(key) != 32 {
		return fmt.Errorf("%w: %d bytes", ErrKeySize, len(key))
	}
	clear(g.ks[:])
	g.aes256 = len(key) == 32
	if g.aes256 {
		initKey256((*[32]byte)(key), &g.ks)
	} else {
		initKey128((*[16]byte)(key), &g.ks)
	}
	return nil
}

// Clear overwrites g's key schedule with zeros, for a caller that is done
// with the key. g must not be used afterwards except through Rekey: Seal and
// Open would compute with an all-zero schedule (nothing secret, nothing of
// use either). Clear must not run concurrently with any other method of g.
// What the kernels left in vector registers is overwritten by later code,
// not by Clear.
func (g *vaesGCM) Clear() { clear(g.ks[:]) }
