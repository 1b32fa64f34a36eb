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
	gH     = R12 // powers for the tail's next vector
	gT     = RBX
	gU     = RDX
	gEnd   = R13 // end of src (split Seal), where reading moves to tail
)

// kernel generates one Seal or Open function for one vector width and
// key size.
//
// Both widths keep 256 bytes (16 blocks) in flight per loop iteration: the
// 512-bit kernels as 4 ZMM vectors (VAESENC on ZMM issues once per cycle
// on Zen 4, so 4 independent vectors cover its latency), the 256-bit ones
// as 8 YMM vectors (two per cycle). The GHASH of one chunk (16 blocks times
// H^16..H^1, summed unreduced, one reduction) is spread between the AES
// rounds of the next (Seal) or the same (Open) chunk.
type kernel struct {
	w     int // vector bytes: 64 (ZMM) or 32 (YMM)
	lanes int // blocks per vector
	nv    int // vectors per chunk
	nr    int // AES rounds
	dec   bool
	split bool // Seal of src || tail (see genSplitSeal)
	evex  bool
	// buf is 32 bytes of the YMM kernels' frame that nothing uses any more
	// (partial loads and stores go through registers, see loadPieces). It
	// stays so that accMem keeps its offset in the frame: moving a kernel's
	// stack data moves it against cache lines for a given caller, which has
	// cost other kernels here 4-7% (docs/PERFORMANCE.md, QQ TEA), and the
	// alternated runs that would show this one's effect were too noisy.
	buf Mem
	// accMem holds the accumulator during the bulk of the YMM kernels,
	// whose register 9 then carries the round key of the current round.
	accMem Mem
	label  int

	// Vector register indices.
	a                            []int // AES states
	ctr, acc, lo, mi, hi, t0, t1 int
	gh                           [2]int // ciphertext being hashed, alternately
	// Constants: registers (ZMM kernels) or memory (YMM kernels, which
	// need every register they have).
	bswap, poly, inc, xbswap, xpoly Op
	key                             int // YMM kernels: the round key register
}

// rKey0 is the first of the registers holding round keys (ZMM kernels).
const rKey0 = 16

func genKernel(w, nr int, dec bool) {
	genKernelSplit(w, nr, dec, false)
}

// genSplitSeal generates a Seal of the plaintext src || tail into one
// contiguous dst (sealSplitZ128, ...): the record layer seals its data
// followed by a one-byte record type straight from the caller's buffer,
// with only the last partial chunk and the type byte staged by the Go side.
// len(src) must be a multiple of the 256-byte chunk, so that reading moves
// from src to tail at a chunk boundary: before every chunk and before the
// tail, the kernel switches its source pointer to tail once it has reached
// the end of src. Everything else is the Seal kernel unchanged.
func genSplitSeal(w, nr int) {
	genKernelSplit(w, nr, false, true)
}

func genKernelSplit(w, nr int, dec, split bool) {
	k := &kernel{w: w, lanes: w / 16, nr: nr, dec: dec, split: split, evex: w == 64}
	if k.evex {
		// 0..3 states, 4 bswap, 5 poly, 6 inc, 7..15 the rest, 16..30 round keys.
		k.nv = 4
		k.a = []int{0, 1, 2, 3}
		k.bswap, k.poly, k.inc = Z4, Z5, Z6
		k.xbswap, k.xpoly = X4, X5
		k.ctr, k.acc, k.lo, k.mi, k.hi, k.t0, k.t1 = 7, 8, 9, 10, 11, 12, 13
		k.gh = [2]int{14, 15}
	} else {
		// 0..7 states, 8..15 the rest; constants from memory.
		k.nv = 8
		k.a = []int{0, 1, 2, 3, 4, 5, 6, 7}
		k.bswap, k.poly, k.inc = bswapMask, gfpoly, ctrInc.Offset(64)
		k.xbswap, k.xpoly = bswapMask, gfpoly
		k.ctr, k.acc, k.lo, k.mi, k.hi, k.t0, k.t1 = 8, 9, 10, 11, 12, 13, 14
		k.gh = [2]int{15, 15} // renaming makes one register enough
		k.key = 9             // shared with acc, see accMem
	}
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
	if split {
		name = fmt.Sprintf("sealSplit%s%d", letter, (nr-6)*32)
		TEXT(name, NOSPLIT, fmt.Sprintf("func(ks *[%d]byte, nonce *[12]byte, dst []byte, src []byte, tail []byte, aad []byte, tag *[16]byte)", ksSize))
		Pragma("noescape")
		Doc(fmt.Sprintf("%s encrypts src || tail into dst and writes the tag (AES-%d-GCM, %s). len(dst) must equal len(src) + len(tail), len(src) must be a multiple of 256, and dst must not overlap src or tail.", name, (nr-6)*32, isa))
	} else {
		TEXT(name, NOSPLIT, fmt.Sprintf("func(ks *[%d]byte, nonce *[12]byte, dst []byte, src []byte, aad []byte, tag *[16]byte)", ksSize))
		Pragma("noescape")
		Doc(fmt.Sprintf("%s %s (AES-%d-GCM, %s). len(dst) must equal len(src); dst may be src.", name, what, (nr-6)*32, isa))
	}
	if !k.evex {
		k.buf = AllocLocal(32)
		k.accMem = AllocLocal(32)
	}
	k.body()
}

// switchSrc (split Seal only) moves the source pointer to tail when it has
// reached the end of src. Called before each chunk and before the tail, so
// with len(src) a multiple of the chunk the move happens exactly once, at a
// chunk boundary, and no load reads past either buffer.
func (k *kernel) switchSrc() {
	if !k.split {
		return
	}
	same := k.newLabel("src_left")
	CMPQ(gSrc, gEnd)
	JNE(LabelRef(same))
	Load(Param("tail").Base(), gSrc)
	Label(same)
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

func (k *kernel) mov(a, b VecPhysical) {
	if k.evex {
		VMOVDQA64(a, b)
	} else {
		VMOVDQA(a, b)
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

// rk returns round key r as an operand; the YMM kernels must have called
// loadKey(r) first.
func (k *kernel) rk(r int) Op {
	if k.evex {
		return zregs[rKey0+r]
	}
	return k.v(k.key)
}

// loadKey loads round key r into the YMM kernels' key register: one load
// per round rather than one memory operand per VAESENC.
func (k *kernel) loadKey(r int) {
	if !k.evex {
		VMOVDQU(Mem{Base: gKS, Disp: r * rkStride}, k.v(k.key))
	}
}

// accOp returns the accumulator as a full-width operand (upper lanes zero).
func (k *kernel) accOp() Op {
	if k.evex {
		return k.v(k.acc)
	}
	return k.accMem
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
	if k.split {
		LEAQ(Mem{Base: gSrc, Index: gN, Scale: 1}, gEnd)
		Load(Param("tail").Len(), gT)
		ADDQ(gT, gN)
	}
	Load(Param("aad").Base(), gAAD)
	Load(Param("aad").Len(), gAADN)
	Load(Param("tag"), gTag)

	ctr := k.v(k.ctr)
	xt0, xacc := xregs[k.t0], xregs[k.acc]

	if k.evex {
		Comment("Constants and round keys.")
		VMOVDQU64(bswapMask, Z4)
		VMOVDQU64(gfpoly, Z5)
		VMOVDQU64(ctrInc, Z6)
		for r := 0; r <= k.nr; r++ {
			VMOVDQU64(Mem{Base: gKS, Disp: r * rkStride}, zregs[rKey0+r])
		}
	}

	Comment("J0 = nonce || 1; the tag buffer holds it until E(J0) replaces it.")
	VMOVQ(Mem{Base: gNonce}, xt0)
	VPINSRD(U8(2), Mem{Base: gNonce, Disp: 8}, xt0, xt0)
	MOVL(U32(0x01000000), EBX)
	VPINSRD(U8(3), EBX, xt0, xt0)
	VMOVDQU(xt0, Mem{Base: gTag})
	if k.evex {
		VBROADCASTI32X4(Mem{Base: gTag}, ctr)
	} else {
		VBROADCASTI128(Mem{Base: gTag}, ctr)
	}
	VPSHUFB(k.bswap, ctr, ctr)
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
	if !k.evex {
		VMOVDQU(k.v(k.acc), k.accMem)
	}

	chunk := k.nv * k.w
	loop, tail := k.newLabel("loop"), k.newLabel("tail")
	if !k.dec {
		Comment("The first chunk is encrypted without hashing; each next one hashes the one before.")
		last := k.newLabel("hash_last")
		CMPQ(gN, U32(chunk))
		JB(LabelRef(tail))
		k.switchSrc()
		k.chunk(nil)
		SUBQ(U32(chunk), gN)
		Label(loop)
		CMPQ(gN, U32(chunk))
		JB(LabelRef(last))
		k.switchSrc()
		k.chunk(k.hashSteps(gDst, -chunk))
		SUBQ(U32(chunk), gN)
		JMP(LabelRef(loop))
		Label(last)
		// The last chunk's GHASH runs during the tail's AES, if there is a tail.
		withTail := k.newLabel("tail_hash_last")
		TESTQ(gN, gN)
		JNZ(LabelRef(withTail))
		k.emit(k.hashSteps(gDst, -chunk))
		JMP(LabelRef("final"))
		Label(withTail)
		k.switchSrc()
		k.tail(k.hashSteps(gDst, -chunk))
		JMP(LabelRef("final"))
	} else {
		Comment("Each chunk of ciphertext is hashed while it is decrypted.")
		Label(loop)
		CMPQ(gN, U32(chunk))
		JB(LabelRef(tail))
		k.chunk(k.hashSteps(gSrc, 0))
		SUBQ(U32(chunk), gN)
		JMP(LabelRef(loop))
	}

	Label(tail)
	TESTQ(gN, gN)
	JZ(LabelRef("final"))
	k.switchSrc()
	k.tail(nil)

	Comment("The lengths block, then tag = E(J0) ^ GHASH.")
	Label("final")
	if !k.evex {
		VMOVDQU(k.accMem.Offset(0), xacc)
	}
	Load(Param("src").Len(), gT)
	if k.split {
		Load(Param("tail").Len(), gU)
		ADDQ(gU, gT)
	}
	SHLQ(U8(3), gT)
	Load(Param("aad").Len(), gU)
	SHLQ(U8(3), gU)
	VMOVQ(gT, xt0)
	VPINSRQ(U8(1), gU, xt0, xt0)
	VPXOR(xt0, xacc, xacc)
	ghashMulX(power(1), xacc, xacc, k.xpoly, xt0, xregs[k.t1], xregs[k.gh[0]])
	VPSHUFB(k.xbswap, xacc, xacc)
	VPXOR(Mem{Base: gTag}, xacc, xacc)
	VMOVDQU(xacc, Mem{Base: gTag})
	VZEROUPPER()
	RET()
}

// tail handles the last 1..chunk-1 bytes: it encrypts a whole chunk of
// counter blocks at once (as fast as one vector, the rounds overlapping),
// then stores and hashes whole vectors and finally a partial one with
// masked (or staged) loads and stores. The nb blocks left (the last one
// zero-padded) take H^nb..H^1, starting at table entry 16-nb, and are
// summed unreduced with the accumulator times H^nb; one reduction ends it.
// The pending steps (Seal's GHASH of its last whole chunk) run between the
// AES rounds, before the accumulator is taken.
func (k *kernel) tail(pending []func()) {
	Comment("The tail: a chunk of key stream, then whole vectors, then a partial one.")
	LEAQ(Mem{Base: gN, Disp: 15}, gT)
	ANDQ(I32(-16), gT)
	MOVQ(U32(256), gU)
	SUBQ(gT, gU)
	LEAQ(Mem{Base: gKS, Index: gU, Scale: 1, Disp: tblOff}, gH)
	accv := k.v(k.acc)
	steps := pending
	if !k.evex {
		accv = k.v(k.gh[0])
		steps = append(steps, func() { VMOVDQU(k.accMem, accv) })
	}
	steps = append(steps, k.mulSteps(true, accv, Mem{Base: gH})...)
	k.rounds(steps)

	partial, reduce := k.newLabel("partial"), k.newLabel("reduce")
	gh := k.v(k.gh[0])
	for j, a := range k.a {
		full := k.newLabel("full")
		CMPQ(gN, U8(k.w))
		JAE(LabelRef(full))
		if j > 0 {
			k.mov(k.v(a), k.v(k.a[0]))
		}
		JMP(LabelRef(partial))
		Label(full)
		av := k.v(a)
		if k.dec {
			k.load(Mem{Base: gSrc}, gh)
		}
		k.xor(Mem{Base: gSrc}, av, av)
		k.store(av, Mem{Base: gDst})
		if !k.dec {
			k.mov(av, gh)
		}
		VPSHUFB(k.bswap, gh, gh)
		k.emit(k.mulSteps(false, gh, Mem{Base: gH}))
		ADDQ(U8(k.w), gSrc)
		ADDQ(U8(k.w), gDst)
		ADDQ(U8(k.w), gH)
		SUBQ(U8(k.w), gN)
	}

	Label(partial)
	TESTQ(gN, gN)
	JZ(LabelRef(reduce))
	a0 := k.v(k.a[0])
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
	VPSHUFB(k.bswap, gh, gh)
	k.emit(k.mulSteps(false, gh, Mem{Base: gH}))
	Label(reduce)
	k.emit(k.reduceSteps())
}

// absorbX hashes the 16-byte block in x (as loaded) into the accumulator.
func (k *kernel) absorbX(x VecPhysical) {
	xacc := xregs[k.acc]
	VPSHUFB(k.xbswap, x, x)
	VPXOR(x, xacc, xacc)
	ghashMulX(power(1), xacc, xacc, k.xpoly, xregs[k.t0], xregs[k.t1], xregs[k.gh[1]])
}

// loadPartial loads n (1..width-1) bytes at p into r, zeroing the rest,
// without touching memory past p+n. The 512-bit kernels leave the byte
// mask in K1 for storePartial. The 256-bit kernels load a whole first half
// if n >= 16 and the rest in pieces of 8, 4, 2 and 1 bytes (loadPieces);
// r may be an XMM register when n < 16 (the additional data's last block).
func (k *kernel) loadPartial(r VecPhysical, p, n GPPhysical) {
	if k.evex {
		MOVQ(I32(-1), gT)
		BZHIQ(n, gT, gT)
		KMOVQ(gT, K1)
		VMOVDQU8_Z(Mem{Base: p}, K1, r)
		return
	}
	MOVQ(p, gT)
	MOVQ(n, gU)
	xr := r.AsX().(VecPhysical)
	if r.Size() == 16 {
		loadPieces(xr)
		return
	}
	small, done := k.newLabel("load_small"), k.newLabel("load_done")
	CMPQ(gU, U8(16))
	JB(LabelRef(small))
	VMOVDQU(Mem{Base: gT}, xregs[k.t1])
	ADDQ(U8(16), gT)
	SUBQ(U8(16), gU)
	loadPieces(xr)
	VINSERTI128(U8(1), xr, yregs[k.t1], r)
	JMP(LabelRef(done))
	Label(small)
	loadPieces(xr)
	Label(done)
}

// Registers of loadPieces and storePieces besides gT (the pointer) and gU
// (the count): the bytes in flight and an offset. The nonce pointer is dead
// once J0 is made.
var gPiece, gOff = R14, gNonce

// loadPieces loads the gU (0..15) bytes at gT into x (VEX, so the rest of
// the register is zeroed) as one piece each of 8, 4, 2 and 1 bytes that
// gU's bits ask for, in that order from gT: no loop, and no narrow stores
// into a buffer that a wide load then reads (that store forwarding fails,
// and the load waits for the stores to retire). Branches depend on the
// length only.
func loadPieces(x VecPhysical) {
	l := func(s string) string { return fmt.Sprintf("%s_%d", s, pieceLabel) }
	pieceLabel++
	XORQ(gPiece, gPiece)
	TESTQ(U32(1), gU)
	JZ(LabelRef(l("ld_no1")))
	MOVQ(gU, gOff)
	ANDQ(U8(14), gOff)
	MOVBQZX(Mem{Base: gT, Index: gOff, Scale: 1}, gPiece)
	Label(l("ld_no1"))
	TESTQ(U32(2), gU)
	JZ(LabelRef(l("ld_no2")))
	MOVQ(gU, gOff)
	ANDQ(U8(12), gOff)
	SHLQ(U8(16), gPiece)
	MOVWQZX(Mem{Base: gT, Index: gOff, Scale: 1}, gOff)
	ORQ(gOff, gPiece)
	Label(l("ld_no2"))
	TESTQ(U32(4), gU)
	JZ(LabelRef(l("ld_no4")))
	MOVQ(gU, gOff)
	ANDQ(U8(8), gOff)
	SHLQ(U8(32), gPiece)
	MOVL(Mem{Base: gT, Index: gOff, Scale: 1}, gOff.As32())
	ORQ(gOff, gPiece)
	Label(l("ld_no4"))
	TESTQ(U32(8), gU)
	JZ(LabelRef(l("ld_no8")))
	VMOVQ(Mem{Base: gT}, x)
	VPINSRQ(U8(1), gPiece, x, x)
	JMP(LabelRef(l("ld_done")))
	Label(l("ld_no8"))
	VMOVQ(gPiece, x)
	Label(l("ld_done"))
}

// storePieces stores the low gU (0..15) bytes of x at gT, in the pieces
// loadPieces reads.
func storePieces(x VecPhysical) {
	l := func(s string) string { return fmt.Sprintf("%s_%d", s, pieceLabel) }
	pieceLabel++
	TESTQ(U32(8), gU)
	JZ(LabelRef(l("st_no8")))
	VMOVQ(x, Mem{Base: gT})
	VPEXTRQ(U8(1), x, gPiece)
	JMP(LabelRef(l("st_4")))
	Label(l("st_no8"))
	VMOVQ(x, gPiece)
	Label(l("st_4"))
	TESTQ(U32(4), gU)
	JZ(LabelRef(l("st_no4")))
	MOVQ(gU, gOff)
	ANDQ(U8(8), gOff)
	MOVL(gPiece.As32(), Mem{Base: gT, Index: gOff, Scale: 1})
	SHRQ(U8(32), gPiece)
	Label(l("st_no4"))
	TESTQ(U32(2), gU)
	JZ(LabelRef(l("st_no2")))
	MOVQ(gU, gOff)
	ANDQ(U8(12), gOff)
	MOVW(gPiece.As16(), Mem{Base: gT, Index: gOff, Scale: 1})
	SHRQ(U8(16), gPiece)
	Label(l("st_no2"))
	TESTQ(U32(1), gU)
	JZ(LabelRef(l("st_no1")))
	MOVQ(gU, gOff)
	ANDQ(U8(14), gOff)
	MOVB(gPiece.As8(), Mem{Base: gT, Index: gOff, Scale: 1})
	Label(l("st_no1"))
}

// pieceLabel numbers the labels of loadPieces and storePieces.
var pieceLabel int

// storePartial stores the first n (1..width-1) bytes of r at p: the
// 512-bit kernels with the mask loadPartial left in K1, the 256-bit ones as
// a whole first half if n >= 16 and the rest in pieces (storePieces).
func (k *kernel) storePartial(r VecPhysical, p, n GPPhysical) {
	if k.evex {
		VMOVDQU8(r, K1, Mem{Base: p})
		return
	}
	x := xregs[k.t1]
	MOVQ(p, gT)
	MOVQ(n, gU)
	VMOVDQA(r.AsX(), x)
	small := k.newLabel("store_small")
	CMPQ(gU, U8(16))
	JB(LabelRef(small))
	VMOVDQU(x, Mem{Base: gT})
	VEXTRACTI128(U8(1), r, x)
	ADDQ(U8(16), gT)
	SUBQ(U8(16), gU)
	Label(small)
	storePieces(x)
}

// chunk encrypts nv vectors of counter blocks, xors them with src into
// dst and advances both, emitting the GHASH steps between the AES rounds.
func (k *kernel) chunk(steps []func()) {
	k.rounds(steps)
	for j, a := range k.a {
		k.xor(Mem{Base: gSrc, Disp: j * k.w}, k.v(a), k.v(a))
		k.store(k.v(a), Mem{Base: gDst, Disp: j * k.w})
	}
	ADDQ(U32(k.nv*k.w), gSrc)
	ADDQ(U32(k.nv*k.w), gDst)
}

// rounds encrypts the next nv vectors of counter blocks into the AES
// states, emitting steps spread evenly between the rounds.
func (k *kernel) rounds(steps []func()) {
	k.loadKey(0)
	for _, a := range k.a {
		VPSHUFB(k.bswap, k.v(k.ctr), k.v(a))
		VPADDD(k.inc, k.v(k.ctr), k.v(k.ctr))
		k.xor(k.rk(0), k.v(a), k.v(a))
	}
	next := 0
	for r := 1; r < k.nr; r++ {
		k.loadKey(r)
		for _, a := range k.a {
			VAESENC(k.rk(r), k.v(a), k.v(a))
		}
		for upto := len(steps) * r / (k.nr - 1); next < upto; next++ {
			steps[next]()
		}
	}
	k.emit(steps[next:])
	k.loadKey(k.nr)
	for _, a := range k.a {
		VAESENCLAST(k.rk(k.nr), k.v(a), k.v(a))
	}
}

func (k *kernel) emit(steps []func()) {
	for _, s := range steps {
		s()
	}
}

// hashSteps returns the steps that hash the chunk of ciphertext at
// base+disp into the accumulator: its block i of 16 multiplies by
// H^(16-i), products are summed unreduced, reduced once per lane and the
// lanes summed.
func (k *kernel) hashSteps(base GPPhysical, disp int) []func() {
	var steps []func()
	for j := 0; j < k.nv; j++ {
		gh := k.v(k.gh[j%2])
		m := Mem{Base: base, Disp: disp + j*k.w}
		h := power(16 - j*k.lanes)
		steps = append(steps, func() {
			k.load(m, gh)
			VPSHUFB(k.bswap, gh, gh)
			if j == 0 {
				k.xor(k.accOp(), gh, gh)
			}
		})
		steps = append(steps, k.mulSteps(j == 0, gh, h)...)
	}
	return append(steps, k.reduceSteps()...)
}

// mulSteps multiply gh by the powers at h into the unreduced sums,
// setting them if first.
func (k *kernel) mulSteps(first bool, gh VecPhysical, h Mem) []func() {
	lo, mi, hi, t0, t1 := k.v(k.lo), k.v(k.mi), k.v(k.hi), k.v(k.t0), k.v(k.t1)
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
	lo, mi, hi, t0 := k.v(k.lo), k.v(k.mi), k.v(k.hi), k.v(k.t0)
	return []func(){
		func() {
			VPCLMULQDQ(U8(0x10), k.poly, lo, t0) // LO_L * (x^63 + x^62 + x^57)
			VPSHUFD(U8(0x4e), lo, lo)
			k.xor3(lo, t0, mi)
		},
		func() {
			VPCLMULQDQ(U8(0x10), k.poly, mi, t0)
			VPSHUFD(U8(0x4e), mi, mi)
			k.xor3(mi, t0, hi)
		},
		func() {
			xacc, xt0, xt1 := xregs[k.acc], xregs[k.t0], xregs[k.t1]
			if k.evex {
				VEXTRACTI64X4(U8(1), hi, yregs[k.t0])
				VPXOR(yregs[k.t0], hi.AsY(), yregs[k.t0])
				VEXTRACTI128(U8(1), yregs[k.t0], xt1)
				VPXOR(xt1, xt0, xacc)
			} else {
				VEXTRACTI128(U8(1), hi, xt0)
				VPXOR(xt0, hi.AsX(), xt0)
				VMOVDQU(yregs[k.t0], k.accMem) // upper half zeroed by VPXOR
			}
		},
	}
}
