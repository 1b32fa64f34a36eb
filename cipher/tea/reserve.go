package tea

import (
	"crypto/rand"
	mrand "math/rand/v2"
	"sync"
)

// First blocks in reserve.
//
// When fill >= 8 (plaintexts of 8k+7, 8k or 8k+1 bytes, three lengths in
// eight), a message's first block is the header byte and 7 filler bytes:
// it does not depend on the plaintext, and neither does its encryption,
// which is also the first ciphertext block (the chaining state starts at
// zero). Encrypt takes such blocks, together with the one or two filler
// bytes of the second block, from a per-Cipher reserve, filled 32 at a time
// by a kernel that encrypts 16 independent blocks side by side in SIMD
// lanes (16 blocks cost about 1.5 times as much as one block alone). Its
// own chain then starts at the second block, one block shorter: for a
// 16-byte plaintext 3 blocks instead of 4.
//
// Every entry is used exactly once: entries are taken under a mutex and
// erased as they are taken. Their filler bytes come from a ChaCha8
// generator (math/rand/v2, documented as cryptographically strong) seeded
// from crypto/rand when the reserve is created and again every 2048 first
// blocks: crypto/rand itself costs about 1.5 ns per byte here, 13 ns of
// the 8 to 9 filler bytes each first block needs, ChaCha8 about a third of
// that. (The other filler bytes of Encrypt come from crypto/rand.) Unlike
// crypto/rand, the generator and the reserve do not notice a VM snapshot
// being cloned: until the next reseed both clones would draw the same
// filler, and both would use the entries already in reserve. A Cipher
// holds at most three reserves (one per header byte) and one generator,
// allocated on first use, about 2 KiB in all.

// reserveSize is the number of first blocks computed per refill: two calls
// of the 16-block kernel.
const reserveSize = 32

// headBlocks is the reserve of one header byte: entries [0, n) are unused.
type headBlocks struct {
	n     int
	x     [reserveSize]uint64 // the first block: header byte, 7 filler bytes
	c     [reserveSize]uint64 // its encryption E(x), the first ciphertext block
	extra [reserveSize][2]byte
}

// reserve is a Cipher's reserve of first blocks, kinds[fill-8] for fill 8,
// 9 and 10, and the generator of their filler bytes.
type reserve struct {
	mu      sync.Mutex
	kinds   [3]*headBlocks
	gen     *mrand.ChaCha8
	refills int // since gen was last seeded
}

// reseedEvery is the number of refills after which the filler generator is
// seeded afresh from crypto/rand (2048 first blocks).
const reseedEvery = 64

// takeHead returns an unused first block for a message with the given fill
// (8, 9 or 10): the block x, its encryption e, and filler bytes for the
// second block, of which the message uses fill-8.
func (c *Cipher) takeHead(fill int) (x, e uint64, extra [2]byte) {
	r := &c.res
	r.mu.Lock()
	hb := r.kinds[fill-8]
	if hb == nil || hb.n == 0 {
		hb = c.refillHeads(fill)
	}
	hb.n--
	i := hb.n
	x, e, extra = hb.x[i], hb.c[i], hb.extra[i]
	hb.x[i], hb.c[i], hb.extra[i] = 0, 0, [2]byte{}
	r.mu.Unlock()
	return x, e, extra
}

// refillHeads fills the reserve for fill with reserveSize new first blocks
// and their encryptions, computed 16 side by side. c.res.mu is held.
func (c *Cipher) refillHeads(fill int) *headBlocks {
	r := &c.res
	hb := r.kinds[fill-8]
	if hb == nil {
		hb = new(headBlocks)
		r.kinds[fill-8] = hb
	}
	if r.gen == nil || r.refills == reseedEvery {
		var seed [32]byte
		rand.Read(seed[:]) // never fails (Go 1.24+)
		if r.gen == nil {
			r.gen = mrand.NewChaCha8(seed)
		} else {
			r.gen.Seed(seed)
		}
		clear(seed[:])
		r.refills = 0
	}
	r.refills++
	hdr := uint64(0xF8|byte(fill-3)) << 56
	impl := batchImpl
	for base := 0; base < reserveSize; base += 16 {
		var v [32]uint32
		var ex uint64
		for j := range 16 {
			x := hdr | r.gen.Uint64()>>8 // header byte, 7 filler bytes
			hb.x[base+j] = x
			v[j], v[16+j] = uint32(x>>32), uint32(x)
			if fill > 8 {
				if j%4 == 0 {
					ex = r.gen.Uint64()
				}
				hb.extra[base+j] = [2]byte{byte(ex), byte(ex >> 8)}
				ex >>= 16
			}
		}
		encryptBlocks(impl, &c.k, &v)
		for j := range 16 {
			hb.c[base+j] = uint64(v[j])<<32 | uint64(v[16+j])
		}
		clear(v[:])
	}
	hb.n = reserveSize
	return hb
}
