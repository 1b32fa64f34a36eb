package main

import (
	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	"github.com/mmcloughlin/avo/reg"
)

var blocksSignature = "func(k *[4]uint32, v *[32]uint32)"

// genBlocks emits a kernel that enciphers (or with decrypt deciphers) 16
// independent blocks (no chaining) in place: v[j] and v[16+j] are the high
// and low words of block j. Package tea uses them for first blocks: to
// encrypt them ahead of time, and to decipher the header blocks of a batch
// side by side. With evex it runs the AVX-512 kernels' rounds (two groups
// of 8 lanes, VPTERNLOGD), otherwise the AVX2 kernels' ones.
func genBlocks(name string, evex, decrypt bool) {
	TEXT(name, NOSPLIT, blocksSignature)
	Pragma("noescape")
	verb, isa := "enciphers", "AVX2"
	if decrypt {
		verb = "deciphers"
	}
	if evex {
		isa = "AVX-512"
	}
	Doc(name+" "+verb+" the 16 blocks in v in place ("+isa+"): v[j] and v[16+j]",
		"are the high and low words of block j.")
	rounds := encRounds()
	if decrypt {
		rounds = decRounds()
	}
	kp := Load(Param("k"), GP64())
	vp := Load(Param("v"), GP64())
	word := func(g, w int) Mem { return Mem{Base: vp, Disp: 64*w + 32*g} }
	if evex {
		var k [4]reg.VecVirtual
		for i := range k {
			k[i] = YMM()
			VPBROADCASTD(Mem{Base: kp, Disp: 4 * i}, k[i])
		}
		var v [2][2]reg.VecVirtual
		for g := 0; g < 2; g++ {
			for w := 0; w < 2; w++ {
				v[g][w] = YMM()
				VMOVDQU32(word(g, w), v[g][w])
			}
		}
		r := splitRounds(v, k, rounds, decrypt, nil)
		for g := 0; g < 2; g++ {
			for w := 0; w < 2; w++ {
				VMOVDQU32(r[g][w], word(g, w))
			}
		}
	} else {
		k := broadcastKeys(kp)
		vs := make([][2]reg.VecVirtual, 2)
		for g := range vs {
			for w := 0; w < 2; w++ {
				vs[g][w] = YMM()
				VMOVDQU(word(g, w), vs[g][w])
			}
		}
		ymmRounds(vs, k, rounds, decrypt)
		for g := range vs {
			for w := 0; w < 2; w++ {
				VMOVDQU(vs[g][w], word(g, w))
			}
		}
	}
	VZEROUPPER()
	RET()
}
