package main

import (
	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	"github.com/mmcloughlin/avo/reg"
)

// ymmRounds emits the 32 half-rounds on v[0], v[1] (8 lanes each) with AVX2:
// t op= ((s<<4)+ka) ^ (s+sum) ^ ((s>>5)+kc). The round sums are broadcast
// from memory once per half-round; the key words are memory operands (the
// 16 YMM registers are too few to hold them).
func ymmRounds(v [2]reg.VecVirtual, k [4]Op, rounds []halfRound, decrypt bool) {
	for _, hr := range rounds {
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

// genAVX2 emits an 8-lane kernel (lanes 0-7 of the shared layout): gathers
// for the loads, one 8-byte store per lane.
func genAVX2(name string, decrypt bool) {
	TEXT(name, NOSPLIT, laneSignature)
	Pragma("noescape")
	if decrypt {
		Doc(name + " deciphers nblocks blocks in each of 8 lanes in place (AVX2).")
	} else {
		Doc(name + " enciphers nblocks blocks in each of 8 lanes in place (AVX2).")
	}
	kp := Load(Param("k"), GP64())
	ins := Load(Param("ins"), GP64())
	outs := Load(Param("outs"), GP64())
	strides := Load(Param("strides"), GP64())
	st := Load(Param("state"), GP64())
	n := Load(Param("nblocks"), GP64())
	lanePtrs := AllocLocal(64)
	keys := AllocLocal(4 * 32)
	xsave := AllocLocal(64)

	var k [4]Op
	for i := range k {
		t := YMM()
		VPBROADCASTD(Mem{Base: kp, Disp: 4 * i}, t)
		k[i] = keys.Offset(32 * i)
		VMOVDQU(t, k[i])
	}
	pa, pb := YMM(), YMM()
	VMOVDQU(Mem{Base: ins}, pa)
	VMOVDQU(Mem{Base: ins, Disp: 32}, pb)
	// The output pointers live in lanePtrs and advance there.
	for h := 0; h < 2; h++ {
		t := YMM()
		VMOVDQU(Mem{Base: outs, Disp: 32 * h}, t)
		VMOVDQU(t, lanePtrs.Offset(32*h))
	}
	c0, c1, x0, x1 := YMM(), YMM(), YMM(), YMM()
	VMOVDQU(Mem{Base: st}, c0)
	VMOVDQU(Mem{Base: st, Disp: 64}, c1)
	VMOVDQU(Mem{Base: st, Disp: 128}, x0)
	VMOVDQU(Mem{Base: st, Disp: 192}, x1)
	zero := GP64()
	XORQ(zero, zero)

	loop := name + "_loop"
	Label(loop)
	// Gather lanes 0-3 and 4-7, reverse each dword's bytes, split into
	// high (b0) and low (b1) words in lane order.
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
	o0, o1 := YMM(), YMM()
	if !decrypt {
		VPXOR(b0, c0, v[0])
		VPXOR(b1, c1, v[1])
		VMOVDQU(v[0], xsave)
		VMOVDQU(v[1], xsave.Offset(32))
		ymmRounds(v, k, encRounds(), false)
		VPXOR(v[0], x0, c0)
		VPXOR(v[1], x1, c1)
		VMOVDQU(xsave, x0)
		VMOVDQU(xsave.Offset(32), x1)
		o0, o1 = c0, c1
	} else {
		VPXOR(b0, x0, v[0])
		VPXOR(b1, x1, v[1])
		ymmRounds(v, k, decRounds(), true)
		VPXOR(v[0], c0, o0)
		VPXOR(v[1], c1, o1)
		VMOVDQA(v[0], x0)
		VMOVDQA(v[1], x1)
		VMOVDQA(b0, c0)
		VMOVDQA(b1, c1)
	}
	// Interleave back into qwords (lanes 0-3 in wa, 4-7 in wb), restore
	// byte order, store each lane's 8 bytes.
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
			MOVQ(lanePtrs.Offset(8*(4*h+l)), p)
			if l%2 == 0 {
				VMOVQ(src, Mem{Base: p})
			} else {
				VPEXTRQ(U8(1), src, Mem{Base: p})
			}
		}
	}
	VPADDQ(Mem{Base: strides}, pa, pa)
	VPADDQ(Mem{Base: strides, Disp: 32}, pb, pb)
	for h := 0; h < 2; h++ {
		t := YMM()
		VMOVDQU(lanePtrs.Offset(32*h), t)
		VPADDQ(Mem{Base: strides, Disp: 32 * h}, t, t)
		VMOVDQU(t, lanePtrs.Offset(32*h))
	}
	DECQ(n)
	JNZ(LabelRef(loop))

	VMOVDQU(c0, Mem{Base: st})
	VMOVDQU(c1, Mem{Base: st, Disp: 64})
	VMOVDQU(x0, Mem{Base: st, Disp: 128})
	VMOVDQU(x1, Mem{Base: st, Disp: 192})
	VZEROUPPER()
	RET()
}
