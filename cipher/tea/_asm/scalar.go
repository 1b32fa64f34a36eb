package main

import (
	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	"github.com/mmcloughlin/avo/reg"
)

const delta = 0x9e3779b9

// sum returns i*delta mod 2^32, the round constant of cycle i (1..16).
func sum(i int) uint32 { return uint32(i) * delta }

// halfRound describes one Feistel half-round: t op= F(s) with key words
// ka (for s<<4) and kc (for s>>5) and round sum c.
type halfRound struct {
	t, s   int // indices into the v array: 0 for v0, 1 for v1
	ka, kc int // key word indices
	c      uint32
}

// encRounds and decRounds list the 32 half-rounds of one block.
func encRounds() []halfRound {
	var r []halfRound
	for i := 1; i <= 16; i++ {
		r = append(r, halfRound{0, 1, 0, 1, sum(i)}, halfRound{1, 0, 2, 3, sum(i)})
	}
	return r
}

func decRounds() []halfRound {
	var r []halfRound
	for i := 16; i >= 1; i-- {
		r = append(r, halfRound{1, 0, 2, 3, sum(i)}, halfRound{0, 1, 0, 1, sum(i)})
	}
	return r
}

// scalarRounds emits the 32 half-rounds on v[0], v[1] (32-bit registers).
// keys holds the key words (registers or memory operands). decrypt selects
// subtraction.
//
// After the first half-round, F(s) is computed from s's previous value o and
// its update f (s = o op f): (s<<4)+ka = ((o<<4)+ka) op (f<<4) and
// s+c = (o+c) op f. Only (s>>5)+kc waits for s, which makes the chain four
// dependent operations per half-round.
func scalarRounds(v [2]reg.GPVirtual, keys [4]Op, rounds []halfRound, decrypt bool) {
	op := ADDL
	if decrypt {
		op = SUBL
	}
	var o, f reg.GPVirtual // previous value and update of the last target
	for i, hr := range rounds {
		s, t := v[hr.s], v[hr.t]
		acc := GP32()
		t2 := GP32()
		if i == 0 {
			MOVL(s, acc)
			SHLL(U8(4), acc)
			ADDL(keys[hr.ka], acc)
			LEAL(Mem{Base: s, Disp: int(int32(hr.c))}, t2)
			XORL(t2, acc)
		} else {
			// acc = ((o<<4)+ka) op (f<<4)
			MOVL(o, acc)
			SHLL(U8(4), acc)
			ADDL(keys[hr.ka], acc)
			MOVL(f, t2)
			SHLL(U8(4), t2)
			op(t2, acc)
			// t2 = (o+c) op f
			LEAL(Mem{Base: o, Disp: int(int32(hr.c))}, t2)
			op(f, t2)
			XORL(t2, acc)
		}
		t3 := GP32()
		MOVL(s, t3)
		SHRL(U8(5), t3)
		ADDL(keys[hr.kc], t3)
		XORL(t3, acc)
		no := GP32()
		MOVL(t, no)
		op(acc, t)
		o, f = no, acc
	}
}

// scalarBlock runs rounds on the 64-bit block in x, split into its high and low
// words, and returns the result joined again in a new 64-bit register.
func scalarBlock(x reg.GPVirtual, keys [4]Op, rounds []halfRound, decrypt bool) reg.Register {
	v := [2]reg.GPVirtual{GP32(), GP32()}
	MOVQ(x, v[0].As64())
	SHRQ(U8(32), v[0].As64())
	MOVL(x.As32(), v[1])
	scalarRounds(v, keys, rounds, decrypt)
	e := v[0].As64()
	SHLQ(U8(32), e)
	ORQ(v[1].As64(), e)
	return e
}

func keyOps(kp reg.Register) [4]Op {
	var k [4]Op
	for i := range k {
		k[i] = Mem{Base: kp, Disp: 4 * i}
	}
	return k
}

// genScalar emits encryptChainAsm and decryptChainAsm.
func genScalar() {
	// Encrypt in place: x_i = p_i ^ c_(i-1); c_i = E(x_i) ^ x_(i-1).
	TEXT("encryptChainAsm", NOSPLIT, "func(k *[4]uint32, buf []byte, c, x uint64)")
	Pragma("noescape")
	Doc("encryptChainAsm enciphers buf in place; len(buf) must be a multiple of 8.",
		"c and x are the chaining state before buf's first block: the previous",
		"ciphertext block and the previous cipher input (0, 0 at a message's start).")
	{
		kp := Load(Param("k"), GP64())
		p := Load(Param("buf").Base(), GP64())
		n := Load(Param("buf").Len(), GP64())
		SHRQ(U8(3), n)
		JZ(LabelRef("enc_done"))
		keys := keyOps(kp)
		x := GP64()
		xp := Load(Param("x"), GP64())
		// x_1 = p_1 ^ c_0
		MOVQ(Mem{Base: p}, x)
		BSWAPQ(x)
		cin := Load(Param("c"), GP64())
		XORQ(cin, x)
		// block runs the rounds on x and stores c = E(x) ^ xp; it returns
		// E(x) (a 64-bit register).
		block := func() reg.Register {
			e := scalarBlock(x, keys, encRounds(), false)
			c := GP64()
			MOVQ(e, c)
			XORQ(xp, c) // c_i = E(x_i) ^ x_(i-1)
			BSWAPQ(c)
			MOVQ(c, Mem{Base: p})
			return e
		}
		DECQ(n)
		JZ(LabelRef("enc_last"))
		Label("enc_loop")
		// The next block is loaded before the rounds, and combined with
		// x_(i-1) already: x_(i+1) = p_(i+1) ^ c_i = (p_(i+1) ^ x_(i-1)) ^ E(x_i).
		q := GP64()
		MOVQ(Mem{Base: p, Disp: 8}, q)
		BSWAPQ(q)
		XORQ(xp, q)
		e := block()
		MOVQ(x, xp)
		XORQ(e, q)
		MOVQ(q, x)
		ADDQ(U8(8), p)
		DECQ(n)
		JNZ(LabelRef("enc_loop"))
		Label("enc_last")
		block()
		Label("enc_done")
		RET()
	}

	// Decrypt: x_i = D(c_i ^ x_(i-1)); p_i = x_i ^ c_(i-1).
	TEXT("decryptChainAsm", NOSPLIT, "func(k *[4]uint32, dst, src []byte)")
	Pragma("noescape")
	Doc("decryptChainAsm deciphers src into dst; len(src) must be a multiple of 8",
		"and len(dst) >= len(src). dst and src may be the same slice.")
	{
		kp := Load(Param("k"), GP64())
		d := Load(Param("dst").Base(), GP64())
		s := Load(Param("src").Base(), GP64())
		n := Load(Param("src").Len(), GP64())
		SHRQ(U8(3), n)
		JZ(LabelRef("dec_done"))
		keys := keyOps(kp)
		cp, xp := GP64(), GP64()
		XORQ(cp, cp)
		XORQ(xp, xp)
		Label("dec_loop")
		c := GP64()
		MOVQ(Mem{Base: s}, c)
		BSWAPQ(c)
		x := GP64()
		MOVQ(c, x)
		XORQ(xp, x)
		e := scalarBlock(x, keys, decRounds(), true)
		MOVQ(e, xp) // x_i
		XORQ(cp, e) // p_i
		MOVQ(c, cp)
		BSWAPQ(e)
		MOVQ(e, Mem{Base: d})
		ADDQ(U8(8), s)
		ADDQ(U8(8), d)
		DECQ(n)
		JNZ(LabelRef("dec_loop"))
		Label("dec_done")
		RET()
	}
}
