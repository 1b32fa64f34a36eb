//go:build amd64 && !purego

package aesgcm

import (
	"math/rand/v2"
	"testing"
)

// TestKernelChosen makes sure forcing an implementation really reaches
// its kernel (a silent fall back to the standard library would let every
// differential test pass).
func TestKernelChosen(t *testing.T) {
	forEachImpl(t, func(t *testing.T) {
		for _, keyLen := range []int{16, 32} {
			a := mustNew(t, make([]byte, keyLen))
			g, isVAES := a.(*vaesGCM)
			if isVAES != (active != implStdlib) {
				t.Fatalf("New gave %T", a)
			}
			if isVAES && (g.wide != (active == implVAES512) || g.aes256 != (keyLen == 32)) {
				t.Fatalf("kernel wide=%v aes256=%v for %s, %d-byte key", g.wide, g.aes256, implNames[active], keyLen)
			}
		}
	})
}

// TestSealWithByteOnWideAEAD: an AEAD set up for the 512-bit kernels seals with the 256-bit
// split kernel (there is no 512-bit one), which reads the same key schedule. The check runs
// on any CPU with the 256-bit kernels, so that the path an AVX-512 CPU takes is tested on
// machines without AVX-512 too: only Seal and Open would need the 512-bit instructions.
func TestSealWithByteOnWideAEAD(t *testing.T) {
	hasVAES := false
	for _, im := range available() {
		hasVAES = hasVAES || im == implVAES256
	}
	if !hasVAES {
		t.Skip("no VAES on this CPU")
	}
	rng := rand.New(rand.NewPCG(5, 6))
	for _, keyLen := range []int{16, 32} {
		key := randBytes(rng, keyLen)
		a, err := newVAES(key, implVAES512)
		if err != nil {
			t.Fatal(err)
		}
		g := a.(*vaesGCM)
		if !g.wide {
			t.Fatal("newVAES(implVAES512) did not set up the wide kernels")
		}
		ref := stdGCM(t, key)
		for _, n := range []int{0, 1, 255, 256, 257, 4096, 16384 + 17, 65536 + 48} {
			checkSealWithByte(t, g, ref, randBytes(rng, NonceSize), randBytes(rng, n), byte(rng.Uint32()), randBytes(rng, 4), n%13)
		}
	}
}

// TestRekeyLeavesNothing: Rekey and Clear overwrite the whole key schedule.
// Going from AES-256 to AES-128 leaves no AES-256 round key behind (AES-128
// fills 11 of the 15 round-key slots), and Clear leaves only zeros.
func TestRekeyLeavesNothing(t *testing.T) {
	forEachImpl(t, func(t *testing.T) {
		if active == implStdlib {
			t.Skip("crypto/cipher's GCM has no key schedule of ours")
		}
		rng := rand.New(rand.NewPCG(11, 12))
		a := mustNew(t, randBytes(rng, 32))
		g := a.(*vaesGCM)
		if err := g.Rekey(randBytes(rng, 16)); err != nil {
			t.Fatal(err)
		}
		fresh := mustNew(t, make([]byte, 16)).(*vaesGCM) // a new AEAD's slots 11..14 are zero
		const rk = 64
		for i := 11 * rk; i < 15*rk; i++ {
			if g.ks[i] != 0 || fresh.ks[i] != 0 {
				t.Fatalf("byte %d of the schedule (round key %d) is %#x after Rekey to AES-128", i, i/rk, g.ks[i])
			}
		}
		g.Clear()
		if g.ks != [ksSize]byte{} {
			t.Fatal("Clear left key schedule bytes")
		}
	})
}
