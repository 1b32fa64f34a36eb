package aesgcm

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
)

// rekeyer is what Rekey and Clear offer to a caller that holds the AEAD as a
// cipher.AEAD (package secio declares the same interface).
type rekeyer interface {
	Rekey(key []byte) error
	Clear()
}

// TestRekey: the kernels' AEAD rekeyed in place seals and opens exactly as a
// new one with the new key (crypto/cipher's GCM as the reference), across
// AES-128 and AES-256 in both directions; a key of the wrong size is refused
// and leaves the old key in use. crypto/cipher's GCM has no Rekey.
func TestRekey(t *testing.T) {
	forEachImpl(t, func(t *testing.T) {
		rng := rand.New(rand.NewPCG(7, 8))
		a := mustNew(t, randBytes(rng, 16))
		r, ok := a.(rekeyer)
		if ok != (active != implStdlib) {
			t.Fatalf("%s: %T has Rekey: %v", implNames[active], a, ok)
		}
		if !ok {
			return
		}
		for _, keyLen := range []int{32, 16, 16, 32, 32, 16} {
			key := randBytes(rng, keyLen)
			if err := r.Rekey(key); err != nil {
				t.Fatal(err)
			}
			for _, n := range []int{0, 1, 16, 255, 256, 257, 4096 + 3} {
				checkAgainstStd(t, a, stdGCM(t, key), randBytes(rng, NonceSize), randBytes(rng, n), randBytes(rng, n%19), n%5)
			}
			if err := r.Rekey(make([]byte, 24)); !errors.Is(err, ErrKeySize) {
				t.Fatalf("Rekey with a 24-byte key: %v, want ErrKeySize", err)
			}
			checkAgainstStd(t, a, stdGCM(t, key), randBytes(rng, NonceSize), randBytes(rng, 100), nil, 0)
		}
	})
}

// TestClearThenRekey: after Clear the AEAD no longer seals under the old key;
// a Rekey makes it usable again.
func TestClearThenRekey(t *testing.T) {
	forEachImpl(t, func(t *testing.T) {
		rng := rand.New(rand.NewPCG(9, 10))
		key := randBytes(rng, 16)
		a := mustNew(t, key)
		r, ok := a.(rekeyer)
		if !ok {
			if active != implStdlib {
				t.Fatalf("%s: %T has no Clear", implNames[active], a)
			}
			t.Skipf("%s cannot be cleared", implNames[active])
		}
		nonce, pt := randBytes(rng, NonceSize), randBytes(rng, 64)
		ct := stdGCM(t, key).Seal(nil, nonce, pt, nil)
		r.Clear()
		if _, err := a.Open(nil, nonce, ct, nil); err == nil {
			t.Fatal("a cleared AEAD still opens under its old key")
		}
		if err := r.Rekey(key); err != nil {
			t.Fatal(err)
		}
		checkAgainstStd(t, a, stdGCM(t, key), nonce, pt, nil, 0)
	})
}

// BenchmarkRekey: moving an AEAD to a new key in place against making a new
// one (what a key update costs its AEAD).
func BenchmarkRekey(b *testing.B) {
	for _, keyLen := range []int{16, 32} {
		key := make([]byte, keyLen)
		b.Run(fmt.Sprintf("AES-%d/in-place", keyLen*8), func(b *testing.B) {
			r, ok := mustNew(b, key).(rekeyer)
			if !ok {
				b.Skipf("%s has no Rekey", Implementation())
			}
			b.ReportAllocs()
			for b.Loop() {
				if err := r.Rekey(key); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(fmt.Sprintf("AES-%d/new", keyLen*8), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := New(key); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
