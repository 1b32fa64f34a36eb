package main

import (
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
//	                    idle lane parked on a 64-byte scratch area)
//	state   [64]uint32  chaining words: c0[16], c1[16], x0[16], x1[16], the
//	                    previous ciphertext block c_(i-1) and the previous
//	                    cipher input x_(i-1) of each lane, big-endian halves
//
// A kernel runs nblocks (>= 1) blocks in every lane, in place, and writes
// state back (not the pointers: package tea sets them before every call, so that no
// pointer past the end of a buffer is ever stored). The AVX2 kernel uses the first 8 entries of each.

var laneSignature = "func(k *[4]uint32, ins *[16]*byte, outs *[16]*byte, strides *[16]uint64, state *[64]uint32, nblocks int)"

// constants shared by the lane kernels.
type laneConsts struct {
	bswap32 Mem // VPSHUFB mask reversing the bytes of each dword
	sums    Mem // the 16 round sums as dwords
	even    Mem // dword indices 0, 2, ..., 30
	odd     Mem // dword indices 1, 3, ..., 31
	ilo     Mem // 0, 16, 1, 17, ..., 7, 23
	ihi     Mem // 8, 24, ..., 15, 31
}

var consts laneConsts

func genConsts() {
	consts.bswap32 = GLOBL("tea_bswap32", RODATA|NOPTR)
	for i := 0; i < 64; i++ {
		DATA(i, U8(i&^3|(3-i&3)))
	}
	consts.sums = GLOBL("tea_sums", RODATA|NOPTR)
	for i := 1; i <= 16; i++ {
		DATA(4*(i-1), U32(sum(i)))
	}
	consts.even = GLOBL("tea_even", RODATA|NOPTR)
	for i := 0; i < 16; i++ {
		DATA(4*i, U32(2*i))
	}
	consts.odd = GLOBL("tea_odd", RODATA|NOPTR)
	for i := 0; i < 16; i++ {
		DATA(4*i, U32(2*i+1))
	}
	consts.ilo = GLOBL("tea_ilo", RODATA|NOPTR)
	for j := 0; j < 8; j++ {
		DATA(8*j, U32(j))
		DATA(8*j+4, U32(16+j))
	}
	consts.ihi = GLOBL("tea_ihi", RODATA|NOPTR)
	for j := 0; j < 8; j++ {
		DATA(8*j, U32(8+j))
		DATA(8*j+4, U32(24+j))
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

// zmmRounds emits the 32 half-rounds on v[0], v[1] (16 lanes each):
// t op= ((s<<4)+ka) ^ (s+sum) ^ ((s>>5)+kc), the three-way XOR in one
// VPTERNLOGD. The first update of each word goes to a new register, so v
// itself is left intact; it returns the registers holding the result.
func zmmRounds(v [2]reg.VecVirtual, k [4]reg.VecVirtual, rounds []halfRound, decrypt bool) [2]reg.VecVirtual {
	cur := v
	var fresh [2]bool
	for _, hr := range rounds {
		s, t := cur[hr.s], cur[hr.t]
		a, b, c := ZMM(), ZMM(), ZMM()
		VPSLLD(U8(4), s, a)
		VPADDD(k[hr.ka], a, a)
		VPADDD_BCST(sumOp(hr.c), s, b)
		VPSRLD(U8(5), s, c)
		VPADDD(k[hr.kc], c, c)
		VPTERNLOGD(U8(0x96), c, b, a)
		nt := t
		if !fresh[hr.t] {
			nt = ZMM()
			fresh[hr.t] = true
		}
		if decrypt {
			VPSUBD(a, t, nt)
		} else {
			VPADDD(a, t, nt)
		}
		cur[hr.t] = nt
	}
	return cur
}

// transpose8 transposes the 8x8 matrix of qwords in r (row i in r[i]) and
// returns its columns: out[j] holds r[0][j], ..., r[7][j].
func transpose8(r [8]reg.VecVirtual) [8]reg.VecVirtual {
	var t, u, c [8]reg.VecVirtual
	for i := 0; i < 8; i += 2 {
		t[i], t[i+1] = ZMM(), ZMM()
		VPUNPCKLQDQ(r[i+1], r[i], t[i]) // r_i[0] r_(i+1)[0] r_i[2] r_(i+1)[2] ...
		VPUNPCKHQDQ(r[i+1], r[i], t[i+1])
	}
	// u[0..3] from rows 0-3, u[4..7] from rows 4-7.
	for h := 0; h < 8; h += 4 {
		for q := 0; q < 2; q++ {
			a, b := t[h+q], t[h+2+q]
			u[h+2*q], u[h+2*q+1] = ZMM(), ZMM()
			VSHUFI64X2(U8(0x88), b, a, u[h+2*q])
			VSHUFI64X2(U8(0xdd), b, a, u[h+2*q+1])
		}
	}
	// u[0]: cols 0,4  u[1]: cols 2,6  u[2]: cols 1,5  u[3]: cols 3,7
	for q, cols := range [4][2]int{{0, 4}, {2, 6}, {1, 5}, {3, 7}} {
		c[cols[0]], c[cols[1]] = ZMM(), ZMM()
		VSHUFI64X2(U8(0x88), u[4+q], u[q], c[cols[0]])
		VSHUFI64X2(U8(0xdd), u[4+q], u[q], c[cols[1]])
	}
	return c
}

// groupSteps is the number of blocks per lane that the AVX-512 kernels load
// with plain 64-byte loads and a transposition instead of gathers.
const groupSteps = 8

func genAVX512(name string, decrypt bool) {
	// Not NOSPLIT: the frame holds three 1 KiB transposition buffers.
	TEXT(name, 0, laneSignature)
	Pragma("noescape")
	if decrypt {
		Doc(name + " deciphers nblocks blocks in each of 16 lanes in place (AVX-512).")
	} else {
		Doc(name + " enciphers nblocks blocks in each of 16 lanes in place (AVX-512).")
	}
	kp := Load(Param("k"), GP64())
	ins := Load(Param("ins"), GP64())
	outs := Load(Param("outs"), GP64())
	strides := Load(Param("strides"), GP64())
	st := Load(Param("state"), GP64())
	n := Load(Param("nblocks"), GP64())

	// in (two buffers, used in turn) and out hold, at 128*j, block j of
	// all 16 lanes in lane order, as loaded from / to be stored to memory.
	in := AllocLocal(2 * groupSteps * 128)
	out := AllocLocal(groupSteps * 128)
	lanePtrs := AllocLocal(128)
	laneOuts := AllocLocal(128)

	var k [4]reg.VecVirtual
	for i := range k {
		k[i] = ZMM()
		VPBROADCASTD(Mem{Base: kp, Disp: 4 * i}, k[i])
	}
	pa, pb, sa, sb := ZMM(), ZMM(), ZMM(), ZMM()
	VMOVDQU64(Mem{Base: ins}, pa)
	VMOVDQU64(Mem{Base: ins, Disp: 64}, pb)
	oa, ob := ZMM(), ZMM()
	VMOVDQU64(Mem{Base: outs}, oa)
	VMOVDQU64(Mem{Base: outs, Disp: 64}, ob)
	VMOVDQU64(Mem{Base: strides}, sa)
	VMOVDQU64(Mem{Base: strides, Disp: 64}, sb)
	sc0, sc1, sx0, sx1 := ZMM(), ZMM(), ZMM(), ZMM()
	c0, c1, x0, x1 := sc0, sc1, sx0, sx1
	VMOVDQU32(Mem{Base: st}, c0)
	VMOVDQU32(Mem{Base: st, Disp: 64}, c1)
	VMOVDQU32(Mem{Base: st, Disp: 128}, x0)
	VMOVDQU32(Mem{Base: st, Disp: 192}, x1)
	zero := GP64()
	XORQ(zero, zero)
	ka, kb := K(), K()

	// split reverses each dword's bytes of the blocks of lanes 0-7 (la) and
	// 8-15 (lb) and splits them into their high (b0) and low (b1) words.
	split := func(la, lb, b0, b1 reg.VecVirtual) {
		VPSHUFB(consts.bswap32, la, la)
		VPSHUFB(consts.bswap32, lb, lb)
		VMOVDQU64(consts.even, b0)
		VPERMI2D(lb, la, b0)
		VMOVDQU64(consts.odd, b1)
		VPERMI2D(lb, la, b1)
	}
	// gather loads the block at pa/pb of every lane.
	gather := func(pa, pb, b0, b1 reg.VecVirtual) {
		la, lb := ZMM(), ZMM()
		KXNORW(ka, ka, ka)
		KXNORW(kb, kb, kb)
		VPGATHERQQ(Mem{Base: zero, Index: pa, Scale: 1}, ka, la)
		VPGATHERQQ(Mem{Base: zero, Index: pb, Scale: 1}, kb, lb)
		split(la, lb, b0, b1)
	}
	// process runs one block per lane from b0/b1 and returns the blocks to
	// write back, as qwords in memory byte order (lanes 0-7, 8-15). It
	// renames instead of moving: afterwards c0, c1, x0, x1 name the
	// registers holding the new chaining state.
	process := func(b0, b1 reg.VecVirtual) (wa, wb reg.VecVirtual) {
		v := [2]reg.VecVirtual{ZMM(), ZMM()}
		var o0, o1 reg.VecVirtual
		if !decrypt {
			// x_i = p_i ^ c_(i-1); c_i = E(x_i) ^ x_(i-1)
			VPXORD(b0, c0, v[0])
			VPXORD(b1, c1, v[1])
			e := zmmRounds(v, k, encRounds(), false)
			o0, o1 = ZMM(), ZMM()
			VPXORD(e[0], x0, o0)
			VPXORD(e[1], x1, o1)
			c0, c1, x0, x1 = o0, o1, v[0], v[1]
		} else {
			// x_i = D(c_i ^ x_(i-1)); p_i = x_i ^ c_(i-1)
			VPXORD(b0, x0, v[0])
			VPXORD(b1, x1, v[1])
			d := zmmRounds(v, k, decRounds(), true)
			o0, o1 = ZMM(), ZMM()
			VPXORD(d[0], c0, o0)
			VPXORD(d[1], c1, o1)
			c0, c1, x0, x1 = b0, b1, d[0], d[1]
		}
		wa, wb = ZMM(), ZMM()
		VMOVDQU64(consts.ilo, wa)
		VPERMI2D(o1, o0, wa)
		VMOVDQU64(consts.ihi, wb)
		VPERMI2D(o1, o0, wb)
		VPSHUFB(consts.bswap32, wa, wa)
		VPSHUFB(consts.bswap32, wb, wb)
		return wa, wb
	}
	// settle moves the renamed chaining state back into the loop-carried
	// registers.
	settle := func() {
		for _, m := range [][2]reg.VecVirtual{{c0, sc0}, {c1, sc1}, {x0, sx0}, {x1, sx1}} {
			VMOVDQA64(m[0], m[1])
		}
		c0, c1, x0, x1 = sc0, sc1, sx0, sx1
	}
	scatter := func(wa, wb, oa, ob reg.VecVirtual) {
		KXNORW(ka, ka, ka)
		KXNORW(kb, kb, kb)
		VPSCATTERQQ(wa, ka, Mem{Base: zero, Index: oa, Scale: 1})
		VPSCATTERQQ(wb, kb, Mem{Base: zero, Index: ob, Scale: 1})
	}

	// Groups of 8 blocks per lane: 64-byte loads of each lane, transposed
	// into block order; the results are transposed back and stored the same
	// way. Idle lanes point at a 64-byte scratch area with stride 0. The
	// next group is loaded and transposed halfway through the current one,
	// into the other staging buffer, so that this work hides behind the
	// rounds.
	group := name + "_group"
	tail := name + "_tail"
	cur, nxt := GP64(), GP64()
	LEAQ(in, cur)
	LEAQ(in.Offset(groupSteps*128), nxt)
	loadGroup := func(base reg.Register, pa, pb reg.VecVirtual) {
		VMOVDQU64(pa, lanePtrs)
		VMOVDQU64(pb, lanePtrs.Offset(64))
		for half := 0; half < 2; half++ {
			var rows [8]reg.VecVirtual
			for l := range rows {
				p := GP64()
				MOVQ(lanePtrs.Offset(8*(8*half+l)), p)
				rows[l] = ZMM()
				VMOVDQU64(Mem{Base: p}, rows[l])
			}
			cols := transpose8(rows)
			for j, c := range cols {
				VMOVDQU64(c, Mem{Base: base, Disp: 128*j + 64*half})
			}
		}
	}
	step := func(j int) {
		la, lb, b0, b1 := ZMM(), ZMM(), ZMM(), ZMM()
		VMOVDQU64(Mem{Base: cur, Disp: 128 * j}, la)
		VMOVDQU64(Mem{Base: cur, Disp: 128*j + 64}, lb)
		split(la, lb, b0, b1)
		wa, wb := process(b0, b1)
		VMOVDQU64(wa, out.Offset(128*j))
		VMOVDQU64(wb, out.Offset(128*j+64))
	}
	CMPQ(n, U8(groupSteps))
	JB(LabelRef(tail))
	loadGroup(cur, pa, pb)
	Label(group)
	// Here n >= 8 and the current group is staged at cur.
	for j := 0; j < groupSteps/2; j++ {
		step(j)
	}
	CMPQ(n, U8(2*groupSteps))
	JB(LabelRef(name + "_nonext"))
	{
		na, nb, s8 := ZMM(), ZMM(), ZMM()
		VPSLLQ(U8(3), sa, s8)
		VPADDQ(s8, pa, na)
		VPSLLQ(U8(3), sb, s8)
		VPADDQ(s8, pb, nb)
		loadGroup(nxt, na, nb)
	}
	Label(name + "_nonext")
	for j := groupSteps / 2; j < groupSteps; j++ {
		step(j)
	}
	VMOVDQU64(oa, laneOuts)
	VMOVDQU64(ob, laneOuts.Offset(64))
	for half := 0; half < 2; half++ {
		var cols [8]reg.VecVirtual
		for j := range cols {
			cols[j] = ZMM()
			VMOVDQU64(out.Offset(128*j+64*half), cols[j])
		}
		rows := transpose8(cols)
		for l, r := range rows {
			p := GP64()
			MOVQ(laneOuts.Offset(8*(8*half+l)), p)
			VMOVDQU64(r, Mem{Base: p})
		}
	}
	settle()
	s8 := ZMM()
	VPSLLQ(U8(3), sa, s8)
	VPADDQ(s8, pa, pa)
	VPADDQ(s8, oa, oa)
	VPSLLQ(U8(3), sb, s8)
	VPADDQ(s8, pb, pb)
	VPADDQ(s8, ob, ob)
	XCHGQ(cur, nxt)
	SUBQ(U8(groupSteps), n)
	CMPQ(n, U8(groupSteps))
	JAE(LabelRef(group))

	// The remaining 0..7 blocks with gathers and scatters, software
	// pipelined: the next block's gather is issued before the current
	// block's rounds. The last block is peeled off so that nothing past a
	// message is read.
	Label(tail)
	TESTQ(n, n)
	JZ(LabelRef(name + "_done"))
	b0, b1 := ZMM(), ZMM()
	gather(pa, pb, b0, b1)
	DECQ(n)
	JZ(LabelRef(name + "_last"))
	loop := name + "_loop"
	Label(loop)
	na, nb := ZMM(), ZMM()
	VPADDQ(sa, pa, na)
	VPADDQ(sb, pb, nb)
	n0, n1 := ZMM(), ZMM()
	gather(na, nb, n0, n1)
	wa, wb := process(b0, b1)
	settle()
	scatter(wa, wb, oa, ob)
	VPADDQ(sa, oa, oa)
	VPADDQ(sb, ob, ob)
	VMOVDQA64(na, pa)
	VMOVDQA64(nb, pb)
	VMOVDQA64(n0, b0)
	VMOVDQA64(n1, b1)
	DECQ(n)
	JNZ(LabelRef(loop))
	Label(name + "_last")
	wa, wb = process(b0, b1)
	settle()
	scatter(wa, wb, oa, ob)

	Label(name + "_done")
	VMOVDQU32(c0, Mem{Base: st})
	VMOVDQU32(c1, Mem{Base: st, Disp: 64})
	VMOVDQU32(x0, Mem{Base: st, Disp: 128})
	VMOVDQU32(x1, Mem{Base: st, Disp: 192})
	VZEROUPPER()
	RET()
}
