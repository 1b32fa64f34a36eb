package aesgcm

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"testing"
)

func TestKeySize(t *testing.T) {
	for _, n := range []int{0, 1, 15, 17, 24, 31, 33, 64} {
		if _, err := New(make([]byte, n)); !errors.Is(err, ErrKeySize) {
			t.Errorf("New(%d-byte key) = %v, want ErrKeySize", n, err)
		}
	}
}

func TestNarrow(t *testing.T) {
	for _, c := range []struct {
		best impl
		v    string
		want impl
	}{
		{implVAES512, "", implVAES512},
		{implVAES512, "stdlib", implStdlib},
		{implVAES512, "vaes256", implVAES256},
		{implVAES512, "vaes512", implVAES512},
		{implVAES512, "bogus", implVAES512},
		{implVAES256, "vaes256", implVAES256},
		{implStdlib, "vaes256", implStdlib},
		{implStdlib, "", implStdlib},
	} {
		if got := narrow(c.best, c.v); got != c.want {
			t.Errorf("narrow(%s, %q) = %s, want %s", implNames[c.best], c.v, implNames[got], implNames[c.want])
		}
	}
	t.Logf("Implementation() = %s; available: %v", Implementation(), available())
}

// TestTamper flips every bit of the sealed message, the nonce and the
// additional data, and truncates the message; each must make Open fail
// with ErrOpen (or crypto/cipher's error) and leave dst zeroed.
func TestTamper(t *testing.T) {
	forEachImpl(t, func(t *testing.T) {
		rng := rand.New(rand.NewPCG(5, 6))
		for _, keyLen := range []int{16, 32} {
			for _, n := range []int{0, 1, 16, 65, 300} {
				key := randBytes(rng, keyLen)
				a := mustNew(t, key)
				nonce, aad, msg := randBytes(rng, 12), randBytes(rng, 7), randBytes(rng, n)
				sealed := a.Seal(nil, nonce, msg, aad)
				dst := make([]byte, 0, n)
				for name, buf := range map[string][]byte{"sealed": sealed, "nonce": nonce, "aad": aad} {
					for i := range len(buf) * 8 {
						buf[i/8] ^= 1 << (i % 8)
						got, err := a.Open(dst, nonce, sealed, aad)
						if err == nil || got != nil {
							t.Fatalf("len %d: Open succeeded with bit %d of %s flipped", n, i, name)
						}
						if active != implStdlib && !errors.Is(err, ErrOpen) {
							t.Fatalf("Open error %v, want ErrOpen", err)
						}
						if d := dst[:n]; !bytes.Equal(d, make([]byte, n)) {
							t.Fatalf("len %d, %s bit %d: failed Open left %x in dst", n, name, i, d)
						}
						buf[i/8] ^= 1 << (i % 8)
					}
				}
				for cut := range len(sealed) {
					if _, err := a.Open(nil, nonce, sealed[:cut], aad); err == nil {
						t.Fatalf("Open succeeded on a %d-byte truncation", cut)
					}
				}
				if _, err := a.Open(nil, nonce, append(sealed, 0), aad); err == nil {
					t.Fatal("Open succeeded with a byte appended")
				}
				// In place: the ciphertext decrypted over itself must be
				// zeroed too.
				sealed[0] ^= 1
				if _, err := a.Open(sealed[:0], nonce, sealed, aad); err == nil {
					t.Fatal("in-place Open succeeded on a tampered message")
				}
				if !bytes.Equal(sealed[:n], make([]byte, n)) {
					t.Fatalf("failed in-place Open left plaintext in place")
				}
			}
		}
	})
}

func TestOverlapPanics(t *testing.T) {
	forEachImpl(t, func(t *testing.T) {
		a := mustNew(t, make([]byte, 16))
		nonce := make([]byte, 12)
		buf := make([]byte, 200)
		if !panics(func() { a.Seal(buf[1:1], nonce, buf[:100], nil) }) {
			t.Error("Seal with a shifted overlap did not panic")
		}
		sealed := a.Seal(buf[:0], nonce, buf[:100], nil)
		if !panics(func() { _, _ = a.Open(buf[1:1], nonce, sealed, nil) }) {
			t.Error("Open with a shifted overlap did not panic")
		}
	})
}

func TestNoAllocs(t *testing.T) {
	forEachImpl(t, func(t *testing.T) {
		for _, keyLen := range []int{16, 32} {
			a := mustNew(t, make([]byte, keyLen))
			nonce, aad := make([]byte, 12), make([]byte, 5)
			buf := make([]byte, 4096+TagSize)
			for _, n := range []int{0, 64, 1000, 4096} {
				sealed := a.Seal(nil, nonce, buf[:n], aad)
				dst := make([]byte, 0, n)
				if allocs := testing.AllocsPerRun(20, func() {
					a.Seal(buf[:0], nonce, buf[:n], aad)
				}); allocs != 0 {
					t.Errorf("Seal(%d bytes) allocates %.1f times", n, allocs)
				}
				if allocs := testing.AllocsPerRun(20, func() {
					if _, err := a.Open(dst, nonce, sealed, aad); err != nil {
						t.Fatal(err)
					}
				}); allocs != 0 {
					t.Errorf("Open(%d bytes) allocates %.1f times", n, allocs)
				}
			}
		}
	})
}

// FuzzSealOpen checks every implementation against crypto/cipher on
// fuzzed keys, nonces, additional data and messages, in place and not,
// at a fuzzed alignment, the kernels' SealWithByte of the message's last
// byte apart, and that a flipped bit fails to open.
func FuzzSealOpen(f *testing.F) {
	f.Add(make([]byte, 16), make([]byte, 12), []byte{}, []byte("hello"), uint8(0), uint16(0))
	f.Add(make([]byte, 32), make([]byte, 12), []byte("header"), make([]byte, 1000), uint8(3), uint16(77))
	f.Fuzz(func(t *testing.T, key, nonce, aad, msg []byte, off uint8, flip uint16) {
		if len(key) != 16 && len(key) != 32 || len(nonce) != 12 {
			return
		}
		ref := stdGCM(t, key)
		want := ref.Seal(nil, nonce, msg, aad)
		prev := active
		defer func() { active = prev }()
		for _, im := range available() {
			active = im
			a := mustNew(t, key)
			checkAgainstStd(t, a, ref, nonce, msg, aad, int(off%32))
			if s, ok := a.(interface {
				SealWithByte(dst, nonce, plaintext []byte, last byte, additionalData []byte) []byte
			}); ok && len(msg) > 0 {
				if got := s.SealWithByte(nil, nonce, msg[:len(msg)-1], msg[len(msg)-1], aad); !bytes.Equal(got, want) {
					t.Fatalf("%s: SealWithByte differs from crypto/cipher", implNames[im])
				}
			}
			bad := bytes.Clone(want)
			bad[int(flip)%len(bad)] ^= 1 << (flip % 8)
			if _, err := a.Open(nil, nonce, bad, aad); err == nil {
				t.Fatalf("%s: Open accepted a flipped bit", implNames[im])
			}
		}
	})
}
