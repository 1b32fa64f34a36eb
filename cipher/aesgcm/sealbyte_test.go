package aesgcm

import (
	"bytes"
	"crypto/cipher"
	"math/rand/v2"
	"testing"
)

// byteSealer is what the kernels' AEAD offers beyond cipher.AEAD (package
// secio asserts the same interface).
type byteSealer interface {
	SealWithByte(dst, nonce, plaintext []byte, last byte, additionalData []byte) []byte
}

// asByteSealer returns g's SealWithByte, or skips: crypto/cipher's GCM has none.
func asByteSealer(t testing.TB, g cipher.AEAD) byteSealer {
	t.Helper()
	s, ok := g.(byteSealer)
	if !ok {
		t.Skipf("%s: no SealWithByte", Implementation())
	}
	return s
}

// checkSealWithByte compares SealWithByte(pt, last) with crypto/cipher's
// Seal of pt || last, appended after off bytes of dst, with pt at an odd
// offset of its own buffer, and checks that neither pt nor the bytes of
// dst past the result were written.
func checkSealWithByte(t *testing.T, s byteSealer, ref cipher.AEAD, nonce, pt []byte, last byte, aad []byte, off int) {
	t.Helper()
	want := ref.Seal(nil, nonce, append(bytes.Clone(pt), last), aad)
	src := make([]byte, len(pt)+off%7+1)[off%7+1:]
	copy(src, pt)
	const guard = 40
	buf := make([]byte, off+len(want)+guard)
	for i := range buf {
		buf[i] = 0xa5
	}
	got := s.SealWithByte(buf[:off], nonce, src, last, aad)
	if !bytes.Equal(got[off:], want) {
		t.Fatalf("SealWithByte(len %d, last %#x, aad %d, off %d) differs from crypto/cipher", len(pt), last, len(aad), off)
	}
	if &got[0] != &buf[0] {
		t.Fatalf("SealWithByte(len %d) reallocated a dst with room", len(pt))
	}
	for i, b := range buf[off+len(want):] {
		if b != 0xa5 {
			t.Fatalf("SealWithByte(len %d) wrote byte %d past its result", len(pt), i)
		}
	}
	if !bytes.Equal(src, pt) {
		t.Fatalf("SealWithByte(len %d) modified its plaintext", len(pt))
	}
	// And with a dst too short, like Seal: a new buffer.
	if again := s.SealWithByte(nil, nonce, src, last, aad); !bytes.Equal(again, want) {
		t.Fatalf("SealWithByte(nil dst, len %d) differs", len(pt))
	}
}

// TestSealWithByte checks the split-source Seal kernels against
// crypto/cipher at every length up to a few chunks and around every
// boundary a record meets (the 256-byte chunk, 16 KiB, 64 KiB frames and
// the mux's 256 KiB writes), for both key sizes.
func TestSealWithByte(t *testing.T) {
	forEachImpl(t, func(t *testing.T) {
		rng := rand.New(rand.NewPCG(3, 4))
		maxLen := 1100
		if testing.Short() {
			maxLen = 600
		}
		for _, keyLen := range []int{16, 32} {
			key := randBytes(rng, keyLen)
			s := asByteSealer(t, mustNew(t, key))
			ref := stdGCM(t, key)
			for n := 0; n <= maxLen; n++ {
				aad := randBytes(rng, []int{0, 4, 4, 1, 13, 16, 17, 100}[rng.IntN(8)])
				checkSealWithByte(t, s, ref, randBytes(rng, NonceSize), randBytes(rng, n), byte(rng.Uint32()), aad, rng.IntN(17))
			}
			for _, base := range []int{4096, 16384, 65536, 65536 + 4*12, 4 * (65536 + 12), 262144} {
				for _, d := range []int{-257, -256, -255, -17, -16, -15, -1, 0, 1, 15, 16, 17, 255, 256, 257} {
					checkSealWithByte(t, s, ref, randBytes(rng, NonceSize), randBytes(rng, base+d), byte(rng.Uint32()), randBytes(rng, 4), rng.IntN(64))
				}
			}
		}
	})
}

// TestSealWithByteTamper: what SealWithByte seals opens with crypto/cipher
// only with its last byte intact (the record type in secio), and a flipped
// bit anywhere fails to open on every implementation.
func TestSealWithByteTamper(t *testing.T) {
	forEachImpl(t, func(t *testing.T) {
		key := make([]byte, 16)
		s := asByteSealer(t, mustNew(t, key))
		ref := stdGCM(t, key)
		nonce, aad := make([]byte, 12), []byte{0, 0, 1, 17}
		for _, n := range []int{0, 255, 256, 1000} {
			pt := bytes.Repeat([]byte{7}, n)
			sealed := s.SealWithByte(nil, nonce, pt, 0x02, aad)
			opened, err := ref.Open(nil, nonce, sealed, aad)
			if err != nil || !bytes.Equal(opened, append(pt, 0x02)) {
				t.Fatalf("len %d: crypto/cipher cannot open it: %v", n, err)
			}
			for _, i := range []int{0, n, n + 1, len(sealed) - 1} {
				bad := bytes.Clone(sealed)
				bad[i] ^= 0x06 // the last plaintext byte: type 0x02 would read as 0x04
				if _, err := ref.Open(nil, nonce, bad, aad); err == nil {
					t.Fatalf("len %d: byte %d flipped still opens", n, i)
				}
				if _, err := mustNew(t, key).Open(nil, nonce, bad, aad); err == nil {
					t.Fatalf("len %d: byte %d flipped still opens (%s)", n, i, Implementation())
				}
			}
		}
	})
}

func TestSealWithByteOverlapPanics(t *testing.T) {
	forEachImpl(t, func(t *testing.T) {
		s := asByteSealer(t, mustNew(t, make([]byte, 16)))
		nonce := make([]byte, 12)
		buf := make([]byte, 1000) // room for every dst below
		for _, c := range []struct{ dst, pt []byte }{
			{buf[:0], buf[:300]},      // in place
			{buf[10:10], buf[:300]},   // shifted
			{buf[299:299], buf[:300]}, // the last byte
		} {
			if !panics(func() { s.SealWithByte(c.dst, nonce, c.pt, 1, nil) }) {
				t.Errorf("SealWithByte with dst at %d over plaintext did not panic", cap(buf)-cap(c.dst))
			}
		}
		if !panics(func() { s.SealWithByte(nil, nonce[:11], buf[:10], 1, nil) }) {
			t.Error("SealWithByte with an 11-byte nonce did not panic")
		}
		if panics(func() { s.SealWithByte(buf[300:300], nonce, buf[:300], 1, nil) }) {
			t.Error("SealWithByte into the bytes right after its plaintext panicked")
		}
	})
}

func TestSealWithByteNoAllocs(t *testing.T) {
	forEachImpl(t, func(t *testing.T) {
		s := asByteSealer(t, mustNew(t, make([]byte, 16)))
		nonce, aad := make([]byte, 12), make([]byte, 4)
		pt := make([]byte, 70000)
		dst := make([]byte, 0, len(pt)+1+TagSize)
		for _, n := range []int{0, 1, 300, 70000} {
			if allocs := testing.AllocsPerRun(20, func() {
				s.SealWithByte(dst, nonce, pt[:n], 2, aad)
			}); allocs != 0 {
				t.Errorf("SealWithByte(%d bytes) allocates %.1f times", n, allocs)
			}
		}
	})
}
