package main

import (
	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	"github.com/mmcloughlin/avo/reg"
)

// ymmRounds emits the 32 half-rounds on the groups of 8 lanes in vs
// (v[0], v[1] each), interleaving the groups so that their independent
// chains overlap: t op= ((s<<4)+ka) ^ (s+sum) ^ ((s>>5)+kc). The round sums
// are broadcast from memory; the key words are memory operands (16 YMM
// registers are too few to hold them).
func ymmRounds(vs [][2]reg.VecVirtual, k [4]Op, rounds []halfRound, decrypt bool) {
	for _, hr := range rounds {
		for _, v := range vs {
			s, t := v[hr.s], v[hr.t]
			a, b, c := YMM(), YMM(), YMM()
			VPSLLD(U8(4), s, a)
			VPADDD(k[hr.ka], a, a)
			VPBROADCASTD(sumOp(hr.c), b)
			VPADDD(s, b, b)
			VPSRLD(U8(5), s, c)
			VPADDD(k[hr.kc], c, c)
			VPXOR(b, a, a)
			VPXOR(c, a, a)
			if decrypt {
				VPSUBD(a, t, t)
			} else {
				VPADDD(a, t, t)
			}
		}
	}
}

// genAVX2 emits a 16-lane kernel made of two interleaved groups of 8 lanes
// in YMM registers: gathers for the loads, one 8-byte store per lane. The
// chaining state stays in the state array (16 YMM registers hold only the
// two groups' rounds).
// broadcastKeys copies each of the four key words at kp to all eight lanes of
// a stack slot, which the AVX2 rounds take as memory operands (sixteen YMM
// registers are too few to keep them).
func broadcastKeys(kp reg.Register) [4]Op {
	keys := AllocLocal(4 * 32)
	var k [4]Op
	for i := range k {
		t := YMM()
		VPBROADCASTD(Mem{Base: kp, Disp: 4 * i}, t)
		k[i] = keys.Offset(32 * i)
		VMOVDQU(t, k[i])
	}
	return k
}

func genAVX2(name string, decrypt bool) {
	kp, ins, outs, strides, st, n := laneKernel(name, NOSPLIT, "AVX2", decrypt)
	inPtrs := AllocLocal(128)
	outPtrs := AllocLocal(128)
	k := broadcastKeys(kp)
	xsave := AllocLocal(128)

	// The lane pointers live in inPtrs and outPtrs and advance there.
	for q := 0; q < 4; q++ {
		t := YMM()
		VMOVDQU(Mem{Base: ins, Disp: 32 * q}, t)
		VMOVDQU(t, inPtrs.Offset(32*q))
		VMOVDQU(Mem{Base: outs, Disp: 32 * q}, t)
		VMOVDQU(t, outPtrs.Offset(32*q))
	}
	zero := GP64()
	XORQ(zero, zero)
	// state words of group g: c0 at 32g, c1 at 64+32g, x0 at 128+32g, x1 at 192+32g.
	stw := func(word, g int) Mem { return Mem{Base: st, Disp: 64*word + 32*g} }

	loop := name + "_loop"
	Label(loop)
	var vs [][2]reg.VecVirtual
	for g := 0; g < 2; g++ {
		// Gather lanes 8g..8g+3 and 8g+4..8g+7, reverse each dword's bytes,
		// split into high (b0) and low (b1) words in lane order.
		pa, pb := YMM(), YMM()
		VMOVDQU(inPtrs.Offset(64*g), pa)
		VMOVDQU(inPtrs.Offset(64*g+32), pb)
		la, lb, ma, mb := YMM(), YMM(), YMM(), YMM()
		VPCMPEQD(ma, ma, ma)
		VPCMPEQD(mb, mb, mb)
		VPGATHERQQ(ma, Mem{Base: zero, Index: pa, Scale: 1}, la)
		VPGATHERQQ(mb, Mem{Base: zero, Index: pb, Scale: 1}, lb)
		VPSHUFB(consts.bswap32, la, la)
		VPSHUFB(consts.bswap32, lb, lb)
		b0, b1 := YMM(), YMM()
		VSHUFPS(U8(0x88), lb, la, b0) // dwords of lanes 0 1 4 5 | 2 3 6 7
		VPERMQ(U8(0xd8), b0, b0)
		VSHUFPS(U8(0xdd), lb, la, b1)
		VPERMQ(U8(0xd8), b1, b1)
		v := [2]reg.VecVirtual{YMM(), YMM()}
		if !decrypt {
			// x_i = p_i ^ c_(i-1), kept in xsave for the next block.
			VPXOR(stw(0, g), b0, v[0])
			VPXOR(stw(1, g), b1, v[1])
			VMOVDQU(v[0], xsave.Offset(64*g))
			VMOVDQU(v[1], xsave.Offset(64*g+32))
		} else {
			// x_i = D(c_i ^ x_(i-1)); c_i is kept in xsave.
			VPXOR(stw(2, g), b0, v[0])
			VPXOR(stw(3, g), b1, v[1])
			VMOVDQU(b0, xsave.Offset(64*g))
			VMOVDQU(b1, xsave.Offset(64*g+32))
		}
		vs = append(vs, v)
	}
	if !decrypt {
		ymmRounds(vs, k, encRounds(), false)
	} else {
		ymmRounds(vs, k, decRounds(), true)
	}
	for g, v := range vs {
		o0, o1 := YMM(), YMM()
		if !decrypt {
			// c_i = E(x_i) ^ x_(i-1); then x_(i-1) = x_i.
			VPXOR(stw(2, g), v[0], o0)
			VPXOR(stw(3, g), v[1], o1)
			VMOVDQU(o0, stw(0, g))
			VMOVDQU(o1, stw(1, g))
			t := YMM()
			VMOVDQU(xsave.Offset(64*g), t)
			VMOVDQU(t, stw(2, g))
			VMOVDQU(xsave.Offset(64*g+32), t)
			VMOVDQU(t, stw(3, g))
		} else {
			// p_i = x_i ^ c_(i-1); then c_(i-1) = c_i, x_(i-1) = x_i.
			VPXOR(stw(0, g), v[0], o0)
			VPXOR(stw(1, g), v[1], o1)
			VMOVDQU(v[0], stw(2, g))
			VMOVDQU(v[1], stw(3, g))
			t := YMM()
			VMOVDQU(xsave.Offset(64*g), t)
			VMOVDQU(t, stw(0, g))
			VMOVDQU(xsave.Offset(64*g+32), t)
			VMOVDQU(t, stw(1, g))
		}
		// Interleave back into qwords (lanes 8g..8g+3 in wa, the rest in
		// wb), restore byte order, store each lane's 8 bytes.
		p0, p1 := YMM(), YMM()
		VPERMQ(U8(0xd8), o0, p0)
		VPERMQ(U8(0xd8), o1, p1)
		wa, wb := YMM(), YMM()
		VPUNPCKLDQ(p1, p0, wa)
		VPUNPCKHDQ(p1, p0, wb)
		VPSHUFB(consts.bswap32, wa, wa)
		VPSHUFB(consts.bswap32, wb, wb)
		for h, w := range []reg.VecVirtual{wa, wb} {
			hi := XMM()
			VEXTRACTI128(U8(1), w, hi)
			for l, src := range []reg.Register{w.AsX(), w.AsX(), hi, hi} {
				p := GP64()
				MOVQ(outPtrs.Offset(8*(8*g+4*h+l)), p)
				if l%2 == 0 {
					VMOVQ(src, Mem{Base: p})
				} else {
					VPEXTRQ(U8(1), src, Mem{Base: p})
				}
			}
		}
	}
	for q := 0; q < 4; q++ {
		t := YMM()
		VMOVDQU(Mem{Base: strides, Disp: 32 * q}, t)
		VPADDQ(inPtrs.Offset(32*q), t, t)
		VMOVDQU(t, inPtrs.Offset(32*q))
		VMOVDQU(Mem{Base: strides, Disp: 32 * q}, t)
		VPADDQ(outPtrs.Offset(32*q), t, t)
		VMOVDQU(t, outPtrs.Offset(32*q))
	}
	DECQ(n)
	JNZ(LabelRef(loop))
	VZEROUPPER()
	RET()
}
