package main

import (
	"fmt"

	"github.com/mmcloughlin/avo/attr"
	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	"github.com/mmcloughlin/avo/reg"
)

// Lane kernels share one memory layout, defined by package tea's lanes type:
//
//	ins     [16]*byte   address of each lane's next input block
//	outs    [16]*byte   where each lane's next output block goes: the same
//	                    as ins, or below it (never above: a block is
//	                    written only after the input it could overlap has
//	                    been read)
//	strides [16]uint64  bytes to advance each lane per block (8, or 0 for an
//	                    idle lane parked on an 8-byte scratch block)
//	state   [64]uint32  chaining words: c0[16], c1[16], x0[16], x1[16], the
//	                    previous ciphertext block c_(i-1) and the previous
//	                    cipher input x_(i-1) of each lane, big-endian halves
//
// A kernel runs nblocks (>= 1) blocks in every lane, in place, and writes
// state back (not the pointers: package tea sets them before every call, so that no
// pointer past the end of a buffer is ever stored). The AVX2 kernel uses the first 8 entries of each.

var laneSignature = "func(k *[4]uint32, ins *[16]*byte, outs *[16]*byte, strides *[16]uint64, state *[64]uint32, nblocks int)"

// laneKernel opens a lane kernel (laneSignature) for isa and loads its arguments.
func laneKernel(name string, a attr.Attribute, isa string, decrypt bool) (kp, ins, outs, strides, st, n reg.Register) {
	TEXT(name, a, laneSignature)
	Pragma("noescape")
	verb := "enciphers"
	if decrypt {
		verb = "deciphers"
	}
	Doc(name + " " + verb + " nblocks blocks in each of 16 lanes in place (" + isa + ").")
	kp = Load(Param("k"), GP64())
	ins = Load(Param("ins"), GP64())
	outs = Load(Param("outs"), GP64())
	strides = Load(Param("strides"), GP64())
	st = Load(Param("state"), GP64())
	n = Load(Param("nblocks"), GP64())
	return
}

// constants shared by the lane kernels.
type laneConsts struct {
	bswap32 Mem // VPSHUFB mask reversing the bytes of each dword
	sums    Mem // the 16 round sums as dwords
}

var consts laneConsts

func genConsts() {
	consts.bswap32 = GLOBL("tea_bswap32", RODATA|NOPTR)
	for i := 0; i < 32; i++ {
		DATA(i, U8(i&^3|(3-i&3)))
	}
	consts.sums = GLOBL("tea_sums", RODATA|NOPTR)
	for i := 1; i <= 16; i++ {
		DATA(4*(i-1), U32(sum(i)))
	}
}

// sumOp returns the broadcast memory operand of the round sum c.
func sumOp(c uint32) Mem {
	for i := 1; i <= 16; i++ {
		if sum(i) == c {
			return consts.sums.Offset(4 * (i - 1))
		}
	}
	panic("unknown round sum")
}

// ahead is how many blocks before it is enciphered the AVX-512 kernels
// stage a block's words: 2, during the rounds of the block two before it
// (1 measures a few percent slower: the staged words are then read back
// soon after their scalar stores).
const ahead = 2

// genAVX512 emits a 16-lane kernel for CPUs with AVX-512 (F, VL) and MOVBE.
//
// The rounds run as two interleaved groups of 8 lanes in YMM registers with
// EVEX encoding (VPTERNLOGD for the three-way XOR, 32 registers to keep the
// keys and the chaining state in registers). On Zen 4, where a ZMM
// operation occupies two 256-bit units, two YMM chains overlap better than
// one ZMM chain (about 5.5 instead of 7 cycles per half-round).
//
// No vector shuffles: the block words move between memory and a staging
// area in the frame through general-purpose registers, MOVBE doing the
// byte swap, and this scalar work is spread over the rounds of the
// previous or next block, where it runs on the integer units beside the
// vector ones. Staging area of a block: its 16 high words, then its 16 low
// words, in lane order (lanes 0-7: group 0, lanes 8-15: group 1).
func genAVX512(name string, decrypt bool) {
	// Not NOSPLIT: the frame holds the staging areas.
	kp, ins, outs, strides, st, n := laneKernel(name, 0, "AVX-512", decrypt)

	inSlots := AllocLocal((ahead + 1) * 128) // staged input blocks, a ring
	outSlots := AllocLocal(2 * 128)          // staged output blocks, a ring
	stagePtrs := AllocLocal(128)             // each lane's next block to stage
	outPtrs := AllocLocal(128)               // each lane's next output block
	unstagePtrs := AllocLocal(128)           // where the staged output goes
	dump := AllocLocal(64)                   // read and written by nothing real

	var k [4]reg.VecVirtual
	for i := range k {
		k[i] = YMM()
		VPBROADCASTD(Mem{Base: kp, Disp: 4 * i}, k[i])
	}
	// Chaining state: state word w (c0, c1, x0, x1) of group g.
	var c, x [2][2]reg.VecVirtual // [group][word]
	for g := 0; g < 2; g++ {
		for w := 0; w < 2; w++ {
			c[g][w], x[g][w] = YMM(), YMM()
			VMOVDQU32(Mem{Base: st, Disp: 64*w + 32*g}, c[g][w])
			VMOVDQU32(Mem{Base: st, Disp: 128 + 64*w + 32*g}, x[g][w])
		}
	}
	copyPtrs := func(src, dst Mem) {
		for h := 0; h < 2; h++ {
			t := ZMM()
			VMOVDQU64(src.Offset(64*h), t)
			VMOVDQU64(t, dst.Offset(64*h))
		}
	}
	advance := func(ptrs Mem) {
		for h := 0; h < 2; h++ {
			t := ZMM()
			VMOVDQU64(ptrs.Offset(64*h), t)
			VPADDQ(Mem{Base: strides, Disp: 64 * h}, t, t)
			VMOVDQU64(t, ptrs.Offset(64*h))
		}
	}
	// toDump points every lane of ptrs at the dump area.
	toDump := func(ptrs Mem) {
		d, t := GP64(), ZMM()
		LEAQ(dump, d)
		VPBROADCASTQ(d, t)
		VMOVDQU64(t, ptrs)
		VMOVDQU64(t, ptrs.Offset(64))
	}
	copyPtrs(Mem{Base: ins}, stagePtrs)
	copyPtrs(Mem{Base: outs}, outPtrs)
	toDump(unstagePtrs)

	// Ring registers: in[j] holds block i+j's input slot, out[0] block i's
	// output slot, out[1] block i-1's.
	var inRing [ahead + 1]reg.GPVirtual
	for j := range inRing {
		inRing[j] = GP64()
		LEAQ(inSlots.Offset(128*j), inRing[j])
	}
	outRing := [2]reg.GPVirtual{GP64(), GP64()}
	LEAQ(outSlots, outRing[0])
	LEAQ(outSlots.Offset(128), outRing[1])

	// stage copies lane l's block at stagePtrs[l] into slot.
	stage := func(slot reg.Register, l int) {
		p, q := GP64(), GP64()
		MOVQ(stagePtrs.Offset(8*l), p)
		MOVQ(Mem{Base: p}, q)
		MOVBELL(q.As32(), Mem{Base: slot, Disp: 4 * l})
		SHRQ(U8(32), q)
		MOVBELL(q.As32(), Mem{Base: slot, Disp: 64 + 4*l})
	}
	// unstage writes lane l's output block from slot to unstagePtrs[l].
	unstage := func(slot reg.Register, l int) {
		p, a, b := GP64(), GP32(), GP32()
		MOVQ(unstagePtrs.Offset(8*l), p)
		MOVL(Mem{Base: slot, Disp: 4 * l}, a)
		MOVBELL(a, Mem{Base: p})
		MOVL(Mem{Base: slot, Disp: 64 + 4*l}, b)
		MOVBELL(b, Mem{Base: p, Disp: 4})
	}

	// Prologue: stage blocks 0..ahead-1 (those that exist).
	for j := 0; j < ahead; j++ {
		CMPQ(n, U8(j))
		JBE(LabelRef(fmt.Sprintf("%s_staged", name)))
		for l := 0; l < 16; l++ {
			stage(inRing[j], l)
		}
		advance(stagePtrs)
	}
	Label(fmt.Sprintf("%s_staged", name))

	loop := name + "_loop"
	Label(loop)
	// Block i = nblocks-n. When block i+ahead does not exist, stage from
	// the dump area instead.
	CMPQ(n, U8(ahead))
	JA(LabelRef(name + "_more"))
	toDump(stagePtrs)
	Label(name + "_more")

	// The scalar jobs of this block: stage block i+ahead, unstage block i-1.
	var jobs []func()
	for l := 0; l < 16; l++ {
		jobs = append(jobs, func() { stage(inRing[ahead], l) }, func() { unstage(outRing[1], l) })
	}

	var v, b [2][2]reg.VecVirtual
	for g := 0; g < 2; g++ {
		for w := 0; w < 2; w++ {
			b[g][w], v[g][w] = YMM(), YMM()
			VMOVDQU32(Mem{Base: inRing[0], Disp: 64*w + 32*g}, b[g][w])
			if decrypt {
				VPXORD(b[g][w], x[g][w], v[g][w]) // c_i ^ x_(i-1)
			} else {
				VPXORD(b[g][w], c[g][w], v[g][w]) // x_i = p_i ^ c_(i-1)
			}
		}
	}
	rounds := encRounds()
	if decrypt {
		rounds = decRounds()
	}
	r := splitRounds(v, k, rounds, decrypt, jobs)
	for g := 0; g < 2; g++ {
		for w := 0; w < 2; w++ {
			if decrypt {
				// p_i = x_i ^ c_(i-1); then c_(i-1) = c_i, x_(i-1) = x_i.
				o := YMM()
				VPXORD(r[g][w], c[g][w], o)
				VMOVDQU32(o, Mem{Base: outRing[0], Disp: 64*w + 32*g})
				VMOVDQA32(b[g][w], c[g][w])
				VMOVDQA32(r[g][w], x[g][w])
			} else {
				// c_i = E(x_i) ^ x_(i-1); then x_(i-1) = x_i.
				VPXORD(r[g][w], x[g][w], c[g][w])
				VMOVDQU32(c[g][w], Mem{Base: outRing[0], Disp: 64*w + 32*g})
				VMOVDQA32(v[g][w], x[g][w])
			}
		}
	}
	// Block i's output is unstaged to outPtrs during the next block.
	copyPtrs(outPtrs, unstagePtrs)
	advance(outPtrs)
	advance(stagePtrs)
	for j := 0; j < ahead; j++ {
		XCHGQ(inRing[j], inRing[j+1])
	}
	XCHGQ(outRing[0], outRing[1])
	DECQ(n)
	JNZ(LabelRef(loop))

	// The last block's output.
	for l := 0; l < 16; l++ {
		unstage(outRing[1], l)
	}
	for g := 0; g < 2; g++ {
		for w := 0; w < 2; w++ {
			VMOVDQU32(c[g][w], Mem{Base: st, Disp: 64*w + 32*g})
			VMOVDQU32(x[g][w], Mem{Base: st, Disp: 128 + 64*w + 32*g})
		}
	}
	VZEROUPPER()
	RET()
}

// splitRounds emits the 32 half-rounds on two groups of 8 lanes, v[g][0]
// and v[g][1] the words of group g, interleaved so that the two
// independent chains overlap: t op= ((s<<4)+ka) ^ (s+sum) ^ ((s>>5)+kc),
// the three-way XOR in one VPTERNLOGD. The first update of each word goes
// to a new register, so v is left intact; it returns the result registers.
// jobs (scalar work) are spread evenly over the half-rounds.
func splitRounds(v [2][2]reg.VecVirtual, k [4]reg.VecVirtual, rounds []halfRound, decrypt bool, jobs []func()) [2][2]reg.VecVirtual {
	cur := v
	var fresh [2][2]bool
	next := 0
	for i, hr := range rounds {
		for g := range cur {
			s, t := cur[g][hr.s], cur[g][hr.t]
			a, b, c := YMM(), YMM(), YMM()
			VPSLLD(U8(4), s, a)
			VPADDD(k[hr.ka], a, a)
			VPADDD_BCST(sumOp(hr.c), s, b)
			VPSRLD(U8(5), s, c)
			VPADDD(k[hr.kc], c, c)
			VPTERNLOGD(U8(0x96), c, b, a)
			nt := t
			if !fresh[g][hr.t] {
				nt = YMM()
				fresh[g][hr.t] = true
			}
			if decrypt {
				VPSUBD(a, t, nt)
			} else {
				VPADDD(a, t, nt)
			}
			cur[g][hr.t] = nt
		}
		for ; next < len(jobs) && next*len(rounds) < (i+1)*len(jobs); next++ {
			jobs[next]()
		}
	}
	for ; next < len(jobs); next++ {
		jobs[next]()
	}
	return cur
}
