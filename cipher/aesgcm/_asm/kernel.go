package main

import (
	"fmt"

	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	. "github.com/mmcloughlin/avo/reg"
)

var (
	xregs = []VecPhysical{X0, X1, X2, X3, X4, X5, X6, X7, X8, X9, X10, X11, X12, X13, X14, X15,
		X16, X17, X18, X19, X20, X21, X22, X23, X24, X25, X26, X27, X28, X29, X30, X31}
	yregs = []VecPhysical{Y0, Y1, Y2, Y3, Y4, Y5, Y6, Y7, Y8, Y9, Y10, Y11, Y12, Y13, Y14, Y15}
	zregs = []VecPhysical{Z0, Z1, Z2, Z3, Z4, Z5, Z6, Z7, Z8, Z9, Z10, Z11, Z12, Z13, Z14, Z15,
		Z16, Z17, Z18, Z19, Z20, Z21, Z22, Z23, Z24, Z25, Z26, Z27, Z28, Z29, Z30, Z31}
)

// Vector register roles (indices; both widths use 0..15, the 512-bit
// kernels also hold the round keys in 16..30).
const (
	rA0    = 0 // four AES states / output vectors: 0..3
	rBswap = 4
	rPoly  = 5
	rCtr   = 6 // next counter blocks, byte-reflected: the 32-bit counter is each lane's low dword
	rInc   = 7 // blocks per vector, added to rCtr
	rAcc   = 8 // GHASH accumulator (lane 0 only, upper lanes zero)
	rLo    = 9 // unreduced products
	rMi    = 10
	rHi    = 11
	rT0    = 12
	rT1    = 13
	rGH0   = 14 // ciphertext vectors being hashed, alternately
	rGH1   = 15
	rKey0  = 16
)

// General-purpose registers.
var (
	gKS    = RAX // key schedule
	gDst   = RDI
	gSrc   = RSI
	gN     = RCX // bytes of src left
	gAAD   = R8
	gAADN  = R9
	gTag   = R10
	gNonce = R11
	gT     = RBX
	gU     = RDX
)

// kernel generates one Seal or Open function for one vector width and key size.
type kernel struct {
	w     int // vector bytes: 64 (ZMM) or 32 (YMM)
	lanes int // blocks per vector
	nr    int // AES rounds
	dec   bool
	evex  bool
	buf   Mem // stack bounce buffer (YMM kernels)
	label int
}

func genKernel(w, nr int, dec bool) {
	k := &kernel{w: w, lanes: w / 16, nr: nr, dec: dec, evex: w == 64}
	verb, what := "seal", "encrypts src into dst and writes the tag"
	if dec {
		verb, what = "open", "decrypts src into dst and writes the expected tag"
	}
	isa := "AVX-512, VAES, VPCLMULQDQ on ZMM"
	letter := "Z"
	if !k.evex {
		isa = "AVX2, VAES, VPCLMULQDQ on YMM"
		letter = "Y"
	}
	name := fmt.Sprintf("%s%s%d", verb, letter, (nr-6)*32)
	TEXT(name, NOSPLIT, fmt.Sprintf("func(ks *[%d]byte, nonce *[12]byte, dst []byte, src []byte, aad []byte, tag *[16]byte)", ksSize))
	Pragma("noescape")
	Doc(fmt.Sprintf("%s %s (AES-%d-GCM, %s). len(dst) must equal len(src); dst may be src.", name, what, (nr-6)*32, isa))
	if !k.evex {
		k.buf = AllocLocal(32)
	}
	k.body()
}

func (k *kernel) v(i int) VecPhysical {
	if k.evex {
		return zregs[i]
	}
	return yregs[i]
}

func (k *kernel) newLabel(s string) string {
	k.label++
	return fmt.Sprintf("%s_%d", s, k.label)
}

func (k *kernel) load(m Mem, r VecPhysical) {
	if k.evex {
		VMOVDQU64(m, r)
	} else {
		VMOVDQU(m, r)
	}
}

func (k *kernel) store(r VecPhysical, m Mem) {
	if k.evex {
		VMOVDQU64(r, m)
	} else {
		VMOVDQU(r, m)
	}
}

// xor sets dst = a ^ b.
func (k *kernel) xor(a Op, b, dst VecPhysical) {
	if k.evex {
		VPXORD(a, b, dst)
	} else {
		VPXOR(a, b, dst)
	}
}

// xor3 sets dst ^= a ^ b.
func (k *kernel) xor3(a, b, dst VecPhysical) {
	if k.evex {
		VPTERNLOGD(U8(0x96), a, b, dst)
	} else {
		VPXOR(a, dst, dst)
		VPXOR(b, dst, dst)
	}
}

// rk returns round key r as an operand.
func (k *kernel) rk(r int) Op {
	if k.evex {
		return zregs[rKey0+r]
	}
	return Mem{Base: gKS, Disp: r * rkStride}
}

// rkX returns round key r for an XMM instruction.
func (k *kernel) rkX(r int) Op {
	if k.evex {
		return xregs[rKey0+r]
	}
	return Mem{Base: gKS, Disp: r * rkStride}
}

// power returns the table entry of H^e (the run of powers starting there
// fills one vector).
func power(e int) Mem {
	return Mem{Base: gKS, Disp: tblOff + (16-e)*16}
}

func (k *kernel) body() {
	Load(Param("ks"), gKS)
	Load(Param("nonce"), gNonce)
	Load(Param("dst").Base(), gDst)
	Load(Param("src").Base(), gSrc)
	Load(Param("src").Len(), gN)
	Load(Param("aad").Base(), gAAD)
	Load(Param("aad").Len(), gAADN)
	Load(Param("tag"), gTag)

	bswap, poly, ctr := k.v(rBswap), k.v(rPoly), k.v(rCtr)
	xt0 := xregs[rT0]
	xacc := xregs[rAcc]

	Comment("Constants and round keys.")
	k.load(bswapMask, bswap)
	k.load(gfpoly, poly)
	if k.evex {
		k.load(ctrInc, k.v(rInc))
		for r := 0; r <= k.nr; r++ {
			VMOVDQU64(Mem{Base: gKS, Disp: r * rkStride}, zregs[rKey0+r])
		}
	} else {
		k.load(ctrInc.Offset(64), k.v(rInc))
	}

	Comment("J0 = nonce || 1; the tag buffer holds it until E(J0) replaces it.")
	VMOVQ(Mem{Base: gNonce}, xt0)
	VPINSRD(U8(2), Mem{Base: gNonce, Disp: 8}, xt0, xt0)
	MOVL(U32(0x01000000), gT.As32())
	VPINSRD(U8(3), gT.As32(), xt0, xt0)
	VMOVDQU(xt0, Mem{Base: gTag})
	if k.evex {
		VBROADCASTI32X4(Mem{Base: gTag}, ctr)
	} else {
		VBROADCASTI128(Mem{Base: gTag}, ctr)
	}
	VPSHUFB(bswap, ctr, ctr)
	VPADDD(ctrInit, ctr, ctr)
	k.xor(k.rkX(0), xt0, xt0)
	for r := 1; r < k.nr; r++ {
		VAESENC(k.rkX(r), xt0, xt0)
	}
	VAESENCLAST(k.rkX(k.nr), xt0, xt0)
	VMOVDQU(xt0, Mem{Base: gTag})

	Comment("GHASH the additional data, one block at a time.")
	VPXOR(xacc, xacc, xacc)
	aadLoop, aadTail, aadDone := k.newLabel("aad_loop"), k.newLabel("aad_tail"), k.newLabel("aad_done")
	Label(aadLoop)
	CMPQ(gAADN, U8(16))
	JB(LabelRef(aadTail))
	VMOVDQU(Mem{Base: gAAD}, xt0)
	k.absorbX(xt0)
	ADDQ(U8(16), gAAD)
	SUBQ(U8(16), gAADN)
	JMP(LabelRef(aadLoop))
	Label(aadTail)
	TESTQ(gAADN, gAADN)
	JZ(LabelRef(aadDone))
	k.loadPartial(xt0, gAAD, gAADN)
	k.absorbX(xt0)
	Label(aadDone)

	chunk := 4 * k.w
	loop, tail := k.newLabel("loop"), k.newLabel("tail")
	if !k.dec {
		Comment("The first chunk is encrypted without hashing; each next one hashes the one before.")
		last := k.newLabel("hash_last")
		CMPQ(gN, U32(chunk))
		JB(LabelRef(tail))
		k.chunk(nil)
		SUBQ(U32(chunk), gN)
		Label(loop)
		CMPQ(gN, U32(chunk))
		JB(LabelRef(last))
		k.chunk(k.hashSteps(gDst, -chunk))
		SUBQ(U32(chunk), gN)
		JMP(LabelRef(loop))
		Label(last)
		k.emit(k.hashSteps(gDst, -chunk))
	} else {
		Comment("Each chunk of ciphertext is hashed while it is decrypted.")
		Label(loop)
		CMPQ(gN, U32(chunk))
		JB(LabelRef(tail))
		k.chunk(k.hashSteps(gSrc, 0))
		SUBQ(U32(chunk), gN)
		JMP(LabelRef(loop))
	}

	Comment("Whole vectors left, one at a time.")
	partial, final := k.newLabel("partial"), k.newLabel("final")
	a0, gh := k.v(rA0), k.v(rGH0)
	Label(tail)
	CMPQ(gN, U8(k.w))
	JB(LabelRef(partial))
	k.ctrBlocks(a0)
	if k.dec {
		k.load(Mem{Base: gSrc}, gh)
	}
	k.xor(Mem{Base: gSrc}, a0, a0)
	k.store(a0, Mem{Base: gDst})
	if !k.dec {
		VMOVDQA64orA(k, a0, gh)
	}
	k.emit(k.hashVector(gh, power(k.lanes)))
	ADDQ(U8(k.w), gSrc)
	ADDQ(U8(k.w), gDst)
	SUBQ(U8(k.w), gN)
	JMP(LabelRef(tail))

	Comment("The last partial vector: masked loads and stores.")
	Label(partial)
	TESTQ(gN, gN)
	JZ(LabelRef(final))
	k.ctrBlocks(a0)
	k.loadPartial(gh, gSrc, gN)
	k.xor(gh, a0, a0)
	k.storePartial(a0, gDst, gN)
	if !k.dec {
		// Bytes past the end hold key stream: zero them for GHASH.
		if k.evex {
			VMOVDQU8_Z(a0, K1, gh)
		} else {
			LEAQ(tailMask.Offset(64), gT)
			SUBQ(gN, gT)
			VPAND(Mem{Base: gT}, a0, gh)
		}
	}
	// The blocks (the last one zero-padded) take H^nb..H^1 from entry 16-nb.
	LEAQ(Mem{Base: gN, Disp: 15}, gT)
	ANDQ(I32(-16), gT)
	MOVQ(U32(256), gU)
	SUBQ(gT, gU)
	k.emit(k.hashVector(gh, Mem{Base: gKS, Index: gU, Scale: 1, Disp: tblOff}))

	Comment("The lengths block, then tag = E(J0) ^ GHASH.")
	Label(final)
	Load(Param("src").Len(), gT)
	SHLQ(U8(3), gT)
	Load(Param("aad").Len(), gU)
	SHLQ(U8(3), gU)
	VMOVQ(gT, xt0)
	VPINSRQ(U8(1), gU, xt0, xt0)
	VPXOR(xt0, xacc, xacc)
	ghashMulX(power(1), xacc, xacc, xregs[rPoly], xt0, xregs[rT1], xregs[rGH0])
	VPSHUFB(xregs[rBswap], xacc, xacc)
	VPXOR(Mem{Base: gTag}, xacc, xacc)
	VMOVDQU(xacc, Mem{Base: gTag})
	VZEROUPPER()
	RET()
}

// VMOVDQA64orA copies register a into b.
func VMOVDQA64orA(k *kernel, a, b VecPhysical) {
	if k.evex {
		VMOVDQA64(a, b)
	} else {
		VMOVDQA(a, b)
	}
}

// absorbX hashes the 16-byte block in x (as loaded) into the accumulator.
func (k *kernel) absorbX(x VecPhysical) {
	xacc := xregs[rAcc]
	VPSHUFB(xregs[rBswap], x, x)
	VPXOR(x, xacc, xacc)
	ghashMulX(power(1), xacc, xacc, xregs[rPoly], xregs[rT0], xregs[rT1], xregs[rGH1])
}

// loadPartial loads n (1..width-1) bytes at p into r, zeroing the rest,
// without touching memory past p+n. The 512-bit kernels leave the byte
// mask in K1 for storePartial.
func (k *kernel) loadPartial(r VecPhysical, p, n GPPhysical) {
	if k.evex {
		MOVQ(I32(-1), gT)
		BZHIQ(n, gT, gT)
		KMOVQ(gT, K1)
		VMOVDQU8_Z(Mem{Base: p}, K1, r)
		return
	}
	loop, done := k.newLabel("bounce_in"), k.newLabel("bounce_in_done")
	VPXOR(yregs[rT1], yregs[rT1], yregs[rT1])
	VMOVDQU(yregs[rT1], k.buf)
	XORQ(gT, gT)
	Label(loop)
	CMPQ(gT, n)
	JAE(LabelRef(done))
	MOVB(Mem{Base: p, Index: gT, Scale: 1}, gU.As8())
	MOVB(gU.As8(), k.buf.Idx(gT, 1))
	INCQ(gT)
	JMP(LabelRef(loop))
	Label(done)
	VMOVDQU(k.buf, r)
}

// storePartial stores the first n (1..width-1) bytes of r at p.
func (k *kernel) storePartial(r VecPhysical, p, n GPPhysical) {
	if k.evex {
		VMOVDQU8(r, K1, Mem{Base: p})
		return
	}
	loop, done := k.newLabel("bounce_out"), k.newLabel("bounce_out_done")
	VMOVDQU(r, k.buf)
	XORQ(gT, gT)
	Label(loop)
	CMPQ(gT, n)
	JAE(LabelRef(done))
	MOVB(k.buf.Idx(gT, 1), gU.As8())
	MOVB(gU.As8(), Mem{Base: p, Index: gT, Scale: 1})
	INCQ(gT)
	JMP(LabelRef(loop))
	Label(done)
}

// ctrBlocks encrypts the next vector of counter blocks into a.
func (k *kernel) ctrBlocks(a VecPhysical) {
	VPSHUFB(k.v(rBswap), k.v(rCtr), a)
	VPADDD(k.v(rInc), k.v(rCtr), k.v(rCtr))
	k.xor(k.rk(0), a, a)
	for r := 1; r < k.nr; r++ {
		VAESENC(k.rk(r), a, a)
	}
	VAESENCLAST(k.rk(k.nr), a, a)
}

// chunk encrypts four vectors of counter blocks, xors them with src into
// dst and advances both, emitting the GHASH steps between the AES rounds.
func (k *kernel) chunk(steps []func()) {
	for j := 0; j < 4; j++ {
		a := k.v(rA0 + j)
		VPSHUFB(k.v(rBswap), k.v(rCtr), a)
		VPADDD(k.v(rInc), k.v(rCtr), k.v(rCtr))
		k.xor(k.rk(0), a, a)
	}
	next := 0
	for r := 1; r < k.nr; r++ {
		for j := 0; j < 4; j++ {
			VAESENC(k.rk(r), k.v(rA0+j), k.v(rA0+j))
		}
		// Spread the steps evenly over the rounds.
		for upto := len(steps) * r / (k.nr - 1); next < upto; next++ {
			steps[next]()
		}
	}
	k.emit(steps[next:])
	for j := 0; j < 4; j++ {
		VAESENCLAST(k.rk(k.nr), k.v(rA0+j), k.v(rA0+j))
	}
	for j := 0; j < 4; j++ {
		a := k.v(rA0 + j)
		k.xor(Mem{Base: gSrc, Disp: j * k.w}, a, a)
		k.store(a, Mem{Base: gDst, Disp: j * k.w})
	}
	ADDQ(U32(4*k.w), gSrc)
	ADDQ(U32(4*k.w), gDst)
}

func (k *kernel) emit(steps []func()) {
	for _, s := range steps {
		s()
	}
}

// hashSteps returns the steps that hash the four ciphertext vectors at
// base+disp into the accumulator: block i of the 4*lanes multiplies by
// H^(4*lanes-i), products are summed unreduced, reduced once per lane and
// the lanes summed.
func (k *kernel) hashSteps(base GPPhysical, disp int) []func() {
	var steps []func()
	n := 4 * k.lanes
	for j := 0; j < 4; j++ {
		gh := k.v(rGH0 + j%2)
		m := Mem{Base: base, Disp: disp + j*k.w}
		h := power(n - j*k.lanes)
		steps = append(steps, func() {
			k.load(m, gh)
			VPSHUFB(k.v(rBswap), gh, gh)
			if j == 0 {
				k.xor(k.v(rAcc), gh, gh)
			}
		})
		steps = append(steps, k.mulSteps(j == 0, gh, h)...)
	}
	return append(steps, k.reduceSteps()...)
}

// hashVector returns the steps that hash one vector gh (byte order as
// stored) with the powers loaded from h.
func (k *kernel) hashVector(gh VecPhysical, h Mem) []func() {
	steps := []func(){func() {
		VPSHUFB(k.v(rBswap), gh, gh)
		k.xor(k.v(rAcc), gh, gh)
	}}
	steps = append(steps, k.mulSteps(true, gh, h)...)
	return append(steps, k.reduceSteps()...)
}

// mulSteps multiply gh by the powers at h into the unreduced sums,
// setting them if first.
func (k *kernel) mulSteps(first bool, gh VecPhysical, h Mem) []func() {
	lo, mi, hi, t0, t1 := k.v(rLo), k.v(rMi), k.v(rHi), k.v(rT0), k.v(rT1)
	if first {
		return []func(){
			func() {
				VPCLMULQDQ(U8(0x00), h, gh, lo)
				VPCLMULQDQ(U8(0x11), h, gh, hi)
			},
			func() {
				VPCLMULQDQ(U8(0x01), h, gh, mi)
				VPCLMULQDQ(U8(0x10), h, gh, t0)
				k.xor(t0, mi, mi)
			},
		}
	}
	return []func(){
		func() {
			VPCLMULQDQ(U8(0x00), h, gh, t0)
			VPCLMULQDQ(U8(0x11), h, gh, t1)
			k.xor(t0, lo, lo)
			k.xor(t1, hi, hi)
		},
		func() {
			VPCLMULQDQ(U8(0x01), h, gh, t0)
			VPCLMULQDQ(U8(0x10), h, gh, t1)
			k.xor3(t0, t1, mi)
		},
	}
}

// reduceSteps fold LO into MI and MI into HI in every lane, then sum the
// lanes of HI into the accumulator.
func (k *kernel) reduceSteps() []func() {
	lo, mi, hi, t0, poly := k.v(rLo), k.v(rMi), k.v(rHi), k.v(rT0), k.v(rPoly)
	return []func(){
		func() {
			VPCLMULQDQ(U8(0x01), lo, poly, t0)
			VPSHUFD(U8(0x4e), lo, lo)
			k.xor3(lo, t0, mi)
		},
		func() {
			VPCLMULQDQ(U8(0x01), mi, poly, t0)
			VPSHUFD(U8(0x4e), mi, mi)
			k.xor3(mi, t0, hi)
		},
		func() {
			xacc, xt0, xt1 := xregs[rAcc], xregs[rT0], xregs[rT1]
			if k.evex {
				VEXTRACTI64X4(U8(1), hi, yregs[rT0])
				VPXOR(yregs[rT0], hi.AsY(), yregs[rT0])
				VEXTRACTI128(U8(1), yregs[rT0], xt1)
				VPXOR(xt1, xt0, xacc)
			} else {
				VEXTRACTI128(U8(1), hi, xt0)
				VPXOR(xt0, hi.AsX(), xacc)
			}
		},
	}
}
