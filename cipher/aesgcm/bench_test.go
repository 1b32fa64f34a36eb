package aesgcm

import (
	"crypto/cipher"
	"fmt"
	"testing"
)

// BenchmarkSeal and BenchmarkOpen compare, in one run, every implementation
// this CPU has at the sizes the acceptance criteria name; the ratios of
// the sub-benchmarks are the figure of merit (benchstat or side by side).
func BenchmarkSeal(b *testing.B) { benchAEAD(b, false) }

// BenchmarkOpen: see BenchmarkSeal.
func BenchmarkOpen(b *testing.B) { benchAEAD(b, true) }

func benchAEAD(b *testing.B, open bool) {
	prev := active
	defer func() { active = prev }()
	for _, keyLen := range []int{16, 32} {
		for _, size := range benchSizes {
			for _, im := range available() {
				active = im
				g, err := New(make([]byte, keyLen))
				if err != nil {
					b.Fatal(err)
				}
				name := fmt.Sprintf("AES-%d/%d/%s", keyLen*8, size, implNames[im])
				b.Run(name, func(b *testing.B) { benchOne(b, g, size, open) })
			}
		}
	}
}

func benchOne(b *testing.B, g cipher.AEAD, size int, open bool) {
	nonce := make([]byte, NonceSize)
	aad := make([]byte, 4) // secio authenticates a 4-byte frame header
	buf := make([]byte, size+TagSize)
	sealed := g.Seal(nil, nonce, buf[:size], aad)
	// Open writes to its own buffer: restoring the ciphertext for an
	// in-place Open would time a copy as large as the work.
	out := make([]byte, 0, size)
	b.SetBytes(int64(size))
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if open {
			if _, err := g.Open(out, nonce, sealed, aad); err != nil {
				b.Fatal(err)
			}
		} else {
			g.Seal(buf[:0], nonce, buf[:size], aad)
		}
	}
}

// benchSizes are the acceptance sizes and, for the stack's frames, 64 KiB.
var benchSizes = []int{64, 1024, 16384, 65536}
