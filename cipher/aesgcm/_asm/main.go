// Command _asm generates the amd64 assembly of package aesgcm with avo:
//
//	go run . -out ../aesgcm_amd64.s -stubs ../aesgcm_stub_amd64.go -pkg aesgcm
//
// Functions:
//   - initKey128 / initKey256: AES key expansion with VAESKEYGENASSIST (no
//     table lookups), the hash key H = AES_K(0^128) and its powers H^1..H^16
//     for GHASH, written into one key schedule (layout below).
//   - sealZ128 / openZ128 / sealZ256 / openZ256: the whole of a GCM Seal or
//     Open (AAD, CTR encryption, GHASH, tag) on 512-bit vectors: VAES and
//     VPCLMULQDQ on ZMM registers, round keys held in Z16..Z30, masked
//     (AVX-512BW) loads and stores for the tail. Needs AVX-512F/BW/VL, VAES,
//     VPCLMULQDQ and BMI2.
//   - sealY128 / openY128 / sealY256 / openY256: the same on 256-bit vectors
//     with VEX encodings only (AVX2 + VAES + VPCLMULQDQ, 16 registers), the
//     tail staged through a stack buffer.
//   - sealSplitY128 / sealSplitY256: Seal of src || tail into one dst (the
//     record layer's data and its type byte, without copying the data
//     first); the 256-bit Seal kernels with a source pointer that moves to
//     tail at the end of src (len(src) a multiple of 256 bytes). Only the
//     256-bit width is generated: it runs on every CPU the kernels serve,
//     and a 512-bit twin could not be run on the machines this was built
//     and tested on (VAES without AVX-512).
//   - cpuid7ECX: ECX of CPUID leaf 7, because golang.org/x/sys/cpu reports
//     VAES and VPCLMULQDQ only on CPUs with AVX-512.
//
// The function signatures are given explicitly so that the generator never
// imports package aesgcm. The output depends only on this program, so
// `go generate` reproduces it byte for byte.
package main

import (
	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	. "github.com/mmcloughlin/avo/reg"
)

// Key schedule layout (package aesgcm's keySchedule, ksSize bytes). Round
// keys are stored broadcast to four 128-bit lanes so that a 256- or 512-bit
// VAESENC can take them straight from memory. The powers of H are stored
// byte-reflected and multiplied by x (see genInit), highest power first, so
// that the n blocks ending a message load their powers H^n..H^1 as one run
// at entry 16-n; four zero entries follow so that such a load never reads
// past the table (the blocks they meet are zero).
const (
	rkStride = 64
	tblOff   = 15 * rkStride // 960
	tblLen   = 20 * 16       // H^16..H^1 and 4 zero entries
	ksSize   = tblOff + tblLen
)

func main() {
	ConstraintExpr("!purego")
	genConsts()
	genInit(10)
	genInit(14)
	for _, w := range []int{64, 32} {
		for _, nr := range []int{10, 14} {
			genKernel(w, nr, false)
			genKernel(w, nr, true)
		}
	}
	for _, nr := range []int{10, 14} {
		genSplitSeal(32, nr)
	}
	genCPUID()
	Generate()
}

var (
	bswapMask   Mem // VPSHUFB mask reversing the bytes of each 128-bit lane
	gfpoly      Mem // the reduction constant 0xc2000000000000000000000000000001 per lane
	gfpolyCarry Mem // gfpoly with the carry bit of the 64-bit halves (bit 64) set
	ctrInit     Mem // lane i: i+1 in its low dword (first data block is J0+1)
	ctrInc      Mem // 64 bytes of lanes +4 (ZMM), then 32 bytes of lanes +2 (YMM)
	tailMask    Mem // 64 bytes 0xff then 64 bytes 0x00
)

func genConsts() {
	bswapMask = GLOBL("aesgcm_bswap", RODATA|NOPTR)
	for i := 0; i < 64; i++ {
		DATA(i, U8(15-i%16))
	}
	gfpoly = GLOBL("aesgcm_gfpoly", RODATA|NOPTR)
	for i := 0; i < 4; i++ {
		DATA(16*i, U64(1))
		DATA(16*i+8, U64(0xc200000000000000))
	}
	gfpolyCarry = GLOBL("aesgcm_gfpoly_carry", RODATA|NOPTR)
	DATA(0, U64(1))
	DATA(8, U64(0xc200000000000001))
	ctrInit = GLOBL("aesgcm_ctr_init", RODATA|NOPTR)
	for i := 0; i < 4; i++ {
		DATA(16*i, U64(uint64(i+1)))
		DATA(16*i+8, U64(0))
	}
	ctrInc = GLOBL("aesgcm_ctr_inc", RODATA|NOPTR)
	for i := 0; i < 4; i++ {
		DATA(16*i, U64(4))
		DATA(16*i+8, U64(0))
	}
	for i := 0; i < 2; i++ {
		DATA(64+16*i, U64(2))
		DATA(64+16*i+8, U64(0))
	}
	tailMask = GLOBL("aesgcm_tail_mask", RODATA|NOPTR)
	// The assembler wants DATA in increasing offsets.
	for i := 0; i < 128; i += 8 {
		v := uint64(0)
		if i < 64 {
			v = ^v
		}
		DATA(i, U64(v))
	}
}

func genCPUID() {
	TEXT("cpuid7ECX", NOSPLIT, "func() uint32")
	Doc("cpuid7ECX returns ECX of CPUID leaf 7, subleaf 0 (bit 9 VAES, bit 10 VPCLMULQDQ).")
	MOVL(U32(7), EAX)
	XORL(ECX, ECX)
	CPUID()
	Store(ECX, ReturnIndex(0))
	RET()
}
