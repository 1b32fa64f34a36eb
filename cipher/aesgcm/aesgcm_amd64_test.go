//go:build amd64 && !purego

package aesgcm

import "testing"

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
