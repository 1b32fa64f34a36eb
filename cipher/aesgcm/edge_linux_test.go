//go:build linux

package aesgcm

import (
	"bytes"
	"math/rand/v2"
	"syscall"
	"testing"
)

// guarded returns n bytes that end where an inaccessible page begins, so
// that reading or writing one byte past them faults; tail(g, k) gives the
// last k of them.
func guarded(t *testing.T, n int) []byte {
	t.Helper()
	page := syscall.Getpagesize()
	size := (n + page - 1) / page * page
	mem, err := syscall.Mmap(-1, 0, size+page, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
	if err != nil {
		t.Skip("mmap:", err)
	}
	t.Cleanup(func() { syscall.Munmap(mem) })
	if err := syscall.Mprotect(mem[size:], syscall.PROT_NONE); err != nil {
		t.Skip("mprotect:", err)
	}
	return mem[size-n : size : size]
}

func tail(b []byte, k int) []byte { return b[len(b)-k:] }

// TestBufferEdges seals and opens every short length, with additional data
// of every length up to three blocks, each buffer (plaintext, ciphertext,
// additional data, destination) ending at an inaccessible page: the
// kernels' partial loads and stores must not touch a byte past any of
// them. The results must match crypto/cipher's.
func TestBufferEdges(t *testing.T) {
	forEachImpl(t, func(t *testing.T) {
		rng := rand.New(rand.NewPCG(21, 22))
		const maxLen, maxAAD = 2*64 + 1, 48
		ptMem, aadMem := guarded(t, maxLen), guarded(t, maxAAD)
		sealedMem, openedMem := guarded(t, maxLen+TagSize), guarded(t, maxLen)
		for _, keyLen := range []int{16, 32} {
			key := randBytes(rng, keyLen)
			g, ref := mustNew(t, key), stdGCM(t, key)
			nonce := randBytes(rng, NonceSize)
			for n := 0; n <= maxLen; n++ {
				for aadLen := 0; aadLen <= maxAAD; aadLen++ {
					pt, aad := tail(ptMem, n), tail(aadMem, aadLen)
					copy(pt, randBytes(rng, n))
					copy(aad, randBytes(rng, aadLen))
					want := ref.Seal(nil, nonce, pt, aad)
					sealed := tail(sealedMem, n+TagSize)
					if got := g.Seal(sealed[:0], nonce, pt, aad); !bytes.Equal(got, want) {
						t.Fatalf("Seal(len %d, aad %d) differs from crypto/cipher", n, aadLen)
					}
					opened := tail(openedMem, n)
					got, err := g.Open(opened[:0], nonce, sealed, aad)
					if err != nil || !bytes.Equal(got, pt) {
						t.Fatalf("Open(len %d, aad %d): %v", n, aadLen, err)
					}
				}
			}
		}
	})
}
