package main

import (
	"fmt"

	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	. "github.com/mmcloughlin/avo/reg"
)

// genInit emits initKey128 (nr 10) or initKey256 (nr 14). It uses VEX
// encodings and X0..X5 only, so both kernels' CPUs can run it.
//
// Key expansion follows Intel's AES-NI white paper: VAESKEYGENASSIST
// computes SubWord(RotWord(w)) ^ rcon in the AES unit, so no S-box table
// is ever indexed by key bytes.
//
// GHASH works on byte-reflected blocks (VPSHUFB with bswapMask on every
// load), which turns GCM's bit order into the natural order of
// VPCLMULQDQ up to a factor x^-1 per product; H is multiplied by x once
// here so that every product comes out right. The multiplication and
// reduction (by x^128 + x^127 + x^126 + x^121 + 1 in two folds with the
// constant 0xc2...01) are those of the Linux kernel's
// aes-gcm-avx10-x86_64.S.
func genInit(nr int) {
	keyLen := 16
	if nr == 14 {
		keyLen = 32
	}
	name := fmt.Sprintf("initKey%d", keyLen*8)
	TEXT(name, NOSPLIT, fmt.Sprintf("func(key *[%d]byte, ks *[%d]byte)", keyLen, ksSize))
	Pragma("noescape")
	Doc(fmt.Sprintf("%s expands an AES-%d key into ks: round keys and the powers of H.", name, keyLen*8))
	key := Load(Param("key"), RSI)
	ks := Load(Param("ks"), RDI)

	store := func(i int, x VecPhysical) {
		y := x.AsY()
		VINSERTI128(U8(1), x, y, y)
		VMOVDQU(y, Mem{Base: ks, Disp: i * rkStride})
		VMOVDQU(y, Mem{Base: ks, Disp: i*rkStride + 32})
	}
	// expand sets x to x ^ x<<32 ^ x<<64 ^ x<<96 ^ t (t: the assisted word
	// in every dword).
	expand := func(x, t VecPhysical) {
		VPSLLDQ(U8(4), x, X3)
		VPXOR(X3, x, x)
		VPSLLDQ(U8(4), X3, X3)
		VPXOR(X3, x, x)
		VPSLLDQ(U8(4), X3, X3)
		VPXOR(X3, x, x)
		VPXOR(t, x, x)
	}
	Comment("Round keys.")
	if nr == 10 {
		VMOVDQU(Mem{Base: key}, X1)
		store(0, X1)
		for i, rc := range []uint8{1, 2, 4, 8, 16, 32, 64, 128, 27, 54} {
			VAESKEYGENASSIST(U8(rc), X1, X2)
			VPSHUFD(U8(0xff), X2, X2)
			expand(X1, X2)
			store(i+1, X1)
		}
	} else {
		VMOVDQU(Mem{Base: key}, X1)
		VMOVDQU(Mem{Base: key, Disp: 16}, X4)
		store(0, X1)
		store(1, X4)
		for i, rc := range []uint8{1, 2, 4, 8, 16, 32, 64} {
			VAESKEYGENASSIST(U8(rc), X4, X2)
			VPSHUFD(U8(0xff), X2, X2)
			expand(X1, X2)
			store(2+2*i, X1)
			if i == 6 {
				break
			}
			VAESKEYGENASSIST(U8(0), X1, X2)
			VPSHUFD(U8(0xaa), X2, X2)
			expand(X4, X2)
			store(3+2*i, X4)
		}
	}

	Comment("H = AES_K(0), byte-reflected, times x.")
	VMOVDQU(Mem{Base: ks}, X0)
	for r := 1; r < nr; r++ {
		VAESENC(Mem{Base: ks, Disp: r * rkStride}, X0, X0)
	}
	VAESENCLAST(Mem{Base: ks, Disp: nr * rkStride}, X0, X0)
	VPSHUFB(bswapMask, X0, X0)
	// A 1-bit left shift of the 128-bit value with reduction: double both
	// 64-bit halves, then xor in the carry between them and, if the top
	// bit fell out, the polynomial.
	VPSHUFD(U8(0xd3), X0, X1)
	VPSRAD(U8(31), X1, X1)
	VPADDQ(X0, X0, X0)
	VPAND(gfpolyCarry, X1, X1)
	VPXOR(X1, X0, X0)

	Comment("Powers H^1..H^16, highest first.")
	VMOVDQU(gfpoly, X5)
	VMOVDQU(X0, Mem{Base: ks, Disp: tblOff + 15*16})
	VMOVDQA(X0, X4)
	for k := 2; k <= 16; k++ {
		ghashMulX(X0, X4, X4, X5, X1, X2, X3)
		VMOVDQU(X4, Mem{Base: ks, Disp: tblOff + (16-k)*16})
	}
	VPXOR(X1, X1, X1)
	for i := 16; i < 20; i++ {
		VMOVDQU(X1, Mem{Base: ks, Disp: tblOff + i*16})
	}
	VZEROUPPER()
	RET()
}

// ghashMulX emits dst = a*b in GHASH's field (reflected representation,
// see genInit) with VEX instructions on XMM registers. a may be a memory
// operand; dst may be b. poly is gfpoly, in a register or memory.
func ghashMulX(a Op, b, dst VecPhysical, poly Op, t0, t1, t2 VecPhysical) {
	VPCLMULQDQ(U8(0x00), a, b, t0) // LO = a_L*b_L
	VPCLMULQDQ(U8(0x01), a, b, t1) // MI = a_L*b_H + a_H*b_L
	VPCLMULQDQ(U8(0x10), a, b, t2)
	VPXOR(t2, t1, t1)
	VPCLMULQDQ(U8(0x10), poly, t0, t2) // fold LO into MI
	VPSHUFD(U8(0x4e), t0, t0)
	VPXOR(t0, t1, t1)
	VPXOR(t2, t1, t1)
	VPCLMULQDQ(U8(0x11), a, b, dst)    // HI = a_H*b_H
	VPCLMULQDQ(U8(0x10), poly, t1, t0) // fold MI into HI
	VPSHUFD(U8(0x4e), t1, t1)
	VPXOR(t1, dst, dst)
	VPXOR(t0, dst, dst)
}
