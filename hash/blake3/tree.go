package blake3

import (
	"encoding/binary"
	"math/bits"
)

const (
	chunkLen = 1024
	outLen   = 32
	// maxDepth is the height of a tree of 2^54 chunks (2^64 bytes).
	maxDepth = 54
	// maxSIMD is the widest kernel's number of lanes.
	maxSIMD = 16
)

const (
	flagChunkStart        = 1 << 0
	flagChunkEnd          = 1 << 1
	flagParent            = 1 << 2
	flagRoot              = 1 << 3
	flagKeyedHash         = 1 << 4
	flagDeriveKeyContext  = 1 << 5
	flagDeriveKeyMaterial = 1 << 6
)

var iv = [8]uint32{
	0x6A09E667, 0xBB67AE85, 0x3C6EF372, 0xA54FF53A,
	0x510E527F, 0x9B05688C, 0x1F83D9AB, 0x5BE0CD19,
}

// output is a compression not yet run: either the root, whose bytes are
// read with rootBytes, or a node whose chaining value is wanted.
type output struct {
	cv       [8]uint32
	block    [64]byte
	counter  uint64
	blockLen uint32
	flags    uint32
}

func (o *output) chainingValue() [8]uint32 {
	var full [64]byte
	compressFull(&full, &o.cv, &o.block, o.counter, o.blockLen, o.flags)
	var cv [8]uint32
	for i := range cv {
		cv[i] = binary.LittleEndian.Uint32(full[4*i:])
	}
	return cv
}

// rootBytes fills dst with the extended output starting at byte offset off.
func (o *output) rootBytes(dst []byte, off uint64) {
	var full [64]byte
	counter := off / BlockSize
	skip := int(off % BlockSize)
	for len(dst) > 0 {
		if skip == 0 && len(dst) >= BlockSize {
			compressFull((*[64]byte)(dst), &o.cv, &o.block, counter, o.blockLen, o.flags|flagRoot)
			dst = dst[BlockSize:]
		} else {
			compressFull(&full, &o.cv, &o.block, counter, o.blockLen, o.flags|flagRoot)
			n := copy(dst, full[skip:])
			dst = dst[n:]
			skip = 0
		}
		counter++
	}
}

func parentOutput(left, right *[8]uint32, key *[8]uint32, flags uint32) output {
	o := output{cv: *key, blockLen: BlockSize, flags: flags | flagParent}
	putCV(o.block[:32], left)
	putCV(o.block[32:], right)
	return o
}

// chunkState hashes one chunk incrementally. The last block seen is kept in
// buf until more input arrives, since it may need the CHUNK_END flag.
type chunkState struct {
	cv               [8]uint32
	counter          uint64
	buf              [64]byte
	bufLen           uint8
	blocksCompressed uint8
	flags            uint32
}

func (c *chunkState) reset(key *[8]uint32, counter uint64, flags uint32) {
	c.cv = *key
	c.counter = counter
	c.buf = [64]byte{}
	c.bufLen = 0
	c.blocksCompressed = 0
	c.flags = flags
}

func (c *chunkState) len() int {
	return int(c.blocksCompressed)*BlockSize + int(c.bufLen)
}

func (c *chunkState) startFlag() uint32 {
	if c.blocksCompressed == 0 {
		return flagChunkStart
	}
	return 0
}

// update adds p, which must fit in the chunk.
func (c *chunkState) update(p []byte) {
	for len(p) > 0 {
		if c.bufLen == BlockSize {
			compressChain(&c.cv, c.buf[:], c.counter, c.flags, c.startFlag(), 0)
			c.blocksCompressed++
			c.bufLen = 0
			c.buf = [64]byte{}
		}
		if c.bufLen == 0 && len(p) > BlockSize {
			// Compress whole blocks straight from p, keeping the last one.
			n := (len(p) - 1) / BlockSize
			compressChain(&c.cv, p[:n*BlockSize], c.counter, c.flags, c.startFlag(), 0)
			c.blocksCompressed += uint8(n)
			p = p[n*BlockSize:]
		}
		k := copy(c.buf[c.bufLen:], p)
		c.bufLen += uint8(k)
		p = p[k:]
	}
}

func (c *chunkState) output() output {
	return output{
		cv:       c.cv,
		block:    c.buf, // bytes past bufLen are kept zero
		counter:  c.counter,
		blockLen: uint32(c.bufLen),
		flags:    c.flags | c.startFlag() | flagChunkEnd,
	}
}

// chunkOutput returns the output of a single chunk of at most chunkLen
// bytes, without the chunkState's buffering.
func chunkOutput(p []byte, key *[8]uint32, counter uint64, flags uint32) output {
	o := output{cv: *key, counter: counter, flags: flags | flagChunkStart | flagChunkEnd}
	if len(p) > BlockSize {
		n := (len(p) - 1) / BlockSize
		compressChain(&o.cv, p[:n*BlockSize], counter, flags, flagChunkStart, 0)
		p = p[n*BlockSize:]
		o.flags &^= flagChunkStart
	}
	o.blockLen = uint32(copy(o.block[:], p))
	return o
}

// compressChunksParallel hashes input, at most simdDegree chunks of which
// only the last may be partial, writing one chaining value per chunk to out.
func compressChunksParallel(input []byte, key *[8]uint32, counter uint64, flags uint32, out []byte) int {
	n := len(input) / chunkLen
	tail := input[n*chunkLen:]
	hashChunks(input[:n*chunkLen], tail, key, counter, flags, out)
	if len(tail) > 0 {
		n++
	}
	return n
}

// compressParentsParallel merges pairs of chaining values; an odd one out
// is copied through. It returns the number of values written to out.
func compressParentsParallel(cvs []byte, key *[8]uint32, flags uint32, out []byte) int {
	pairs := len(cvs) / (2 * outLen)
	if pairs > 0 {
		hashParents(cvs[:pairs*2*outLen], key, flags, out)
	}
	if len(cvs)%(2*outLen) != 0 {
		copy(out[pairs*outLen:], cvs[pairs*2*outLen:])
		return pairs + 1
	}
	return pairs
}

// leftLen is the length of the left subtree of an input of n > chunkLen
// bytes: the largest power-of-two number of chunks that leaves at least
// one byte for the right.
func leftLen(n int) int {
	full := uint64(n-1) / chunkLen
	return chunkLen << (63 - bits.LeadingZeros64(full))
}

// compressSubtreeWide hashes a subtree of input (whose first chunk has the
// given counter, a multiple of its size in chunks) down to at most
// max(simdDegree, 2) chaining values, written to out, and returns how many.
func compressSubtreeWide(input []byte, key *[8]uint32, counter uint64, flags uint32, out []byte) int {
	if len(input) <= simdDegree*chunkLen {
		return compressChunksParallel(input, key, counter, flags, out)
	}
	l := leftLen(len(input))
	// The right side's CVs go right after the left's: a single-chunk left
	// (only with a one-lane kernel) gives one CV, a larger one gives
	// max(simdDegree, 2).
	degree := max(simdDegree, 2)
	if l == chunkLen {
		degree = 1
	}
	var cvs [2 * maxSIMD * outLen]byte
	nl := compressSubtreeWide(input[:l], key, counter, flags, cvs[:])
	nr := compressSubtreeWide(input[l:], key, counter+uint64(l/chunkLen), flags, cvs[degree*outLen:])
	if nl == 1 {
		// Only with a one-lane kernel: both sides are single CVs.
		copy(out, cvs[:2*outLen])
		return 2
	}
	// nl == degree here, so the right side's CVs follow the left's.
	return compressParentsParallel(cvs[:(nl+nr)*outLen], key, flags, out)
}

// compressSubtreeToParentNode hashes input of more than one chunk down to
// the two chaining values of its root's children.
func compressSubtreeToParentNode(input []byte, key *[8]uint32, counter uint64, flags uint32) [2 * outLen]byte {
	var cvs [2 * maxSIMD * outLen]byte
	n := compressSubtreeWide(input, key, counter, flags, cvs[:])
	var tmp [maxSIMD * outLen]byte
	for n > 2 {
		n = compressParentsParallel(cvs[:n*outLen], key, flags, tmp[:])
		copy(cvs[:], tmp[:n*outLen])
	}
	return [2 * outLen]byte(cvs[:2*outLen])
}

// hashAll returns the root output of a whole input.
func hashAll(input []byte, key *[8]uint32, flags uint32) output {
	if len(input) <= chunkLen {
		return chunkOutput(input, key, 0, flags)
	}
	var pair [2 * outLen]byte
	if !hashSmallTree(&pair, input, key, flags, nil) {
		pair = compressSubtreeToParentNode(input, key, 0, flags)
	}
	return output{cv: *key, block: pair, blockLen: BlockSize, flags: flags | flagParent}
}
