package main

import (
	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	"github.com/mmcloughlin/avo/reg"
)

var blocksSignature = "func(k *[4]uint32, v *[32]uint32)"

// genBlocks emits a kernel that enciphers 16 independent blocks (no
// chaining) in place: v[j] and v[16+j] are the high and low words of block
// j. Package tea uses it to encrypt first blocks ahead of time. With evex
// it runs the AVX-512 kernels' rounds (two groups of 8 lanes, VPTERNLOGD),
// otherwise the AVX2 kernels' ones.
func genBlocks(name string, evex bool) {
	TEXT(name, NOSPLIT, blocksSignature)
	Pragma("noescape")
	if evex {
		Doc(name+" enciphers the 16 blocks in v in place (AVX-512): v[j] and v[16+j]",
			"are the high and low words of block j.")
	} else {
		Doc(name+" enciphers the 16 blocks in v in place (AVX2): v[j] and v[16+j]",
			"are the high and low words of block j.")
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
		r := splitRounds(v, k, encRounds(), false, nil)
		for g := 0; g < 2; g++ {
			for w := 0; w < 2; w++ {
				VMOVDQU32(r[g][w], word(g, w))
			}
		}
	} else {
		keys := AllocLocal(4 * 32)
		var k [4]Op
		for i := range k {
			t := YMM()
			VPBROADCASTD(Mem{Base: kp, Disp: 4 * i}, t)
			k[i] = keys.Offset(32 * i)
			VMOVDQU(t, k[i])
		}
		vs := make([][2]reg.VecVirtual, 2)
		for g := range vs {
			for w := 0; w < 2; w++ {
				vs[g][w] = YMM()
				VMOVDQU(word(g, w), vs[g][w])
			}
		}
		ymmRounds(vs, k, encRounds(), false)
		for g := range vs {
			for w := 0; w < 2; w++ {
				VMOVDQU(vs[g][w], word(g, w))
			}
		}
	}
	VZEROUPPER()
	RET()
}
