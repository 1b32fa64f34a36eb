// Command _asm generates blake3_amd64.s and its Go declarations with avo.
//
// The generator writes the BLAKE3 round once (round, with the quarter-round
// steps in gQuad for the word-sliced kernels and halfG for the row kernels)
// and loops over the seven rounds; the emitted assembly is unrolled.
//
// Kernels:
//   - compressSSE41, chainSSE41: one block (full 64-byte output) and a chain
//     of blocks (one chunk), the state held as four rows of 4 words.
//   - compressAVX512, chainAVX512: the same with AVX-512VL rotates (VPRORD)
//     and the message schedule made by VPERMD.
//   - hash8AVX2, hash8AVX512: 8 inputs at once (8 chunks, or 8 parent
//     nodes), one word of the state per ymm register.
//   - hash16AVX512: 16 inputs at once with zmm registers.
//   - chain2AVX512, chain2AVX2 (and their Root forms): two chains side by
//     side in the halves of ymm rows, at about the latency of one.
package main

import (
	"fmt"

	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	"github.com/mmcloughlin/avo/reg"
)

var msgPerm = [16]int{2, 6, 3, 10, 7, 0, 4, 13, 1, 11, 12, 5, 9, 14, 15, 8}

// schedule[r][i] is the original message word used in position i of round r.
var schedule = func() (s [7][16]int) {
	for i := range s[0] {
		s[0][i] = i
	}
	for r := 1; r < 7; r++ {
		for i := range s[r] {
			s[r][i] = s[r-1][msgPerm[i]]
		}
	}
	return s
}()

var ivWords = [8]uint32{
	0x6A09E667, 0xBB67AE85, 0x3C6EF372, 0xA54FF53A,
	0x510E527F, 0x9B05688C, 0x1F83D9AB, 0x5BE0CD19,
}

var (
	yregs = []reg.VecPhysical{reg.Y0, reg.Y1, reg.Y2, reg.Y3, reg.Y4, reg.Y5, reg.Y6, reg.Y7,
		reg.Y8, reg.Y9, reg.Y10, reg.Y11, reg.Y12, reg.Y13, reg.Y14, reg.Y15,
		reg.Y16, reg.Y17, reg.Y18, reg.Y19, reg.Y20, reg.Y21, reg.Y22, reg.Y23,
		reg.Y24, reg.Y25, reg.Y26, reg.Y27, reg.Y28, reg.Y29, reg.Y30, reg.Y31}
	zregs = []reg.VecPhysical{reg.Z0, reg.Z1, reg.Z2, reg.Z3, reg.Z4, reg.Z5, reg.Z6, reg.Z7,
		reg.Z8, reg.Z9, reg.Z10, reg.Z11, reg.Z12, reg.Z13, reg.Z14, reg.Z15,
		reg.Z16, reg.Z17, reg.Z18, reg.Z19, reg.Z20, reg.Z21, reg.Z22, reg.Z23,
		reg.Z24, reg.Z25, reg.Z26, reg.Z27, reg.Z28, reg.Z29, reg.Z30, reg.Z31}
)

// Constant tables.
var (
	ivMem, rot16Mem, rot8Mem, blockLenMem, idxMem, idx2Mem, idx16Mem Mem
)

// The order in which the row kernels consume a round's message words:
// columns (first, then second word of each G), then diagonals rotated to
// match the lanes of row b, which stays in place.
var rowLayout = [16]int{0, 2, 4, 6, 1, 3, 5, 7, 14, 8, 10, 12, 15, 9, 11, 13}

func constants() {
	ivMem = GLOBL("blake3IV", RODATA|NOPTR)
	for i, w := range ivWords {
		DATA(4*i, U32(w))
	}
	// PSHUFB masks rotating each 32-bit word right by 16 and by 8.
	rot16Mem = GLOBL("blake3Rot16", RODATA|NOPTR)
	for i := 0; i < 32; i++ {
		base := i &^ 3
		DATA(i, U8(base+(i+2)%4))
	}
	rot8Mem = GLOBL("blake3Rot8", RODATA|NOPTR)
	for i := 0; i < 32; i++ {
		base := i &^ 3
		DATA(i, U8(base+(i+1)%4))
	}
	blockLenMem = GLOBL("blake3BlockLen", RODATA|NOPTR)
	DATA(0, U32(64))
	// VPERMI2D indices: vector v of round r (the four message vectors of a
	// round in rowLayout order) in the low half of entry 4r+v.
	idxMem = GLOBL("blake3Idx", RODATA|NOPTR)
	for r := 0; r < 7; r++ {
		for v := 0; v < 4; v++ {
			for i := 0; i < 8; i++ {
				DATA(32*(4*r+v)+4*i, U32(uint32(schedule[r][rowLayout[4*v+i%4]])))
			}
		}
	}
	// VPERMD indices: round r's sixteen message words in rowLayout order,
	// entry r (the chain kernel's schedule of its first block).
	idx16Mem = GLOBL("blake3Idx16", RODATA|NOPTR)
	for r := 0; r < 7; r++ {
		for i := 0; i < 16; i++ {
			DATA(64*r+4*i, U32(uint32(schedule[r][rowLayout[i]])))
		}
	}
	// Two-block form for chain2AVX512: entry 2r+h holds message vectors
	// 2h and 2h+1 of round r, each as four words of the first block
	// (indices 0-15) then four of the second (16-31).
	idx2Mem = GLOBL("blake3Idx2", RODATA|NOPTR)
	for r := 0; r < 7; r++ {
		for h := 0; h < 2; h++ {
			for i := 0; i < 16; i++ {
				v, block := 2*h+i/8, (i/4)%2
				DATA(64*(2*r+h)+4*i, U32(uint32(schedule[r][rowLayout[4*v+i%4]]+16*block)))
			}
		}
	}
}

// ---------------------------------------------------------------------
// Row kernels: the 16-word state as four xmm rows a, b, c, d.

type rowISA struct {
	add func(src, dst Op)
	// xorRor sets dst = (dst ^ src) >>> n.
	xorRor func(dst, src reg.VecPhysical, n int)
	// ternlog selects the AVX-512 form of the quarter-round (see halfG).
	ternlog bool
	pshufd  func(imm int, r reg.VecPhysical)
	// msg returns the two message vectors of step 0 (columns) or 1
	// (diagonals) of round r, emitting whatever loads they need.
	msg func(r, step int) (mx, my Op)
	// In a chain, endRound (if set) is emitted after round r, with next
	// pointing at the next block.
	endRound func(r int, next reg.Register)
}

// The rows. In the AVX-512 form row b alternates between two registers.
var (
	rowA, rowB, rowC, rowD = reg.X0, reg.X1, reg.X2, reg.X3
	rowBSpare              = reg.X22
	rowT1, rowT2           = reg.X20, reg.X21
	// A chainOut block's input chaining value (free in both ISAs).
	rowCV0, rowCV1 = reg.X9, reg.X10
)

// halfG is one half of the quarter-round on all four columns (or
// diagonals) at once: a += m + b; d = (d^a) >>> rd; c += d;
// b = (b^c) >>> rb. nextRd is the rotation d gets in the next half (0 for
// the last one).
//
// The SSE form XORs then rotates. The AVX-512 form shortens the
// dependency chain, which is what bounds a single chunk: rotation
// distributes over XOR, so d is rotated as soon as it has its last
// unrotated use (c += d) and b while a and c are computed; the new a (or
// c) is rotated as two shifts with disjoint bits and one VPTERNLOGD XORs
// the three terms: two operations after a instead of three.
//
// Its critical path on Zen 4 (measured there: VPADDD, VPSRLD/VPSLLD and
// VPTERNLOGD 1 cycle, VPRORD 2) is a += b, the shifts of a, the ternlog
// into d, c += d, the shifts of c, the ternlog into b: 6 cycles, 24 per
// round, 168 per block plus 1 for the feed-forward into b. Everything
// else (the message add, both pre-rotations, the row shuffles, which
// never touch b) has slack; d's pre-rotation is emitted after c's shifts
// so that it does not take a shift pipe ahead of them. What is left above
// 169 cycles is the off-path work competing for the same two pipes.
func halfG(isa rowISA, m Op, rd, rb, nextRd int) {
	isa.add(m, rowA)
	isa.add(rowB, rowA)
	if !isa.ternlog {
		isa.xorRor(rowD, rowA, rd)
		isa.add(rowD, rowC)
		isa.xorRor(rowB, rowC, rb)
		return
	}
	t1, t2 := rowT1, rowT2
	VPRORD(U8(rb), rowB, rowBSpare)
	VPSRLD(U8(rd), rowA, t1)
	VPSLLD(U8(32-rd), rowA, t2)
	VPTERNLOGD(U8(0x96), t2, t1, rowD)
	isa.add(rowD, rowC)
	VPSRLD(U8(rb), rowC, t1)
	VPSLLD(U8(32-rb), rowC, t2)
	if nextRd != 0 {
		VPRORD(U8(nextRd), rowD, rowD)
	}
	VPTERNLOGD(U8(0x96), t2, t1, rowBSpare)
	rowB, rowBSpare = rowBSpare, rowB
}

// rowRounds emits the seven rounds. Row b stays in place across the
// diagonal step; a, c and d rotate, which keeps the shuffles off the
// critical path through b.
func rowRounds(isa rowISA, next reg.Register) {
	b := rowB
	for r := 0; r < 7; r++ {
		Commentf("round %d", r+1)
		rowRound(isa, r, next)
	}
	if rowB != b {
		panic("row b must end in the register it started in")
	}
}

// rowRound emits round r of the row kernels (then isa.endRound).
func rowRound(isa rowISA, r int, next reg.Register) {
	{
		mx, my := isa.msg(r, 0)
		halfG(isa, mx, 16, 12, 8)
		// The row shuffles, d's ahead of c's: d is the one with the least
		// slack (2 cycles), and the scheduler favours older operations
		// (measured: about 2.5% faster per block than c then d).
		halfG(isa, my, 8, 7, 16)
		isa.pshufd(0x93, rowA)
		isa.pshufd(0x4E, rowD)
		isa.pshufd(0x39, rowC)
		mx, my = isa.msg(r, 1)
		halfG(isa, mx, 16, 12, 8)
		last := 16
		if r == 6 {
			last = 0
		}
		halfG(isa, my, 8, 7, last)
		isa.pshufd(0x39, rowA)
		isa.pshufd(0x4E, rowD)
		isa.pshufd(0x93, rowC)
		if isa.endRound != nil {
			isa.endRound(r, next)
		}
	}
}

// sseISA loads message words with MOVD/PINSRD from the block at ptr.
func sseISA(ptr reg.Register, _ bool) rowISA {
	mask16, mask8, tmp := reg.X7, reg.X8, reg.X6
	MOVOU(rot16Mem, mask16)
	MOVOU(rot8Mem, mask8)
	load := func(words [4]int, x reg.VecPhysical) {
		MOVSS(Mem{Base: ptr, Disp: 4 * words[0]}, x) // a 32-bit load (MOVD here would load 64 bits)
		for i := 1; i < 4; i++ {
			PINSRD(U8(i), Mem{Base: ptr, Disp: 4 * words[i]}, x)
		}
	}
	return rowISA{
		add: func(src, dst Op) { PADDL(src, dst) },
		xorRor: func(r, src reg.VecPhysical, n int) {
			PXOR(src, r)
			switch n {
			case 16:
				PSHUFB(mask16, r)
			case 8:
				PSHUFB(mask8, r)
			default:
				MOVO(r, tmp)
				PSRLL(U8(n), tmp)
				PSLLL(U8(32-n), r)
				POR(tmp, r)
			}
		},
		pshufd: func(imm int, r reg.VecPhysical) { PSHUFD(U8(imm), r, r) },
		msg: func(r, step int) (Op, Op) {
			s := schedule[r]
			if step == 0 {
				load([4]int{s[0], s[2], s[4], s[6]}, reg.X4)
				load([4]int{s[1], s[3], s[5], s[7]}, reg.X5)
			} else {
				load([4]int{s[14], s[8], s[10], s[12]}, reg.X4)
				load([4]int{s[15], s[9], s[11], s[13]}, reg.X5)
			}
			return reg.X4, reg.X5
		},
	}
}

// avx512RowISA, for a single block, keeps the block in two ymm registers
// and makes each message vector with one two-table VPERMI2D whose index
// comes from blake3Idx: no dependency between rounds, one shuffle per
// vector. A single block uses the XOR-then-rotate form of halfG, since
// pre-rotating row d lengthens its start more than the ternlog form saves
// (measured).
//
// A chain (chain is true, ptr advancing by 64 bytes per block) uses the
// ternlog form and takes its message words from a schedule on the stack:
// the 16 words of every round, in the order the rows consume them, so
// that each message vector is the memory operand of its VPADDD. The
// schedule of the first block is made by seven VPERMD; during each block,
// after round r, scalar loads and stores write round r's words of the
// next block (or of the same one after the last block, not to read past
// the input). That keeps the 28 shuffles per block off the vector pipes
// the rotations and row shuffles need: the chain runs at about 200 cycles
// per block instead of 217 (the dependency chain alone is 169, see
// halfG).
func avx512RowISA(ptr reg.Register, chain bool) rowISA {
	add := func(src, dst Op) { VPADDD(src, dst, dst) }
	pshufd := func(imm int, r reg.VecPhysical) { VPSHUFD(U8(imm), r, r) }
	if chain {
		sched := alignedLocal(7*64, reg.R13)
		VMOVDQU32(Mem{Base: ptr}, reg.Z16)
		for r := 0; r < 7; r++ {
			VMOVDQU32(idx16Mem.Offset(64*r), reg.Z23)
			VPERMD(reg.Z16, reg.Z23, reg.Z23)
			VMOVDQU32(reg.Z23, sched.Offset(64*r))
		}
		tmp := []reg.GPPhysical{reg.R12}
		return rowISA{
			ternlog: true,
			add:     add,
			pshufd:  pshufd,
			msg: func(r, step int) (Op, Op) {
				return sched.Offset(64*r + 32*step), sched.Offset(64*r + 32*step + 16)
			},
			endRound: func(r int, next reg.Register) {
				for k := 0; k < 16; k++ {
					t := tmp[k%len(tmp)].As32()
					MOVL(Mem{Base: next, Disp: 4 * schedule[r][rowLayout[k]]}, t)
					MOVL(t, sched.Offset(64*r+4*k))
				}
			},
		}
	}
	VMOVDQU32(Mem{Base: ptr}, reg.Y16)
	VMOVDQU32(Mem{Base: ptr, Disp: 32}, reg.Y17)
	return rowISA{
		add: add,
		xorRor: func(r, src reg.VecPhysical, n int) {
			VPXORD(src, r, r)
			VPRORD(U8(n), r, r)
		},
		pshufd: pshufd,
		msg: func(r, step int) (Op, Op) {
			out := [2]reg.VecPhysical{reg.Y23, reg.Y24}
			if step == 1 {
				out = [2]reg.VecPhysical{reg.Y25, reg.Y26}
			}
			for i, y := range out {
				VMOVDQU32(idxMem.Offset(32*(4*r+2*step+i)), y)
				VPERMI2D(reg.Y17, reg.Y16, y)
			}
			return out[0].AsX(), out[1].AsX()
		},
	}
}

// alignedLocal allocates size bytes of stack, 64-byte aligned, and sets
// base to their address. Go aligns the stack pointer to 8 bytes only, and
// a vector store or load that crosses a cache line costs extra (and a load
// may not be forwarded from it): that made the kernels' speed depend on
// how deep in the stack they were called.
func alignedLocal(size int, base reg.GPPhysical) Mem {
	m := AllocLocal(size + 64)
	LEAQ(m.Offset(63), base)
	ANDQ(I32(-64), base)
	return Mem{Base: base}
}

// rowXor sets dst ^= src, in the VEX or the SSE encoding.
func rowXor(vex bool, src, dst reg.VecPhysical) {
	if vex {
		VPXOR(src, dst, dst)
	} else {
		PXOR(src, dst)
	}
}

// rowMovu moves 16 bytes, in the VEX or the SSE encoding.
func rowMovu(vex bool, src, dst Op) {
	if vex {
		VMOVDQU(src, dst)
	} else {
		MOVOU(src, dst)
	}
}

// rowDInit builds row d = (counter, blockLen, flags) from RAX, EBX and
// ECX (zero-extended) with two independent GPR-to-vector moves.
func rowDInit(vex bool) {
	SHLQ(U8(32), reg.RCX)
	ORQ(reg.RBX, reg.RCX)
	if vex {
		VMOVQ(reg.RAX, rowD)
		VMOVQ(reg.RCX, reg.X4)
		VPUNPCKLQDQ(reg.X4, rowD, rowD)
	} else {
		MOVQ(reg.RAX, rowD)
		MOVQ(reg.RCX, reg.X4)
		PUNPCKLQDQ(reg.X4, rowD)
	}
}

// rowKernels emits compress<suffix>, chain<suffix> and chainOut<suffix>.
func rowKernels(suffix string, newISA func(ptr reg.Register, chain bool) rowISA, vex bool) {
	xor := func(src, dst reg.VecPhysical) { rowXor(vex, src, dst) }
	movu := func(src, dst Op) { rowMovu(vex, src, dst) }
	TEXT("compress"+suffix, NOSPLIT, "func(out *[64]byte, cv *[8]uint32, block *[64]byte, counter uint64, blockLen uint32, flags uint32)")
	Pragma("noescape")
	Doc("compress" + suffix + " writes the 64-byte extended output of one block.")
	{
		out, cv, block := reg.RDI, reg.RSI, reg.RDX
		Load(Param("out"), out)
		Load(Param("cv"), cv)
		Load(Param("block"), block)
		Load(Param("counter"), reg.RAX)
		Load(Param("blockLen"), reg.EBX)
		Load(Param("flags"), reg.ECX)
		isa := newISA(block, false)
		movu(Mem{Base: cv}, rowA)
		movu(Mem{Base: cv, Disp: 16}, rowB)
		movu(ivMem, rowC)
		rowDInit(vex)
		if isa.ternlog {
			VPRORD(U8(16), rowD, rowD)
		}
		rowRounds(isa, nil)
		xor(rowC, rowA)
		xor(rowD, rowB)
		movu(rowA, Mem{Base: out})
		movu(rowB, Mem{Base: out, Disp: 16})
		movu(Mem{Base: cv}, reg.X4)
		movu(Mem{Base: cv, Disp: 16}, reg.X5)
		xor(reg.X4, rowC)
		xor(reg.X5, rowD)
		movu(rowC, Mem{Base: out, Disp: 32})
		movu(rowD, Mem{Base: out, Disp: 48})
		if vex {
			VZEROUPPER()
		}
		RET()
	}

	rowChain("chain"+suffix, newISA, vex, false)
	rowChain("chainOut"+suffix, newISA, vex, true)
}

// rowChain emits a chain kernel: blocks compressed in sequence from cv,
// the first with flagsStart added to its flags and the last with flagsEnd.
// chain<suffix> takes n > 0 full blocks at p and writes the chaining value
// back to cv; chainOut<suffix> (full) takes n >= 0 full blocks at p and
// then the block at last, of lastLen bytes, and writes that last block's
// 64-byte extended output to out.
func rowChain(name string, newISA func(ptr reg.Register, chain bool) rowISA, vex, full bool) {
	xor := func(src, dst reg.VecPhysical) { rowXor(vex, src, dst) }
	movu := func(src, dst Op) { rowMovu(vex, src, dst) }
	if full {
		TEXT(name, NOSPLIT, "func(out *[64]byte, cv *[8]uint32, p *byte, n int, last *[64]byte, counter uint64, lastLen uint32, flags uint32, flagsStart uint32, flagsEnd uint32)")
		Pragma("noescape")
		Doc(name+" compresses n >= 0 full blocks at p and then the block at last,",
			"of lastLen bytes, in sequence from cv, adding flagsStart to the first",
			"block's flags and flagsEnd to the last's, and writes the last block's",
			"64-byte extended output to out.")
	} else {
		TEXT(name, NOSPLIT, "func(cv *[8]uint32, p *byte, n int, counter uint64, flags uint32, flagsStart uint32, flagsEnd uint32)")
		Pragma("noescape")
		Doc(name+" compresses n > 0 full blocks at p in sequence into cv,",
			"adding flagsStart to the first block's flags and flagsEnd to the last's.")
	}
	// n counts the blocks left, this one included; next points at the
	// next block (this one for the last: it is read, never used).
	cv, p, n, next, last, lastLen := reg.RSI, reg.RDX, reg.R8, reg.RDI, reg.R14, reg.R15L
	Load(Param("cv"), cv)
	Load(Param("p"), p)
	Load(Param("n"), n)
	Load(Param("counter"), reg.RAX)
	Load(Param("flags"), reg.R9L)
	Load(Param("flagsStart"), reg.R10L)
	Load(Param("flagsEnd"), reg.R11L)
	if full {
		Load(Param("last"), last)
		Load(Param("lastLen"), lastLen)
		TESTQ(n, n)
		CMOVQEQ(last, p)
		INCQ(n)
	}
	movu(Mem{Base: cv}, rowA)
	movu(Mem{Base: cv, Disp: 16}, rowB)
	MOVL(U32(64), reg.EBX)
	isa := newISA(p, true)
	// Row d is the same for every block but the first and the last: the
	// AVX-512 form builds it (pre-rotated) once, in dMid, and the loop
	// builds it only for those two (measured: 2% on a 16-block chain; its
	// GPR-to-vector moves and shuffle sit where the next block starts).
	dMid := reg.X11
	if isa.ternlog {
		MOVL(reg.R9L, reg.ECX)
		rowDInit(vex)
		VPRORD(U8(16), rowD, dMid)
	}
	Label("loop")
	MOVL(reg.R9L, reg.ECX)
	ORL(reg.R10L, reg.ECX)
	XORL(reg.R10L, reg.R10L)
	LEAQ(Mem{Base: p, Disp: 64}, next)
	if full {
		CMPQ(n, U8(2))
		CMOVQEQ(last, next)
	}
	CMPQ(n, U8(1))
	CMOVQEQ(p, next)
	JNE(LabelRef("notlast"))
	ORL(reg.R11L, reg.ECX)
	if full {
		MOVL(lastLen, reg.EBX)
	}
	Label("notlast")
	if full {
		// The block's input chaining value, for the extended output.
		if vex {
			VMOVDQA64(rowA, rowCV0)
			VMOVDQA64(rowB, rowCV1)
		} else {
			MOVO(rowA, rowCV0)
			MOVO(rowB, rowCV1)
		}
	}
	movu(ivMem, rowC)
	if isa.ternlog {
		CMPL(reg.ECX, reg.R9L)
		JNE(LabelRef("dbuild"))
		if full {
			CMPL(reg.EBX, U8(64))
			JNE(LabelRef("dbuild"))
		}
		VMOVDQA(dMid, rowD)
		JMP(LabelRef("dready"))
		Label("dbuild")
	}
	rowDInit(vex)
	if isa.ternlog {
		VPRORD(U8(16), rowD, rowD)
		Label("dready")
	}
	rowRounds(isa, next)
	xor(rowC, rowA)
	xor(rowD, rowB)
	MOVQ(next, p)
	DECQ(n)
	JNZ(LabelRef("loop"))
	if full {
		out := reg.RDI
		Load(Param("out"), out)
		movu(rowA, Mem{Base: out})
		movu(rowB, Mem{Base: out, Disp: 16})
		xor(rowCV0, rowC)
		xor(rowCV1, rowD)
		movu(rowC, Mem{Base: out, Disp: 32})
		movu(rowD, Mem{Base: out, Disp: 48})
	} else {
		movu(rowA, Mem{Base: cv})
		movu(rowB, Mem{Base: cv, Disp: 16})
	}
	if vex {
		VZEROUPPER()
	}
	RET()
}

// ---------------------------------------------------------------------
// Word-sliced kernels: state word i of every lane in vector v[i].

type laneISA struct {
	add func(src, dst Op)
	xor func(src, dst Op)
	// rorGroup rotates each of rs right by n; spill names a state register
	// the group may borrow (it is restored).
	rorGroup func(n int, rs []reg.VecPhysical, spill reg.VecPhysical)
}

// gQuad runs four independent quarter-rounds, interleaved step by step.
// idx[i] are the state words (a, b, c, d) of G number i; mx[i], my[i] its
// message words.
func gQuad(isa laneISA, v []reg.VecPhysical, idx [4][4]int, mx, my [4]Op) {
	half := func(m [4]Op, rd, rb int) {
		for i := range idx {
			isa.add(m[i], v[idx[i][0]])
			isa.add(v[idx[i][1]], v[idx[i][0]])
		}
		for i := range idx {
			isa.xor(v[idx[i][0]], v[idx[i][3]])
		}
		ds := make([]reg.VecPhysical, 4)
		bs := make([]reg.VecPhysical, 4)
		for i := range idx {
			ds[i], bs[i] = v[idx[i][3]], v[idx[i][1]]
		}
		isa.rorGroup(rd, ds, v[idx[0][2]])
		for i := range idx {
			isa.add(v[idx[i][3]], v[idx[i][2]])
		}
		for i := range idx {
			isa.xor(v[idx[i][2]], v[idx[i][1]])
		}
		isa.rorGroup(rb, bs, v[idx[0][2]])
	}
	half(mx, 16, 12)
	half(my, 8, 7)
}

var (
	columns   = [4][4]int{{0, 4, 8, 12}, {1, 5, 9, 13}, {2, 6, 10, 14}, {3, 7, 11, 15}}
	diagonals = [4][4]int{{0, 5, 10, 15}, {1, 6, 11, 12}, {2, 7, 8, 13}, {3, 4, 9, 14}}
)

// round emits round r; m(j) is message word j as an operand.
func round(isa laneISA, v []reg.VecPhysical, r int, m func(int) Op) {
	s := schedule[r]
	var mx, my [4]Op
	for i := 0; i < 4; i++ {
		mx[i], my[i] = m(s[2*i]), m(s[2*i+1])
	}
	gQuad(isa, v, columns, mx, my)
	for i := 0; i < 4; i++ {
		mx[i], my[i] = m(s[8+2*i]), m(s[8+2*i+1])
	}
	gQuad(isa, v, diagonals, mx, my)
}

// transposeStages12 runs the two unpack stages of a dword transpose on
// groups of four rows: afterwards 128-bit lane k of out[4g+w] holds word
// 4k+w of rows 4g..4g+3. tmp must be as long as rows.
func transposeStages12(rows, tmp, out []reg.VecPhysical) {
	for p := 0; p < len(rows)/2; p++ {
		VPUNPCKLDQ(rows[2*p+1], rows[2*p], tmp[2*p])
		VPUNPCKHDQ(rows[2*p+1], rows[2*p], tmp[2*p+1])
	}
	for g := 0; g < len(rows)/4; g++ {
		t := tmp[4*g:]
		VPUNPCKLQDQ(t[2], t[0], out[4*g+0])
		VPUNPCKHQDQ(t[2], t[0], out[4*g+1])
		VPUNPCKLQDQ(t[3], t[1], out[4*g+2])
		VPUNPCKHQDQ(t[3], t[1], out[4*g+3])
	}
}

// transpose8 transposes 8 rows of 8 dwords (ymm): out[j][i] = rows[i][j].
// rows and tmp are clobbered; evex selects VSHUFI32X4 over VPERM2I128 so
// that registers 16-31 can be used.
func transpose8(rows, tmp, out []reg.VecPhysical, evex bool) {
	transposeStages12(rows, tmp, rows)
	for w := 0; w < 4; w++ {
		if evex {
			VSHUFI32X4(U8(0), rows[4+w], rows[w], out[w])
			VSHUFI32X4(U8(3), rows[4+w], rows[w], out[4+w])
		} else {
			VPERM2I128(U8(0x20), rows[4+w], rows[w], out[w])
			VPERM2I128(U8(0x31), rows[4+w], rows[w], out[4+w])
		}
	}
}

// transpose16 transposes 16 rows of 16 dwords (zmm), ping-ponging between
// rows and tmp; the result is in rows.
func transpose16(rows, tmp []reg.VecPhysical) {
	transposeStages12(rows, tmp, rows)
	for w := 0; w < 4; w++ {
		u0, u1, u2, u3 := rows[w], rows[4+w], rows[8+w], rows[12+w]
		x := tmp[4*w:]
		VSHUFI32X4(U8(0x44), u1, u0, x[0])
		VSHUFI32X4(U8(0xEE), u1, u0, x[1])
		VSHUFI32X4(U8(0x44), u3, u2, x[2])
		VSHUFI32X4(U8(0xEE), u3, u2, x[3])
	}
	for w := 0; w < 4; w++ {
		x := tmp[4*w:]
		VSHUFI32X4(U8(0x88), x[2], x[0], rows[w])
		VSHUFI32X4(U8(0xDD), x[2], x[0], rows[4+w])
		VSHUFI32X4(U8(0x88), x[3], x[1], rows[8+w])
		VSHUFI32X4(U8(0xDD), x[3], x[1], rows[12+w])
	}
}

type manyKind int

const (
	kindAVX2 manyKind = iota
	kindAVX512VL8
	kindAVX512x16
)

// manyKernel emits a kernel hashing `lanes` inputs: inputs[i] points at
// input i, whose blocks are compressed in sequence from the key. lp holds
// four words per lane, in four runs of `lanes` words: the counter's low and
// high words, the index of the lane's last block, and that block's length.
// A lane's last block gets flagsEnd and its length; lanes with fewer blocks
// than `blocks` (a partial last chunk, zero-padded to whole blocks) keep
// their chaining value once done. out receives the chaining values.
//
// With tail set (AVX-512 kinds only), the kernel also hashes one more
// chunk, the tail (tlp: its counter's two words, its number of blocks, at
// most blocks, and its last block's length; zero-padded to whole blocks),
// as a row-form chain interleaved round by round with the lanes, and
// writes its chaining value to tout. The lanes' pass is bound by
// throughput and the chain by latency, so the chain costs only its
// operations: an input of 8 or 16 chunks and a partial one is hashed in
// one pass, where the partial chunk would otherwise run alone as a chain.
// Message words 11-15 then live on the stack, freeing the registers the
// chain uses (X27-X31).
func manyKernel(name string, kind manyKind, tail bool) {
	lanes := 8
	regs := yregs
	vsize := 32
	if kind == kindAVX512x16 {
		lanes, regs, vsize = 16, zregs, 64
	}
	sig := fmt.Sprintf("func(inputs *[%d]*byte, blocks int, key *[8]uint32, lp *[%d]uint32, flags uint32, flagsStart uint32, flagsEnd uint32, out *[%d]byte", lanes, 4*lanes, 32*lanes)
	if tail {
		sig += ", tail *byte, tlp *[4]uint32, tout *[8]uint32"
	}
	TEXT(name, 0, sig+")")
	Pragma("noescape")
	if tail {
		Doc(fmt.Sprintf("%s hashes %d inputs of up to blocks blocks each and a tail chunk", name, lanes),
			"(see manyKernel in the generator), writing the chaining values to out",
			"and tout.")
	} else {
		Doc(fmt.Sprintf("%s hashes %d inputs of up to blocks blocks each (see manyKernel", name, lanes),
			"in the generator), writing the chaining values to out.")
	}

	vecBytes := 8 * vsize
	if kind == kindAVX2 {
		vecBytes += 18 * vsize
	}
	if tail {
		vecBytes += 5*vsize + 7*64 + 32
	}
	vecMem := alignedLocal(vecBytes, reg.R15)
	// The tail chain's state: spilled message words 11-15, its message
	// schedule (as in the chain kernels), its chaining value, and its
	// counter, number of blocks, last length and pointer.
	spill := vecMem.Offset(8 * vsize)
	tsched := vecMem.Offset(13 * vsize)
	tcv := vecMem.Offset(13*vsize + 7*64)
	var tctrMem, tnMem, tlenMem, tptrMem Mem
	if tail {
		tctrMem, tnMem, tlenMem, tptrMem = AllocLocal(8), AllocLocal(8), AllocLocal(8), AllocLocal(8)
	}
	cvMem := vecMem
	var msgMem, flagMem, spillMem, gtMem, bMem, endMem Mem
	if kind == kindAVX2 {
		msgMem = vecMem.Offset(8 * vsize)
		spillMem = vecMem.Offset(24 * vsize)
		gtMem = vecMem.Offset(25 * vsize)
		flagMem = AllocLocal(4)
		bMem = AllocLocal(4)
	}
	endMem = AllocLocal(8)
	inputs, nblocks, key, ctr, out := reg.RSI, reg.R8, reg.R9, reg.R10, reg.RDI
	off, b, f := reg.RDX, reg.RBX, reg.ECX
	Load(Param("inputs"), inputs)
	Load(Param("blocks"), nblocks)
	Load(Param("key"), key)
	Load(Param("lp"), ctr)
	Load(Param("flags"), reg.R11L)
	Load(Param("flagsStart"), reg.R12L)
	Load(Param("flagsEnd"), reg.R13L)
	Load(Param("out"), out)
	MOVL(reg.R13L, endMem)
	if tail {
		Comment("The tail chain: parameters, first block's schedule, chaining value.")
		Load(Param("tail"), reg.RAX)
		MOVQ(reg.RAX, tptrMem)
		Load(Param("tlp"), reg.R14)
		MOVQ(Mem{Base: reg.R14}, reg.RAX)
		MOVQ(reg.RAX, tctrMem)
		MOVL(Mem{Base: reg.R14, Disp: 8}, reg.EAX)
		MOVQ(reg.RAX, tnMem)
		MOVL(Mem{Base: reg.R14, Disp: 12}, reg.EAX)
		MOVQ(reg.RAX, tlenMem)
		MOVQ(tptrMem, reg.RAX)
		VMOVDQU32(Mem{Base: reg.RAX}, reg.Z16)
		for r := 0; r < 7; r++ {
			VMOVDQU32(idx16Mem.Offset(64*r), reg.Z23)
			VPERMD(reg.Z16, reg.Z23, reg.Z23)
			VMOVDQU32(reg.Z23, tsched.Offset(64*r))
		}
		VMOVDQU(Mem{Base: key}, reg.X0)
		VMOVDQU(reg.X0, tcv)
		VMOVDQU(Mem{Base: key, Disp: 16}, reg.X0)
		VMOVDQU(reg.X0, tcv.Offset(16))
	}

	mov := func(src, dst Op) {
		if kind == kindAVX2 {
			VMOVDQU(src, dst)
		} else {
			VMOVDQU32(src, dst)
		}
	}
	v := regs[:16]
	var isa laneISA
	if kind == kindAVX2 {
		isa = laneISA{
			add: func(src, dst Op) { VPADDD(src, dst, dst) },
			xor: func(src, dst Op) { VPXOR(src, dst, dst) },
			rorGroup: func(n int, rs []reg.VecPhysical, spill reg.VecPhysical) {
				switch n {
				case 16:
					for _, r := range rs {
						VPSHUFB(rot16Mem, r, r)
					}
				case 8:
					for _, r := range rs {
						VPSHUFB(rot8Mem, r, r)
					}
				default:
					VMOVDQU(spill, spillMem)
					for _, r := range rs {
						VPSRLD(U8(n), r, spill)
						VPSLLD(U8(32-n), r, r)
						VPOR(spill, r, r)
					}
					VMOVDQU(spillMem, spill)
				}
			},
		}
	} else {
		isa = laneISA{
			add: func(src, dst Op) { VPADDD(src, dst, dst) },
			xor: func(src, dst Op) { VPXORD(src, dst, dst) },
			rorGroup: func(n int, rs []reg.VecPhysical, _ reg.VecPhysical) {
				for _, r := range rs {
					VPRORD(U8(n), r, r)
				}
			},
		}
	}

	Comment("The chaining values start as the key.")
	for w := 0; w < 8; w++ {
		VPBROADCASTD(Mem{Base: key, Disp: 4 * w}, v[w])
		mov(v[w], cvMem.Offset(w*vsize))
	}
	XORQ(off, off)
	XORQ(b, b)

	Label("loop")
	Comment("Flags for this block, but for the lanes' last-block flags.")
	MOVL(reg.R11L, f)
	TESTQ(b, b)
	JNZ(LabelRef("notfirst"))
	ORL(reg.R12L, f)
	Label("notfirst")

	// prefetch asks for lane RAX's block two ahead: the lanes are up to 16
	// streams a chunk apart, more than the hardware prefetchers follow.
	// (A prefetch past the end of an input does not fault.)
	prefetch := func() {
		PREFETCHT0(Mem{Base: reg.RAX, Index: off, Scale: 1, Disp: 128})
	}
	Comment("Load the block of every lane and transpose it into message words.")
	var msg func(j int) Op
	switch kind {
	case kindAVX512x16:
		rows := zregs[16:32]
		for i := 0; i < 16; i++ {
			MOVQ(Mem{Base: inputs, Disp: 8 * i}, reg.RAX)
			VMOVDQU32(Mem{Base: reg.RAX, Index: off, Scale: 1}, rows[i])
			prefetch()
		}
		transpose16(rows, zregs[0:16])
		msg = func(j int) Op { return rows[j] }
		if tail {
			for j := 11; j < 16; j++ {
				VMOVDQU32(rows[j], spill.Offset((j-11)*vsize))
			}
			msg = func(j int) Op {
				if j >= 11 {
					return spill.Offset((j - 11) * vsize)
				}
				return rows[j]
			}
		}
	default:
		for h := 0; h < 2; h++ {
			rows := yregs[0:8]
			for i := 0; i < 8; i++ {
				MOVQ(Mem{Base: inputs, Disp: 8 * i}, reg.RAX)
				VMOVDQU(Mem{Base: reg.RAX, Index: off, Scale: 1, Disp: 32 * h}, rows[i])
				if h == 0 {
					prefetch()
				}
			}
			if kind == kindAVX2 {
				transpose8(rows, yregs[8:16], yregs[8:16], false)
				for j := 0; j < 8; j++ {
					VMOVDQU(yregs[8+j], msgMem.Offset((8*h+j)*vsize))
				}
			} else {
				transpose8(rows, yregs[8:16], yregs[16+8*h:24+8*h], true)
			}
		}
		if kind == kindAVX2 {
			msg = func(j int) Op { return msgMem.Offset(j * vsize) }
		} else {
			msg = func(j int) Op { return yregs[16+j] }
		}
		if tail {
			for j := 11; j < 16; j++ {
				VMOVDQU32(yregs[16+j], spill.Offset((j-11)*vsize))
			}
			msg = func(j int) Op {
				if j >= 11 {
					return spill.Offset((j - 11) * vsize)
				}
				return yregs[16+j]
			}
		}
	}

	Comment("Per-lane block lengths and flags; which lanes end here or are done.")
	lastIdx := Mem{Base: ctr, Disp: 8 * lanes}
	lastLen := Mem{Base: ctr, Disp: 12 * lanes}
	if kind == kindAVX2 {
		MOVL(reg.EBX, bMem)
		VPBROADCASTD(bMem, v[14])
		VPCMPEQD(lastIdx, v[14], v[13])
		VPCMPGTD(lastIdx, v[14], v[12])
		VMOVDQU(v[12], gtMem)
		VPBROADCASTD(blockLenMem, v[14])
		VPBLENDVB(v[13], lastLen, v[14], v[14])
		MOVL(f, flagMem)
		VPBROADCASTD(flagMem, v[15])
		VPBROADCASTD(endMem, v[12])
		VPAND(v[13], v[12], v[12])
		VPOR(v[12], v[15], v[15])
	} else {
		VPBROADCASTD(reg.EBX, v[14])
		VPCMPEQD(lastIdx, v[14], reg.K2)
		VPCMPUD(U8(2), lastIdx, v[14], reg.K1)
		VPBROADCASTD(blockLenMem, v[14])
		VMOVDQU32(lastLen, reg.K2, v[14])
		VPBROADCASTD(f, v[15])
		VPBROADCASTD(reg.R13L, v[12])
		VPORD(v[12], v[15], reg.K2, v[15])
	}
	Comment("Initialise the state.")
	for w := 0; w < 8; w++ {
		mov(cvMem.Offset(w*vsize), v[w])
	}
	for i := 0; i < 4; i++ {
		VPBROADCASTD(ivMem.Offset(4*i), v[8+i])
	}
	mov(Mem{Base: ctr}, v[12])
	mov(Mem{Base: ctr, Disp: 4 * lanes}, v[13])

	var tisa rowISA
	if tail {
		// The chain's rows; its latency has slack, so it takes the
		// XOR-then-rotate form, the fewest operations.
		rowA, rowB, rowC, rowD = reg.X28, reg.X29, reg.X30, reg.X31
		defer func() { rowA, rowB, rowC, rowD = reg.X0, reg.X1, reg.X2, reg.X3 }()
		tisa = rowISA{
			add: func(src, dst Op) { VPADDD(src, dst, dst) },
			xorRor: func(r, src reg.VecPhysical, n int) {
				VPXORD(src, r, r)
				VPRORD(U8(n), r, r)
			},
			pshufd: func(imm int, r reg.VecPhysical) { VPSHUFD(U8(imm), r, r) },
			msg: func(r, step int) (Op, Op) {
				return tsched.Offset(64*r + 32*step), tsched.Offset(64*r + 32*step + 16)
			},
			endRound: func(r int, next reg.Register) {
				for k := 0; k < 16; k++ {
					MOVL(Mem{Base: next, Disp: 4 * schedule[r][rowLayout[k]]}, reg.EAX)
					MOVL(reg.EAX, tsched.Offset(64*r+4*k))
				}
			},
		}
		Comment("The tail chain's block, if it has one left: rows, and R14 pointing",
			"at its next block (this one for its last).")
		CMPQ(b, tnMem)
		JAE(LabelRef("tailinit"))
		VMOVDQU32(tcv, rowA)
		VMOVDQU32(tcv.Offset(16), rowB)
		VMOVDQU32(ivMem, rowC)
		MOVL(f, reg.R14L)
		MOVQ(tnMem, reg.RAX)
		DECQ(reg.RAX)
		CMPQ(b, reg.RAX)
		MOVL(U32(64), reg.EAX)
		CMOVLEQ(tlenMem, reg.EAX)
		JNE(LabelRef("tailnotlast"))
		ORL(reg.R13L, reg.R14L)
		Label("tailnotlast")
		SHLQ(U8(32), reg.R14)
		ORQ(reg.RAX, reg.R14)
		VMOVQ(tctrMem, rowD)
		VMOVQ(reg.R14, reg.X27)
		VPUNPCKLQDQ(reg.X27, rowD, rowD)
		LEAQ(Mem{Base: b, Disp: 1}, reg.RAX)
		CMPQ(reg.RAX, tnMem)
		CMOVQCC(b, reg.RAX)
		SHLQ(U8(6), reg.RAX)
		MOVQ(tptrMem, reg.R14)
		ADDQ(reg.RAX, reg.R14)
		Label("tailinit")
	}
	for r := 0; r < 7; r++ {
		Commentf("round %d", r+1)
		round(isa, v, r, msg)
		if tail {
			Commentf("tail chain, round %d", r+1)
			CMPQ(b, tnMem)
			JAE(LabelRef(fmt.Sprintf("tailround%d", r)))
			rowRound(tisa, r, reg.R14)
			Label(fmt.Sprintf("tailround%d", r))
		}
	}
	Comment("Feed forward; lanes past their last block keep their value.")
	for w := 0; w < 8; w++ {
		isa.xor(v[8+w], v[w])
	}
	if kind == kindAVX2 {
		VMOVDQU(gtMem, v[8])
		for w := 0; w < 8; w++ {
			VPBLENDVB(v[8], cvMem.Offset(w*vsize), v[w], v[w])
			VMOVDQU(v[w], cvMem.Offset(w*vsize))
		}
	} else {
		for w := 0; w < 8; w++ {
			VMOVDQU32(v[w], reg.K1, cvMem.Offset(w*vsize))
		}
	}
	if tail {
		CMPQ(b, tnMem)
		JAE(LabelRef("tailff"))
		VPXORD(rowC, rowA, rowA)
		VPXORD(rowD, rowB, rowB)
		VMOVDQU32(rowA, tcv)
		VMOVDQU32(rowB, tcv.Offset(16))
		Label("tailff")
	}
	ADDQ(U8(64), off)
	INCQ(b)
	CMPQ(b, nblocks)
	JB(LabelRef("loop"))
	if tail {
		Load(Param("tout"), reg.RAX)
		VMOVDQU(tcv, reg.X0)
		VMOVDQU(reg.X0, Mem{Base: reg.RAX})
		VMOVDQU(tcv.Offset(16), reg.X0)
		VMOVDQU(reg.X0, Mem{Base: reg.RAX, Disp: 16})
	}

	Comment("Transpose the chaining values into one row per lane.")
	if kind == kindAVX512x16 {
		rows := zregs[16:32]
		for w := 0; w < 8; w++ {
			VMOVDQU32(cvMem.Offset(w*vsize), rows[w])
		}
		transpose16(rows, zregs[0:16])
		for i := 0; i < 16; i++ {
			VMOVDQU32(yregs[16+i], Mem{Base: out, Disp: 32 * i})
		}
	} else {
		for w := 0; w < 8; w++ {
			mov(cvMem.Offset(w*vsize), yregs[w])
		}
		transpose8(yregs[0:8], yregs[8:16], yregs[8:16], false)
		for i := 0; i < 8; i++ {
			VMOVDQU(yregs[8+i], Mem{Base: out, Disp: 32 * i})
		}
	}
	VZEROUPPER()
	RET()
}

// chain2Kernel emits chain2AVX512 (or, without avx512, chain2AVX2), which
// runs two independent chains side by side: the rows are ymm registers
// whose low and high 128-bit halves hold the two states, so the pair costs
// about the latency of one chain. It serves groups of two inputs (two
// chunks, a chunk and a partial one, two parent nodes), where the 8-way
// kernel would waste six lanes. Chain 1 may be shorter than chain 0: its
// last block may come earlier and be partial (it is zero-padded in
// memory); its chaining value is stored when it ends, and its lane runs
// on, unused, while chain 0 finishes.
//
// The AVX2 form takes the XOR-then-rotate quarter-round (avx2XorRor) and
// writes the first blocks' schedule with scalar moves too (AVX2 has no
// two-table permute). Measured on a Zen 5 with the AVX-512 paths capped:
// 101-104 ns per step of 16 blocks, two chains, as much as chainSSE41
// takes per block of one (the latency bound there is 94 ns: 28 halves of
// 7 dependent instructions at 2 cycles, at 4.17 GHz).
//
// With root set it emits chain2RootAVX512 (chain2RootAVX2), which then
// also compresses the parent block of the two chaining values, chain 0's
// first (swap 0) or chain 1's (swap 1), from cvs[0:8]'s initial value
// with flags rootFlags, and writes its 64-byte output to out: the root of
// a small tree in the same call.
func chain2Kernel(root, avx512 bool) {
	suffix := "AVX2"
	if avx512 {
		suffix = "AVX512"
	}
	name, sig := "chain2"+suffix, "func(cvs *[16]uint32, p0 *byte, last0 *byte, p1 *byte, last1 *byte, lp *[14]uint32)"
	if root {
		name, sig = "chain2Root"+suffix, "func(cvs *[16]uint32, p0 *byte, last0 *byte, p1 *byte, last1 *byte, lp *[14]uint32, out *[64]byte, rootFlags uint32, swap uint32)"
	}
	TEXT(name, 0, sig)
	Pragma("noescape")
	doc := []string{name + " compresses lp[4] blocks from cvs[0:8] into cvs[0:8] (lp[4]-1 at",
		"p0, then the one at last0) and lp[5] (1 <= lp[5] <= lp[4]) from cvs[8:16] into",
		"cvs[8:16] (lp[5]-1 at p1, then the one at last1). The counters are lp[0:2] and",
		"lp[2:4]. Chain i's blocks have flags lp[8+i], its first block also lp[10+i],",
		"its last block also lp[12+i] and lp[6+i] bytes (zero-padded)."}
	if root {
		doc = append(doc, "It then compresses the parent block of the two chaining values (chain",
			"0's first, or chain 1's if swap is 1) from cvs[0:8]'s initial value with",
			"flags rootFlags, and writes the 64-byte output to out.")
	}
	Doc(doc...)
	cvs, p0, p1, lp := reg.RSI, reg.RDX, reg.RDI, reg.R12
	n0, n1 := reg.R8, reg.R13
	last0, err := Param("last0").Resolve()
	if err != nil {
		panic(err)
	}
	last1, err := Param("last1").Resolve()
	if err != nil {
		panic(err)
	}
	Load(Param("cvs"), cvs)
	Load(Param("p0"), p0)
	Load(Param("p1"), p1)
	Load(Param("lp"), lp)
	first := reg.R10L // all ones for the first blocks, then 0
	MOVL(U32(0xffffffff), first)
	MOVL(Mem{Base: lp, Disp: 16}, n0.As32())
	MOVL(Mem{Base: lp, Disp: 20}, n1.As32())
	CMPQ(n0, U8(1))
	CMOVQEQ(last0.Addr, p0)
	CMPQ(n1, U8(1))
	CMOVQEQ(last1.Addr, p1)
	sched := alignedLocal(7*128, reg.R11)

	rowA, rowB, rowC, rowD = reg.Y0, reg.Y1, reg.Y2, reg.Y3
	rowBSpare, rowT1, rowT2 = reg.Y22, reg.Y20, reg.Y21
	defer func() {
		rowA, rowB, rowC, rowD = reg.X0, reg.X1, reg.X2, reg.X3
		rowBSpare, rowT1, rowT2 = reg.X22, reg.X20, reg.X21
	}()

	for i, r := range []reg.VecPhysical{rowA, rowB} {
		VMOVDQU(Mem{Base: cvs, Disp: 16 * i}, r.AsX())
		VINSERTI128(U8(1), Mem{Base: cvs, Disp: 32 + 16*i}, r, r)
	}
	// The root's chaining value (the key), and chain 1's result.
	rootKey0, rootKey1, cv1a, cv1b := reg.X14, reg.X15, reg.X12, reg.X13
	if root {
		VMOVDQU(Mem{Base: cvs}, rootKey0)
		VMOVDQU(Mem{Base: cvs, Disp: 16}, rootKey1)
	}
	VMOVDQU(Mem{Base: lp}, reg.X5) // the two counters
	tmp := []reg.GPPhysical{reg.RAX, reg.RBX}
	// schedWords writes round r's words of the blocks at src0 and src1
	// (chain 0's in the low half of each vector) with scalar moves.
	schedWords := func(r int, src0, src1 reg.GPPhysical) {
		for k := 0; k < 32; k++ {
			v, block := k/8, (k/4)%2
			src := []reg.GPPhysical{src0, src1}[block]
			t := tmp[k%2].As32()
			MOVL(Mem{Base: src, Disp: 4 * schedule[r][rowLayout[4*v+k%4]]}, t)
			MOVL(t, sched.Offset(128*r+4*k))
		}
	}
	if avx512 {
		Comment("The first blocks' message schedule, two vectors per VPERMI2D, on the",
			"stack; each round then writes its words of the next blocks.")
		VMOVDQU32(Mem{Base: p0}, reg.Z16)
		VMOVDQU32(Mem{Base: p1}, reg.Z17)
		for i := 0; i < 14; i++ {
			z := []reg.VecPhysical{reg.Z23, reg.Z24}[i%2]
			VMOVDQU32(idx2Mem.Offset(64*i), z)
			VPERMI2D(reg.Z17, reg.Z16, z)
			VMOVDQU32(z, sched.Offset(64*i))
		}
	} else {
		Comment("The first blocks' message schedule on the stack, with scalar moves",
			"(AVX2 has no two-table permute); each round then writes its words of",
			"the next blocks.")
		for r := 0; r < 7; r++ {
			schedWords(r, p0, p1)
		}
		VMOVDQU(rot16Mem, rot16Reg)
		VMOVDQU(rot8Mem, rot8Reg)
	}
	Label("loop")
	Comment("Row d: (counter, block length, flags) for each chain.")
	// lenFlags sets dst to chain i's (block length, flags) for this block,
	// n being its blocks left.
	lenFlags := func(i int, n reg.GPPhysical, dst reg.GPPhysical) {
		flags, start, end, length := reg.R14L, reg.R15L, reg.R9L, reg.EBX
		word := func(j int) Mem { return Mem{Base: lp, Disp: 4 * (j + i)} }
		MOVL(word(8), flags)
		MOVL(word(10), start)
		ANDL(first, start)
		ORL(start, flags)
		XORL(end, end)
		MOVL(U32(64), length)
		CMPQ(n, U8(1))
		CMOVLEQ(word(12), end)
		CMOVLEQ(word(6), length)
		ORL(end, flags)
		SHLQ(U8(32), flags.As64())
		ORQ(length.As64(), flags.As64())
		MOVQ(flags.As64(), dst)
	}
	lenFlags(0, n0, reg.RCX)
	VMOVQ(reg.RCX, reg.X6)
	lenFlags(1, n1, reg.RCX)
	VPINSRQ(U8(1), reg.RCX, reg.X6, reg.X6)
	XORL(first, first)
	VPUNPCKLQDQ(reg.X6, reg.X5, reg.X7)
	VPUNPCKHQDQ(reg.X6, reg.X5, reg.X8)
	VINSERTI128(U8(1), reg.X8, reg.Y7, rowD)
	if avx512 {
		VPRORD(U8(16), rowD, rowD)
	}
	VBROADCASTI128(ivMem, rowC)
	next0, next1 := reg.R14, reg.R15
	LEAQ(Mem{Base: p0, Disp: 64}, next0)
	CMPQ(n0, U8(2))
	CMOVQEQ(last0.Addr, next0)
	CMPQ(n0, U8(1))
	CMOVQEQ(p0, next0)
	LEAQ(Mem{Base: p1, Disp: 64}, next1)
	CMPQ(n1, U8(2))
	CMOVQEQ(last1.Addr, next1)
	CMPQ(n1, U8(1))
	CMOVQLE(p1, next1)
	isa := rowISA{
		endRound: func(r int, _ reg.Register) { schedWords(r, next0, next1) },
		ternlog:  avx512,
		add:      func(src, dst Op) { VPADDD(src, dst, dst) },
		pshufd:   func(imm int, r reg.VecPhysical) { VPSHUFD(U8(imm), r, r) },
		msg: func(r, step int) (Op, Op) {
			return sched.Offset(128*r + 64*step), sched.Offset(128*r + 64*step + 32)
		},
	}
	if !avx512 {
		isa.xorRor = avx2XorRor
	}
	rowRounds(isa, nil)
	if avx512 {
		VPXORD(rowC, rowA, rowA)
		VPXORD(rowD, rowB, rowB)
	} else {
		VPXOR(rowC, rowA, rowA)
		VPXOR(rowD, rowB, rowB)
	}
	Comment("Chain 1 ends here: store its chaining value. Otherwise step on.")
	CMPQ(n1, U8(1))
	JNE(LabelRef("more1"))
	VEXTRACTI128(U8(1), rowA, Mem{Base: cvs, Disp: 32})
	VEXTRACTI128(U8(1), rowB, Mem{Base: cvs, Disp: 48})
	if root {
		VEXTRACTI128(U8(1), rowA, cv1a)
		VEXTRACTI128(U8(1), rowB, cv1b)
	}
	Label("more1")
	MOVQ(next1, p1)
	DECQ(n1)
	MOVQ(next0, p0)
	DECQ(n0)
	JNZ(LabelRef("loop"))
	VMOVDQU(rowA.AsX(), Mem{Base: cvs})
	VMOVDQU(rowB.AsX(), Mem{Base: cvs, Disp: 16})
	if root {
		chain2Root(sched, rootKey0, rootKey1, cv1a, cv1b, avx512)
	}
	VZEROUPPER()
	RET()
}

// The AVX2 row kernels' rotation masks and temporary.
var (
	rot16Reg, rot8Reg = reg.Y10, reg.Y11
	rotTmp            = reg.Y4
)

// avx2XorRor sets r = (r ^ src) >>> n for rows of one or two states (the
// XOR-then-rotate form: without a three-input XOR, rotating first saves
// nothing): VPSHUFB for 16 and 8, two shifts and an OR for 12 and 7. The
// masks are in rot16Reg and rot8Reg.
func avx2XorRor(r, src reg.VecPhysical, n int) {
	VPXOR(src, r, r)
	wide := r.Size() == 32
	pick := func(y reg.VecPhysical) reg.VecPhysical {
		if wide {
			return y
		}
		return y.AsX().(reg.VecPhysical)
	}
	switch n {
	case 16:
		VPSHUFB(pick(rot16Reg), r, r)
	case 8:
		VPSHUFB(pick(rot8Reg), r, r)
	default:
		t := pick(rotTmp)
		VPSRLD(U8(n), r, t)
		VPSLLD(U8(32-n), r, r)
		VPOR(t, r, r)
	}
}

// chain2Root emits chain2RootAVX512's last compression: the parent block
// of chain 0's chaining value (X0, X1) and chain 1's (cv1a, cv1b), from
// the key in key0 and key1, in the row form of the chain kernel with its
// schedule made by VPERMD on the stack.
func chain2Root(sched Mem, key0, key1, cv1a, cv1b reg.VecPhysical, avx512 bool) {
	Comment("The root: the parent block of the two chaining values.")
	rowA, rowB, rowC, rowD = reg.X0, reg.X1, reg.X2, reg.X3
	rowBSpare, rowT1, rowT2 = reg.X22, reg.X20, reg.X21
	VINSERTI128(U8(1), reg.X1, reg.Y0, reg.Y4)
	VINSERTI128(U8(1), cv1b, cv1a.AsY(), reg.Y5)
	Load(Param("swap"), reg.EAX)
	TESTL(reg.EAX, reg.EAX)
	if avx512 {
		JNZ(LabelRef("swapped"))
		VINSERTI64X4(U8(1), reg.Y5, reg.Z4, reg.Z16)
		JMP(LabelRef("block"))
		Label("swapped")
		VINSERTI64X4(U8(1), reg.Y4, reg.Z5, reg.Z16)
		Label("block")
		for r := 0; r < 7; r++ {
			VMOVDQU32(idx16Mem.Offset(64*r), reg.Z23)
			VPERMD(reg.Z16, reg.Z23, reg.Z23)
			VMOVDQU32(reg.Z23, sched.Offset(64*r))
		}
	} else {
		// The parent block goes to the stack (past the schedule's seven
		// rows) and its schedule is written from there with scalar moves.
		block := sched.Offset(7 * 64)
		JNZ(LabelRef("swapped"))
		VMOVDQU(reg.Y4, block)
		VMOVDQU(reg.Y5, block.Offset(32))
		JMP(LabelRef("block"))
		Label("swapped")
		VMOVDQU(reg.Y5, block)
		VMOVDQU(reg.Y4, block.Offset(32))
		Label("block")
		for r := 0; r < 7; r++ {
			for k := 0; k < 16; k++ {
				MOVL(block.Offset(4*schedule[r][rowLayout[k]]), reg.EAX)
				MOVL(reg.EAX, sched.Offset(64*r+4*k))
			}
		}
	}
	if avx512 {
		VMOVDQA64(key0, rowA)
		VMOVDQA64(key1, rowB)
	} else {
		VMOVDQA(key0, rowA)
		VMOVDQA(key1, rowB)
	}
	VMOVDQU(ivMem, rowC)
	Load(Param("rootFlags"), reg.ECX)
	SHLQ(U8(32), reg.RCX)
	ORQ(U8(64), reg.RCX)
	VMOVQ(reg.RCX, reg.X4)
	VPSLLDQ(U8(8), reg.X4, rowD) // (0, 0, 64, rootFlags)
	isa := rowISA{
		ternlog: avx512,
		add:     func(src, dst Op) { VPADDD(src, dst, dst) },
		pshufd:  func(imm int, r reg.VecPhysical) { VPSHUFD(U8(imm), r, r) },
		msg: func(r, step int) (Op, Op) {
			return sched.Offset(64*r + 32*step), sched.Offset(64*r + 32*step + 16)
		},
	}
	if avx512 {
		VPRORD(U8(16), rowD, rowD)
	} else {
		isa.xorRor = avx2XorRor
	}
	rowRounds(isa, nil)
	out := reg.RDI
	Load(Param("out"), out)
	VPXOR(rowC, rowA, rowA)
	VPXOR(rowD, rowB, rowB)
	VPXOR(key0, rowC, rowC)
	VPXOR(key1, rowD, rowD)
	VMOVDQU(rowA, Mem{Base: out})
	VMOVDQU(rowB, Mem{Base: out, Disp: 16})
	VMOVDQU(rowC, Mem{Base: out, Disp: 32})
	VMOVDQU(rowD, Mem{Base: out, Disp: 48})
}

func main() {
	ConstraintExpr("!purego")
	constants()
	rowKernels("SSE41", sseISA, false)
	rowKernels("AVX512", avx512RowISA, true)
	chain2Kernel(false, true)
	chain2Kernel(true, true)
	chain2Kernel(false, false)
	chain2Kernel(true, false)
	manyKernel("hash8AVX2", kindAVX2, false)
	manyKernel("hash8AVX512", kindAVX512VL8, false)
	manyKernel("hash16AVX512", kindAVX512x16, false)
	manyKernel("hash8TailAVX512", kindAVX512VL8, true)
	manyKernel("hash16TailAVX512", kindAVX512x16, true)
	Generate()
}
