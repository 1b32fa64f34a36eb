package tea

import (
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"io"
	"sync"
	"unsafe"

	"github.com/tendril-p2p/tendril/internal/sliceutil"
)

// Batch operations run independent messages side by side in SIMD lanes
// where the CPU has AVX-512 (16 lanes in ZMM registers) or AVX2 (16 lanes as
// two interleaved groups of 8 in YMM registers); elsewhere, or for a
// single message, they fall back to the single-message code. The output is
// byte for byte what the single-message functions produce. The destinations
// of one batch must not overlap each other (each may be its own source's
// storage).

// fillChunk is how many messages' filler bytes are read from the random
// source in one call.
const fillChunk = 64

var fillChunkPool = sync.Pool{New: func() any { return new([fillChunk * FillSize]byte) }}

func checkBatch(op string, dsts, srcs [][]byte) {
	if len(dsts) != len(srcs) {
		panic(fmt.Sprintf("tea: %s: %d destinations for %d sources", op, len(dsts), len(srcs)))
	}
}

// EncryptBatch encrypts every srcs[i] as Encrypt does and appends the
// ciphertext to dsts[i], replacing dsts[i] with the extended slice. Filler
// bytes come from crypto/rand, read in one call per 64 messages. dsts[i] may
// be srcs[i][:0] when its capacity suffices. It panics if len(dsts) !=
// len(srcs).
func (c *Cipher) EncryptBatch(dsts, srcs [][]byte) {
	checkBatch("EncryptBatch", dsts, srcs)
	r := fillChunkPool.Get().(*[fillChunk * FillSize]byte)
	defer fillChunkPool.Put(r)
	for base := 0; base < len(srcs); base += fillChunk {
		end := min(base+fillChunk, len(srcs))
		buf := r[:(end-base)*FillSize]
		rand.Read(buf) // never fails (Go 1.24+)
		for i := base; i < end; i++ {
			layoutAppend(dsts, srcs, i, (*[FillSize]byte)(buf[(i-base)*FillSize:]), false)
		}
		clear(buf)
	}
	c.encryptLanes(dsts, srcs)
}

// EncryptBatchWithFill is EncryptBatch with the filler bytes read from fill:
// FillSize bytes per message in order, laid out as EncryptWithFill does, so
// that dsts[i] gets exactly what EncryptWithFill(dsts[i], srcs[i], R_i)
// would append. If fill fails, the error wraps ErrFill and every dsts[i] is
// cut back to its original length (a plaintext being encrypted in place may
// already have been moved).
func (c *Cipher) EncryptBatchWithFill(dsts, srcs [][]byte, fill io.Reader) error {
	checkBatch("EncryptBatchWithFill", dsts, srcs)
	r := fillChunkPool.Get().(*[fillChunk * FillSize]byte)
	defer fillChunkPool.Put(r)
	for base := 0; base < len(srcs); base += fillChunk {
		end := min(base+fillChunk, len(srcs))
		buf := r[:(end-base)*FillSize]
		if _, err := io.ReadFull(fill, buf); err != nil {
			for i := range base {
				dsts[i] = dsts[i][:len(dsts[i])-CiphertextLen(len(srcs[i]))]
			}
			return fmt.Errorf("%w: %w", ErrFill, err)
		}
		for i := base; i < end; i++ {
			layoutAppend(dsts, srcs, i, (*[FillSize]byte)(buf[(i-base)*FillSize:]), true)
		}
	}
	c.encryptLanes(dsts, srcs)
	return nil
}

// layoutAppend extends dsts[i] by the ciphertext length of srcs[i] and lays
// out the padded message there.
func layoutAppend(dsts, srcs [][]byte, i int, r *[FillSize]byte, keepTrailer bool) {
	ret, out := sliceutil.ForAppend(dsts[i], CiphertextLen(len(srcs[i])))
	layout(out, srcs[i], r, keepTrailer)
	dsts[i] = ret
}

// DecryptBatch decrypts every srcs[i] as Decrypt does and appends the
// plaintext to dsts[i], replacing dsts[i] with the extended slice. If some
// messages fail, it returns a *BatchError naming them; their dsts[i] keep
// their length and the others are still decrypted. dsts[i] may be
// srcs[i][:0]. It panics if len(dsts) != len(srcs).
//
// As with Decrypt, success says nothing about authenticity.
func (c *Cipher) DecryptBatch(dsts, srcs [][]byte) error {
	checkBatch("DecryptBatch", dsts, srcs)
	var errs batchErrs
	if width := laneWidth(batchImpl); width > 0 && len(srcs) > 1 {
		c.runLanes(dsts, srcs, true, batchImpl, width, &errs)
		return errs.result()
	}
	for i, ct := range srcs {
		d, err := c.Decrypt(dsts[i], ct)
		if err != nil {
			errs.fail(i, len(srcs), err)
			continue
		}
		dsts[i] = d
	}
	return errs.result()
}

// batchErrs collects the per-message errors of a batch, allocating only
// when one fails.
type batchErrs struct {
	berr *BatchError
}

func (e *batchErrs) fail(i, n int, err error) {
	if e.berr == nil {
		e.berr = &BatchError{Errs: make([]error, n)}
	}
	e.berr.Errs[i] = err
}

func (e *batchErrs) result() error {
	if e.berr == nil {
		return nil
	}
	return e.berr
}

// Batch implementations. batchGeneric runs one message after another;
// batchLanesGo runs the lane scheduler with a Go kernel (the portable twin
// of the assembly kernels, used in tests); the others are assembly.
const (
	batchGeneric = iota
	batchLanesGo
	batchAVX2
	batchAVX512
)

// encryptLanes encrypts the padded messages laid out at the end of every
// dsts[i].
func (c *Cipher) encryptLanes(dsts, srcs [][]byte) {
	if width := laneWidth(batchImpl); width > 0 && len(srcs) > 1 {
		c.runLanes(dsts, srcs, false, batchImpl, width, nil)
		return
	}
	for i := range srcs {
		encryptChain(&c.k, encRegion(dsts, srcs, i))
	}
}

// encRegion returns the padded message of srcs[i] at the end of dsts[i]
// (after layoutAppend).
func encRegion(dsts, srcs [][]byte, i int) []byte {
	d := dsts[i]
	return d[len(d)-CiphertextLen(len(srcs[i])):]
}

// region is what a lane runs: blocks read from in and written to out (the
// same memory, or out below in), starting from the chaining state c, x.
type region struct {
	in, out []byte
	c, x    uint64
}

// startQueue holds messages that decryptStarts has begun, waiting for a
// lane, in message order.
type startQueue struct {
	r      [16]region
	n, pos int
}

// decryptStarts begins decrypting the next (up to) 16 valid messages of
// srcs from *next on, for the lanes: for each it checks the length,
// reserves the output at the end of dsts[i], deciphers the block(s) holding
// the header, writes their plaintext bytes, sets dsts[i] to its final
// length, and queues the remaining blocks as a region whose output lands
// directly at its final place (no copy, no shift afterwards). The header
// blocks of all of them are deciphered side by side with the 16-block
// kernel of impl: first blocks, then the second blocks of those whose
// plaintext starts there. Failed messages are recorded in errs; regions may
// be empty (nothing left after the header blocks).
func (c *Cipher) decryptStarts(dsts, srcs [][]byte, next *int, impl int, q *startQueue, errs *batchErrs) {
	var (
		idx   [16]int
		v, w  [32]uint32
		m     int
		again bool
	)
	for m < 16 && *next < len(srcs) {
		i := *next
		*next++
		ct := srcs[i]
		if err := checkCiphertextLen(len(ct)); err != nil {
			errs.fail(i, len(srcs), err)
			continue
		}
		c1 := binary.BigEndian.Uint64(ct)
		idx[m], v[m], v[16+m] = i, uint32(c1>>32), uint32(c1)
		m++
	}
	q.n, q.pos = 0, 0
	if m == 0 {
		return
	}
	decryptBlocks(impl, &c.k, &v) // x1 = D(c1)
	for j := range m {
		ct := srcs[idx[j]]
		x1 := uint64(v[j])<<32 | uint64(v[16+j])
		if start := int(x1>>56&7) + 3; start > len(ct)-7 {
			errs.fail(idx[j], len(srcs), fmt.Errorf("%w: plaintext would start at %d of %d bytes", ErrPadding, start, len(ct)))
			idx[j] = -1
		} else if start > BlockSize {
			y := binary.BigEndian.Uint64(ct[BlockSize:]) ^ x1 // c2 ^ x1
			w[j], w[16+j] = uint32(y>>32), uint32(y)
			again = true
		}
	}
	if again {
		decryptBlocks(impl, &c.k, &w) // x2 = D(c2 ^ x1)
	}
	for j := range m {
		i := idx[j]
		if i < 0 {
			continue
		}
		ct := srcs[i]
		var blk [2 * BlockSize]byte
		c1 := binary.BigEndian.Uint64(ct)
		x1 := uint64(v[j])<<32 | uint64(v[16+j])
		start := int(x1>>56&7) + 3
		binary.BigEndian.PutUint64(blk[:], x1)
		done, cprev, xprev := BlockSize, c1, x1
		if start > BlockSize {
			c2 := binary.BigEndian.Uint64(ct[BlockSize:])
			x2 := uint64(w[j])<<32 | uint64(w[16+j])
			binary.BigEndian.PutUint64(blk[BlockSize:], x2^c1)
			done, cprev, xprev = 2*BlockSize, c2, x2
		}
		head := len(dsts[i])
		ret, area := sliceutil.ForAppend(dsts[i], len(ct))
		// In place, area is ct: this overwrites only blocks already read.
		copy(area, blk[start:done])
		dsts[i] = ret[:head+len(ct)-7-start]
		q.r[q.n] = region{in: ct[done:], out: area[done-start : len(ct)-start], c: cprev, x: xprev}
		q.n++
	}
}

// decryptBlockGo returns D(v) for one block, as a big-endian uint64.
func decryptBlockGo(k *[4]uint32, v uint64) uint64 {
	var b [BlockSize]byte
	binary.BigEndian.PutUint64(b[:], v)
	decryptChain(k, b[:], b[:]) // one block with zero chaining state: D(v)
	return binary.BigEndian.Uint64(b[:])
}

// lanes is the memory the lane kernels work on; its layout is fixed by
// _asm/avx512.go.
type lanes struct {
	ins     [16]*byte
	outs    [16]*byte
	strides [16]uint64
	state   [64]uint32
	scratch [BlockSize]byte // where idle lanes read and write
}

// laneChain returns lane j's chaining values from the kernels' state: the
// previous ciphertext block c and the previous block x that went into the
// cipher (plaintext XOR the ciphertext before it), each kept as a high and a
// low word in separate 16-word rows, one row of all 16 lanes to a vector.
func laneChain(state *[64]uint32, j int) (c, x uint64) {
	c = uint64(state[j])<<32 | uint64(state[16+j])
	x = uint64(state[32+j])<<32 | uint64(state[48+j])
	return c, x
}

// setLaneChain stores lane j's chaining values where laneChain reads them.
func setLaneChain(state *[64]uint32, j int, c, x uint64) {
	state[j], state[16+j] = uint32(c>>32), uint32(c)
	state[32+j], state[48+j] = uint32(x>>32), uint32(x)
}

// runLanes runs every message through the lane kernel of impl, width lanes
// at a time. A lane whose message ends takes the next message; lanes with
// nothing left idle on a scratch area. Each kernel call runs as many blocks
// as the shortest active message has left. Encryption works in place on the
// padded messages laid out at the end of dsts; decryption starts messages
// 16 at a time with decryptStarts, and records failures in errs.
func (c *Cipher) runLanes(dsts, srcs [][]byte, decrypt bool, impl, width int, errs *batchErrs) {
	var (
		l    lanes
		reg  [16]region // each lane's message
		pos  [16]int    // each lane's next block offset in bytes
		next int        // next message to start
		q    startQueue // messages started for decryption
	)
	for {
		steps := -1
		active := 0
		for j := range width {
			if pos[j] == len(reg[j].in) {
				reg[j], pos[j] = region{}, 0
				for len(reg[j].in) == 0 {
					if decrypt {
						if q.pos == q.n {
							if next == len(srcs) {
								break
							}
							c.decryptStarts(dsts, srcs, &next, impl, &q, errs)
							continue
						}
						reg[j] = q.r[q.pos]
						q.pos++
					} else {
						if next == len(srcs) {
							break
						}
						b := encRegion(dsts, srcs, next)
						reg[j] = region{in: b, out: b}
						next++
					}
				}
				r := &reg[j]
				setLaneChain(&l.state, j, r.c, r.x)
			}
			if len(reg[j].in) == 0 {
				l.ins[j], l.outs[j], l.strides[j] = &l.scratch[0], &l.scratch[0], 0
				continue
			}
			active++
			l.ins[j], l.outs[j], l.strides[j] = &reg[j].in[pos[j]], &reg[j].out[pos[j]], BlockSize
			if left := (len(reg[j].in) - pos[j]) / BlockSize; steps < 0 || left < steps {
				steps = left
			}
		}
		if active == 0 {
			return
		}
		runKernel(impl, decrypt, &c.k, &l.ins, &l.outs, &l.strides, &l.state, steps)
		for j := range width {
			if len(reg[j].in) > 0 {
				pos[j] += steps * BlockSize
			}
		}
	}
}

// encryptLanesGo is the portable twin of the assembly lane kernels: the same
// contract, one lane after another.
func encryptLanesGo(k *[4]uint32, ins, outs *[16]*byte, strides *[16]uint64, state *[64]uint32, nblocks int) {
	lanesGo(k, ins, outs, strides, state, nblocks, false)
}

// decryptLanesGo is the decrypting twin of encryptLanesGo.
func decryptLanesGo(k *[4]uint32, ins, outs *[16]*byte, strides *[16]uint64, state *[64]uint32, nblocks int) {
	lanesGo(k, ins, outs, strides, state, nblocks, true)
}

// lanesGo runs nblocks blocks of every active lane (idle lanes have stride
// 0), carrying each lane's chaining values from block to block.
func lanesGo(k *[4]uint32, ins, outs *[16]*byte, strides *[16]uint64, state *[64]uint32, nblocks int, decrypt bool) {
	for j := range 16 {
		if strides[j] == 0 {
			continue
		}
		in := unsafe.Slice(ins[j], nblocks*BlockSize)
		out := unsafe.Slice(outs[j], nblocks*BlockSize)
		c, x := laneChain(state, j)
		for b := 0; b < len(in); b += BlockSize {
			if decrypt {
				c, x = decryptLaneBlock(k, in[b:b+BlockSize], out[b:b+BlockSize], c, x)
			} else {
				c, x = encryptLaneBlock(k, in[b:b+BlockSize], out[b:b+BlockSize], c, x)
			}
		}
		setLaneChain(state, j, c, x)
	}
}

// encryptLaneBlock encrypts one block of a lane's chain, with the chaining
// values laneChain describes, and returns the next ones.
func encryptLaneBlock(k *[4]uint32, in, out []byte, cprev, xprev uint64) (c, x uint64) {
	var blk [BlockSize]byte
	x = binary.BigEndian.Uint64(in) ^ cprev
	binary.BigEndian.PutUint64(blk[:], x)
	encryptChainGeneric(k, blk[:]) // one block, zero state: E(x)
	c = binary.BigEndian.Uint64(blk[:]) ^ xprev
	binary.BigEndian.PutUint64(out, c)
	return c, x
}

// decryptLaneBlock is the decrypting twin of encryptLaneBlock.
func decryptLaneBlock(k *[4]uint32, in, out []byte, cprev, xprev uint64) (c, x uint64) {
	var blk [BlockSize]byte
	c = binary.BigEndian.Uint64(in)
	binary.BigEndian.PutUint64(blk[:], c^xprev)
	decryptChainGeneric(k, blk[:], blk[:]) // one block, zero state: D(.)
	x = binary.BigEndian.Uint64(blk[:])
	binary.BigEndian.PutUint64(out, x^cprev)
	return c, x
}
