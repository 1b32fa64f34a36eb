package aesgcm

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"math/rand/v2"
	"testing"
)

// forEachImpl runs f once per implementation this build and CPU can run,
// with New switched to it.
func forEachImpl(t *testing.T, f func(t *testing.T)) {
	t.Helper()
	prev := active
	defer func() { active = prev }()
	for _, im := range available() {
		active = im
		t.Run(implNames[im], f)
	}
}

// stdGCM is the reference: crypto/cipher's GCM.
func stdGCM(t testing.TB, key []byte) cipher.AEAD {
	t.Helper()
	b, err := aes.NewCipher(key)
	if err != nil {
		t.Fatal(err)
	}
	g, err := cipher.NewGCM(b)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func mustNew(t testing.TB, key []byte) cipher.AEAD {
	t.Helper()
	g, err := New(key)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func randBytes(rng *rand.Rand, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(rng.Uint32())
	}
	return b
}

// checkAgainstStd seals and opens pt with g and the reference, not in
// place and in place, at byte offset off into the buffers (unaligned).
func checkAgainstStd(t *testing.T, g, ref cipher.AEAD, nonce, pt, aad []byte, off int) {
	t.Helper()
	want := ref.Seal(nil, nonce, pt, aad)
	// The source at an offset too (a different one from dst's).
	src := make([]byte, len(pt)+off/2+1)[off/2+1:]
	copy(src, pt)
	pt = src

	// Not in place, dst with a prefix and unaligned.
	buf := make([]byte, off+len(pt)+TagSize+8)
	prefix := buf[:off]
	got := g.Seal(prefix, nonce, pt, aad)
	if !bytes.Equal(got[off:], want) {
		t.Fatalf("Seal(len %d, aad %d, off %d) differs from crypto/cipher", len(pt), len(aad), off)
	}
	opened, err := g.Open(make([]byte, off, off+len(pt)), nonce, want, aad)
	if err != nil || !bytes.Equal(opened[off:], pt) {
		t.Fatalf("Open(len %d, aad %d, off %d): %v, plaintext differs: %v", len(pt), len(aad), off, err, !bytes.Equal(opened[off:], pt))
	}

	// In place: dst == src[:0].
	inplace := make([]byte, off+len(pt)+TagSize)[off:]
	copy(inplace, pt)
	sealed := g.Seal(inplace[:0], nonce, inplace[:len(pt)], aad)
	if !bytes.Equal(sealed, want) {
		t.Fatalf("in-place Seal(len %d, aad %d, off %d) differs", len(pt), len(aad), off)
	}
	opened, err = g.Open(sealed[:0], nonce, sealed, aad)
	if err != nil || !bytes.Equal(opened, pt) {
		t.Fatalf("in-place Open(len %d, aad %d, off %d): %v", len(pt), len(aad), off, err)
	}
}

func TestDifferential(t *testing.T) {
	forEachImpl(t, func(t *testing.T) {
		rng := rand.New(rand.NewPCG(1, 2))
		maxLen := 3000
		if testing.Short() {
			maxLen = 600
		}
		for _, keyLen := range []int{16, 32} {
			for n := 0; n <= maxLen; n++ {
				key := randBytes(rng, keyLen)
				nonce := randBytes(rng, NonceSize)
				aad := randBytes(rng, []int{0, 0, 1, 4, 13, 16, 17, 32, 63, 64, 65, 100}[rng.IntN(12)])
				pt := randBytes(rng, n)
				checkAgainstStd(t, mustNew(t, key), stdGCM(t, key), nonce, pt, aad, rng.IntN(17))
			}
			for _, n := range []int{4095, 4096, 4097, 8191, 16384, 16385 + 64 + 15, 65536 + 13} {
				key := randBytes(rng, keyLen)
				checkAgainstStd(t, mustNew(t, key), stdGCM(t, key), randBytes(rng, 12), randBytes(rng, n), randBytes(rng, rng.IntN(300)), rng.IntN(64))
			}
		}
	})
}
