package tea

import (
	"bytes"
	"crypto/rand"
	"fmt"
	"testing"
)

// forEachChain runs f once per single-message chain implementation this
// build has (generic, and the assembly one on amd64).
func forEachChain(t *testing.T, f func(t *testing.T)) {
	defer func(v bool) { useChainAsm = v }(useChainAsm)
	for _, asm := range []bool{false, true} {
		if asm && !hasChainAsm {
			continue
		}
		useChainAsm = asm
		t.Run(fmt.Sprintf("asm=%v", asm), f)
	}
}

func TestVectorsAllChains(t *testing.T) {
	forEachChain(t, func(t *testing.T) {
		TestVectors(t)
		TestNegativeVectors(t)
		TestDecryptShort16(t)
	})
}

func TestRoundTripAllChains(t *testing.T) {
	forEachChain(t, TestRoundTrip)
}

// TestChainDifferential compares each chain with the generic code on random
// keys and data for every block count up to 300 and some larger ones.
func TestChainDifferential(t *testing.T) {
	if !hasChainAsm {
		t.Skip("no assembly chain in this build")
	}
	defer func(v bool) { useChainAsm = v }(useChainAsm)
	useChainAsm = true
	var k [4]uint32
	buf := make([]byte, 8*5000)
	for _, blocks := range append(seq(0, 300), 1000, 4999, 5000) {
		key := make([]byte, KeySize)
		rand.Read(key)
		c := mustCipher(t, key)
		k = c.k
		in := buf[:8*blocks]
		rand.Read(in)
		want := bytes.Clone(in)
		encryptChainGeneric(&k, want)
		got := bytes.Clone(in)
		encryptChain(&k, got)
		if !bytes.Equal(got, want) {
			t.Fatalf("encrypt %d blocks: asm differs from generic", blocks)
		}
		wantD := make([]byte, len(in))
		decryptChainGeneric(&k, wantD, in)
		gotD := make([]byte, len(in))
		decryptChain(&k, gotD, in)
		if !bytes.Equal(gotD, wantD) {
			t.Fatalf("decrypt %d blocks: asm differs from generic", blocks)
		}
		decryptChain(&k, got, got) // in place
		if !bytes.Equal(got, in) {
			t.Fatalf("in-place decrypt of %d blocks does not invert encrypt", blocks)
		}
	}
}

func seq(from, to int) []int {
	var s []int
	for i := from; i <= to; i++ {
		s = append(s, i)
	}
	return s
}
