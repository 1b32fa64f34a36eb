package tea

import (
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"io"
	"sync"
	"unsafe"
)

// Batch operations run independent messages side by side in SIMD lanes
// where the CPU has AVX-512 (16 lanes) or AVX2 (8 lanes); elsewhere, or for a
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
	ret, out := sliceForAppend(dsts[i], CiphertextLen(len(srcs[i])))
	layout(out, srcs[i], r, keepTrailer)
	dsts[i] = ret
}

// DecryptBatch decrypts every srcs[i] as Decrypt does and appends the
// plaintext to dsts[i], replacing dsts[i] with the extended slice. If some
// messages fail, it returns a *BatchError naming them; their dsts[i] are
// left unchanged and the others are still decrypted. dsts[i] may be
// srcs[i][:0]. It panics if len(dsts) != len(srcs).
//
// As with Decrypt, success says nothing about authenticity.
func (c *Cipher) DecryptBatch(dsts, srcs [][]byte) error {
	checkBatch("DecryptBatch", dsts, srcs)
	var berr *BatchError
	fail := func(i int, err error) {
		if berr == nil {
			berr = &BatchError{Errs: make([]error, len(srcs))}
		}
		berr.Errs[i] = err
	}
	for i, ct := range srcs {
		if err := checkCiphertextLen(len(ct)); err != nil {
			fail(i, err)
			continue
		}
		ret, out := sliceForAppend(dsts[i], len(ct))
		copy(out, ct) // a no-op move when dsts[i] is ct[:0]
		dsts[i] = ret
	}
	c.decryptLanes(dsts, srcs)
	for i, ct := range srcs {
		if checkCiphertextLen(len(ct)) != nil {
			continue
		}
		d := dsts[i]
		head := len(d) - len(ct)
		n, err := unpad(d[head:], false)
		if err != nil {
			fail(i, err)
			dsts[i] = d[:head]
			continue
		}
		dsts[i] = d[:head+n]
	}
	if berr != nil {
		return berr
	}
	return nil
}

// encRegion returns the padded message of srcs[i] at the end of dsts[i]
// (after layoutAppend).
func encRegion(dsts, srcs [][]byte, i int) []byte {
	d := dsts[i]
	return d[len(d)-CiphertextLen(len(srcs[i])):]
}

// decRegion returns the ciphertext copy of srcs[i] at the end of dsts[i],
// or nil if srcs[i] has an invalid length (and was not copied).
func decRegion(dsts, srcs [][]byte, i int) []byte {
	if checkCiphertextLen(len(srcs[i])) != nil {
		return nil
	}
	d := dsts[i]
	return d[len(d)-len(srcs[i]):]
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

func (c *Cipher) encryptLanes(dsts, srcs [][]byte) {
	if width := laneWidth(batchImpl); width > 0 && len(srcs) > 1 {
		c.runLanes(dsts, srcs, false, batchImpl, width)
		return
	}
	c.encryptLanesGeneric(dsts, srcs)
}

func (c *Cipher) decryptLanes(dsts, srcs [][]byte) {
	if width := laneWidth(batchImpl); width > 0 && len(srcs) > 1 {
		c.runLanes(dsts, srcs, true, batchImpl, width)
		return
	}
	c.decryptLanesGeneric(dsts, srcs)
}

// encryptLanesGeneric and decryptLanesGeneric run the batch one message at a
// time.
func (c *Cipher) encryptLanesGeneric(dsts, srcs [][]byte) {
	for i := range srcs {
		encryptChain(&c.k, encRegion(dsts, srcs, i))
	}
}

func (c *Cipher) decryptLanesGeneric(dsts, srcs [][]byte) {
	for i := range srcs {
		if b := decRegion(dsts, srcs, i); b != nil {
			decryptChain(&c.k, b, b)
		}
	}
}

// lanes is the memory the lane kernels work on; its layout is fixed by
// _asm/avx512.go.
type lanes struct {
	ptrs    [16]*byte
	strides [16]uint64
	state   [64]uint32
	scratch [64]byte // where idle lanes read and write (a kernel loads 64 bytes at once)
}

// runLanes runs every message's region (encRegion or decRegion; nil ones
// are skipped) through the lane kernel of impl, width lanes at a time. A lane whose message ends
// takes the next message; lanes with nothing left idle on a scratch block.
// Each call runs as many blocks as the shortest active message has left.
func (c *Cipher) runLanes(dsts, srcs [][]byte, decrypt bool, impl, width int) {
	var (
		l      lanes
		buf    [16][]byte // each lane's region
		pos    [16]int    // each lane's next block offset in bytes
		next   int        // next message to start
		active int
	)
	for {
		steps := -1
		active = 0
		for j := range width {
			if pos[j] == len(buf[j]) {
				buf[j], pos[j] = nil, 0
				for next < len(srcs) && buf[j] == nil {
					if decrypt {
						buf[j] = decRegion(dsts, srcs, next)
					} else {
						buf[j] = encRegion(dsts, srcs, next)
					}
					next++
				}
				if buf[j] != nil {
					// A new message: chaining state starts at zero.
					l.state[j], l.state[16+j], l.state[32+j], l.state[48+j] = 0, 0, 0, 0
				}
			}
			if buf[j] == nil {
				l.ptrs[j], l.strides[j] = &l.scratch[0], 0
				continue
			}
			active++
			l.ptrs[j], l.strides[j] = &buf[j][pos[j]], BlockSize
			if left := (len(buf[j]) - pos[j]) / BlockSize; steps < 0 || left < steps {
				steps = left
			}
		}
		if active == 0 {
			return
		}
		runKernel(impl, decrypt, &c.k, &l.ptrs, &l.strides, &l.state, steps)
		for j := range width {
			if buf[j] != nil {
				pos[j] += steps * BlockSize
			}
		}
	}
}

// encryptLanesGo is the portable twin of the assembly lane kernels: the same
// contract, one lane after another. Idle lanes (stride 0) are skipped.
func encryptLanesGo(k *[4]uint32, ptrs *[16]*byte, strides *[16]uint64, state *[64]uint32, nblocks int) {
	for j := range 16 {
		if strides[j] == 0 {
			continue
		}
		buf := unsafe.Slice(ptrs[j], nblocks*BlockSize)
		cprev := uint64(state[j])<<32 | uint64(state[16+j])
		xprev := uint64(state[32+j])<<32 | uint64(state[48+j])
		for b := range nblocks {
			blk := buf[b*BlockSize : (b+1)*BlockSize]
			x := binary.BigEndian.Uint64(blk) ^ cprev
			binary.BigEndian.PutUint64(blk, x)
			encryptChainGeneric(k, blk)
			// encryptChainGeneric on one block with zero state gives E(x).
			cprev = binary.BigEndian.Uint64(blk) ^ xprev
			binary.BigEndian.PutUint64(blk, cprev)
			xprev = x
		}
		state[j], state[16+j] = uint32(cprev>>32), uint32(cprev)
		state[32+j], state[48+j] = uint32(xprev>>32), uint32(xprev)
	}
}

// decryptLanesGo is the decrypting twin of encryptLanesGo.
func decryptLanesGo(k *[4]uint32, ptrs *[16]*byte, strides *[16]uint64, state *[64]uint32, nblocks int) {
	for j := range 16 {
		if strides[j] == 0 {
			continue
		}
		buf := unsafe.Slice(ptrs[j], nblocks*BlockSize)
		cprev := uint64(state[j])<<32 | uint64(state[16+j])
		xprev := uint64(state[32+j])<<32 | uint64(state[48+j])
		for b := range nblocks {
			blk := buf[b*BlockSize : (b+1)*BlockSize]
			c := binary.BigEndian.Uint64(blk)
			binary.BigEndian.PutUint64(blk, c^xprev)
			decryptChainGeneric(k, blk, blk)
			// decryptChainGeneric on one block with zero state gives D(.).
			x := binary.BigEndian.Uint64(blk)
			binary.BigEndian.PutUint64(blk, x^cprev)
			xprev, cprev = x, c
		}
		state[j], state[16+j] = uint32(cprev>>32), uint32(cprev)
		state[32+j], state[48+j] = uint32(xprev>>32), uint32(xprev)
	}
}
