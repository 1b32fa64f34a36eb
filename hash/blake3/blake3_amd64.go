//go:build amd64 && !purego

package blake3

import (
	"encoding/binary"
	"os"
	"slices"

	"golang.org/x/sys/cpu"
)

// Implementation levels, from the portable code to the widest kernels.
const (
	implGeneric = iota
	implSSE41   // single-block compression in SSE4.1, one chunk at a time
	implAVX2    // plus 8-way chunk and parent hashing in AVX2
	implAVX512  // AVX-512VL single block, 8-way (ymm) and 16-way (zmm) hashing
	implMax     = implAVX512
)

var implNames = [...]string{"generic", "sse41", "avx2", "avx512"}

var (
	hasSSE41  = cpu.X86.HasSSE41
	hasAVX2   = cpu.X86.HasAVX2
	hasAVX512 = cpu.X86.HasAVX512F && cpu.X86.HasAVX512VL
)

// levelCap is the widest level the environment allows: TENDRIL_BLAKE3,
// read once at start-up, may name one of implNames (generic, sse41, avx2,
// avx512), so that one binary on a wide CPU can run and measure the paths
// of narrower ones. Unset or unknown, it caps nothing.
var levelCap = func() int {
	if i := slices.Index(implNames[:], os.Getenv("TENDRIL_BLAKE3")); i >= 0 {
		return i
	}
	return implMax
}()

// impl is the level in use and simdDegree the number of chunks its widest
// kernel hashes at once; both are set at init from the CPU's features and
// changed only by setImpl in tests and benchmarks.
var (
	impl       int
	simdDegree int
)

func init() { setImpl(bestImpl()) }

// bestImpl returns the widest level this CPU supports, at most levelCap.
func bestImpl() int {
	best := implGeneric
	switch {
	case hasAVX512:
		best = implAVX512
	case hasAVX2 && hasSSE41:
		best = implAVX2
	case hasSSE41:
		best = implSSE41
	}
	return min(best, levelCap)
}

// setImpl forces an implementation level for tests and benchmarks. It
// reports false, changing nothing, if the CPU lacks the level's features.
// It must not be called while hashing is in progress in other goroutines.
func setImpl(level int) bool {
	if level < implGeneric || level > bestImpl() {
		return false
	}
	impl = level
	switch level {
	case implAVX512:
		simdDegree = 16
	case implAVX2:
		simdDegree = 8
	default:
		simdDegree = 1
	}
	return true
}

func compressFull(out *[64]byte, cv *[8]uint32, block *[64]byte, counter uint64, blockLen, flags uint32) {
	switch {
	case impl >= implAVX512:
		compressAVX512(out, cv, block, counter, blockLen, flags)
	case impl >= implSSE41:
		compressSSE41(out, cv, block, counter, blockLen, flags)
	default:
		compressFullGeneric(out, cv, block, counter, blockLen, flags)
	}
}

func compressChain(cv *[8]uint32, p []byte, counter uint64, flags, flagsStart, flagsEnd uint32) {
	n := len(p) / BlockSize
	if n == 0 {
		return
	}
	switch {
	case impl >= implAVX512:
		chainAVX512(cv, &p[0], n, counter, flags, flagsStart, flagsEnd)
	case impl >= implSSE41:
		chainSSE41(cv, &p[0], n, counter, flags, flagsStart, flagsEnd)
	default:
		compressChainGeneric(cv, p, counter, flags, flagsStart, flagsEnd)
	}
}

// compressChainOut compresses the full blocks of p and then last, of
// lastLen bytes, in sequence from cv (left unchanged), flagsStart added to
// the first block's flags and flagsEnd to the last's, and writes the last
// block's 64-byte extended output to out: a chunk's root output in one
// call.
func compressChainOut(out *[64]byte, cv *[8]uint32, p []byte, last *[64]byte, counter uint64, lastLen, flags, flagsStart, flagsEnd uint32) {
	n := len(p) / BlockSize
	var p0 *byte
	if n > 0 {
		p0 = &p[0]
	}
	switch {
	case impl >= implAVX512:
		chainOutAVX512(out, cv, p0, n, last, counter, lastLen, flags, flagsStart, flagsEnd)
	case impl >= implSSE41:
		chainOutSSE41(out, cv, p0, n, last, counter, lastLen, flags, flagsStart, flagsEnd)
	default:
		compressChainOutGeneric(out, cv, p, last, counter, lastLen, flags, flagsStart, flagsEnd)
	}
}

// chain2 runs two chains side by side in one kernel call (chain2AVX512,
// or chain2AVX2 below AVX-512; see their documentation).
func chain2(cvs *[16]uint32, p0, last0, p1, last1 *byte, lp *[14]uint32) {
	if impl >= implAVX512 {
		chain2AVX512(cvs, p0, last0, p1, last1, lp)
		return
	}
	chain2AVX2(cvs, p0, last0, p1, last1, lp)
}

// chain2Root is chain2 followed by the root compression of the two
// chaining values (chain2RootAVX512, chain2RootAVX2).
func chain2Root(cvs *[16]uint32, p0, last0, p1, last1 *byte, lp *[14]uint32, out *[64]byte, rootFlags, swap uint32) {
	if impl >= implAVX512 {
		chain2RootAVX512(cvs, p0, last0, p1, last1, lp, out, rootFlags, swap)
		return
	}
	chain2RootAVX2(cvs, p0, last0, p1, last1, lp, out, rootFlags, swap)
}

// chain2Tail returns the longest tail, in blocks, that hashMany lets
// follow two full inputs on its own after their chain2 call, rather than
// giving all three to an 8-way kernel call. With AVX-512 that is 8. With
// AVX2 a tail block costs about a sixth of the 8-way call's 16 steps, and
// 2 full chunks and a tail of 1-2 blocks were 10-12% faster through chain2,
// 4 blocks as fast or slower (alternated on a Zen 5 with the level capped
// at AVX2; not measured on a CPU without AVX-512).
func chain2Tail() uint32 {
	if impl >= implAVX512 {
		return 8
	}
	return 2
}

// chain2Params lays out chain2's parameters: the counters, numbers
// of blocks and last block lengths of chains 0 and 1, their flags, and
// the flags added to their first and to their last block.
func chain2Params(c0, c1 uint64, n0, n1, len0, len1, flags0, flags1, start0, start1, end0, end1 uint32) [14]uint32 {
	return [14]uint32{uint32(c0), uint32(c0 >> 32), uint32(c1), uint32(c1 >> 32), n0, n1, len0, len1,
		flags0, flags1, start0, start1, end0, end1}
}

// smallTreeTail is the longest partial third chunk, in blocks, that
// hashSmallTree takes after two full ones: each of its blocks adds a step
// (about 60 ns here) to the two chunks' chain2 pass, and at 13-14 blocks
// the total meets that of the 8-way kernel's three-lane pass (measured),
// so the time has no step there.
const smallTreeTail = 13

// shortTail is the longest partial chunk, in blocks, that hashSmallTree
// runs next to the root of 4, 8 or 16 full chunks: each block is a chain2
// step there, against a fixed cost of about four steps for carrying it
// through the kernel pass and one more level (measured: equal at 8192+4
// blocks).
const shortTail = 4

// hashSmallTree writes the chaining values of the root's two children to
// pair, for the input shapes that chain2 makes cheaper than the general
// path; it reports false, doing nothing, for any other input or below
// AVX2. If root is not nil, it writes the first 64 bytes of the root output
// there instead (pair is then left unset), compressing the root in the
// last chain2 call where there is one. The shapes:
//   - two chunks, the second possibly partial: one chain2 call (AVX2 and
//     AVX-512; the shapes below are measured and taken with AVX-512 only);
//   - 2^k full chunks and a partial one (k = 1 and at most smallTreeTail
//     blocks; k = 2, 3 or 4 and at most shortTail; k >= 5): the full chunks'
//     subtree down to its root's two children, then one chain2 call running
//     the partial chunk next to that root, where the general path would
//     hash the partial chunk alone (or carry it through the kernel pass)
//     and merge it one level further down;
//   - 16 full chunks and a longer partial one: one 16-way pass that runs
//     the partial chunk as its interleaved chain, then the parent levels.
func hashSmallTree(pair *[2 * outLen]byte, input []byte, key *[8]uint32, flags uint32, root *[64]byte) bool {
	if impl < implAVX2 || len(input) <= chunkLen {
		return false
	}
	if len(input) <= 2*chunkLen {
		hashTwoChunks(pair, input, key, flags, root)
		return true
	}
	if impl < implAVX512 {
		return root != nil && topFour(input, key, flags, root)
	}
	full := (len(input) - 1) / chunkLen
	tail := input[full*chunkLen:]
	switch {
	case full == 2 && len(tail) <= smallTreeTail*BlockSize:
	case (full == 4 || full == 8 || full == 16) && len(tail) <= shortTail*BlockSize:
	case full == 16:
		// One 16-way pass with the tail as its interleaved chain (the
		// general path splits the tail off as a subtree of its own), then
		// the parent levels; 8 full chunks take that path by themselves.
		var cvs [17 * outLen]byte
		hashChunks(input[:full*chunkLen], tail, key, 0, flags, cvs[:])
		var tmp [16 * outLen]byte
		for n := 17; n > 2; {
			n = compressParentsParallel(cvs[:n*outLen], key, flags, tmp[:])
			copy(cvs[:], tmp[:n*outLen])
		}
		*pair = [2 * outLen]byte(cvs[:2*outLen])
		if root != nil {
			compressFull(root, key, pair, 0, BlockSize, flags|flagParent|flagRoot)
		}
		return true
	case full >= 32 && full&(full-1) == 0:
	default:
		return false
	}
	var left [2 * outLen]byte
	if full == 2 {
		hashTwoChunks(&left, input[:2*chunkLen], key, flags, nil)
	} else {
		left = compressSubtreeToParentNode(input[:full*chunkLen], key, 0, flags)
	}
	n0 := uint32(len(tail)+BlockSize-1) / BlockSize
	len0 := uint32(len(tail)) - (n0-1)*BlockSize
	var block [BlockSize]byte
	copy(block[:], tail[(n0-1)*BlockSize:])
	var cvs [16]uint32
	copy(cvs[:8], key[:])
	copy(cvs[8:], key[:])
	lp := chain2Params(uint64(full), 0, n0, 1, len0, BlockSize, flags, flags|flagParent, flagChunkStart, 0, flagChunkEnd, 0)
	chain2Last(pair, root, &cvs, &tail[0], &block[0], &left[0], &left[0], &lp, flags, true)
	return true
}

// topFour writes the root output of an input of more than two chunks to
// root if its tree narrows to four chaining values on the way to the root
// (every input of 4 * 2^k full chunks does; it reports false, doing
// nothing, otherwise): the subtree down to those four, then one
// chain2Root call for the two parents and the root. The general path
// makes the last two levels two calls and a Go round trip each (a chain2
// call through hashMany, then compressFull). At 8 KiB the levels above the
// chunks were a fifth of the time on a Zen 3 (4 parents 180 ns, 2 parents
// 190, the root 66, beside 2,100 for the chunks); one call instead of the
// last two took about 2% off (thread CPU time, alternated).
func topFour(input []byte, key *[8]uint32, flags uint32, root *[64]byte) bool {
	full := uint64(len(input)) / chunkLen
	if len(input)%chunkLen != 0 || full < 4 || full&(full-1) != 0 {
		return false
	}
	var cvs [2 * maxSIMD * outLen]byte
	n := compressSubtreeWide(input, key, 0, flags, cvs[:])
	var tmp [maxSIMD * outLen]byte
	for n > 4 {
		n = compressParentsParallel(cvs[:n*outLen], key, flags, tmp[:])
		copy(cvs[:], tmp[:n*outLen])
	}
	var st [16]uint32
	copy(st[:8], key[:])
	copy(st[8:], key[:])
	lp := chain2Params(0, 0, 1, 1, BlockSize, BlockSize, flags|flagParent, flags|flagParent, 0, 0, 0, 0)
	chain2Root(&st, &cvs[0], &cvs[0], &cvs[2*outLen], &cvs[2*outLen], &lp, root, flags|flagParent|flagRoot, 0)
	return true
}

// chain2Last makes the last chain2 call of a small tree: with root nil it
// writes the two chaining values to pair (chain 1's first if swap), else
// the root output of their parent to root.
func chain2Last(pair *[2 * outLen]byte, root *[64]byte, cvs *[16]uint32, p0, last0, p1, last1 *byte, lp *[14]uint32, flags uint32, swap bool) {
	if root != nil {
		s := uint32(0)
		if swap {
			s = 1
		}
		chain2Root(cvs, p0, last0, p1, last1, lp, root, flags|flagParent|flagRoot, s)
		return
	}
	chain2(cvs, p0, last0, p1, last1, lp)
	first, second := (*[8]uint32)(cvs[:8]), (*[8]uint32)(cvs[8:])
	if swap {
		first, second = second, first
	}
	putCV(pair[:outLen], first)
	putCV(pair[outLen:], second)
}

// hashTwoChunks writes the chaining values of the two chunks of an input
// of chunkLen+1 to 2*chunkLen bytes to pair (or, if root is not nil, the
// root output to root), with one chain2 call and no copy but that of a
// partial last block.
func hashTwoChunks(pair *[2 * outLen]byte, input []byte, key *[8]uint32, flags uint32, root *[64]byte) {
	tail := input[chunkLen:]
	n1 := (len(tail) + BlockSize - 1) / BlockSize
	last := tail[(n1-1)*BlockSize:]
	var block [BlockSize]byte
	lastp := &block[0]
	if len(last) == BlockSize {
		lastp = &last[0]
	} else {
		copy(block[:], last)
	}
	var cvs [16]uint32
	copy(cvs[:8], key[:])
	copy(cvs[8:], key[:])
	lp := chain2Params(0, 1, chunkLen/BlockSize, uint32(n1), BlockSize, uint32(len(last)),
		flags, flags, flagChunkStart, flagChunkStart, flagChunkEnd, flagChunkEnd)
	chain2Last(pair, root, &cvs, &input[0], &input[chunkLen-BlockSize], &tail[0], lastp, &lp, flags, false)
}

func hashChunks(input, tail []byte, key *[8]uint32, counter uint64, flags uint32, out []byte) {
	if impl == implGeneric {
		hashChunksGeneric(input, tail, key, counter, flags, out)
		return
	}
	if len(tail) == 0 {
		hashMany(input, len(input)/chunkLen, chunkLen, nil, nil, key, counter, 1, flags, flagChunkStart, flagChunkEnd, out)
		return
	}
	var padded [chunkLen]byte
	copy(padded[:], tail)
	hashMany(input, len(input)/chunkLen, chunkLen, tail, &padded, key, counter, 1, flags, flagChunkStart, flagChunkEnd, out)
}

// tailCV returns the chaining value of a partial chunk of 1 to chunkLen
// bytes with the given counter, in one kernel call.
func tailCV(tail []byte, key *[8]uint32, counter uint64, flags uint32) [8]uint32 {
	n := (len(tail) - 1) / BlockSize
	last := tail[n*BlockSize:]
	var block [BlockSize]byte
	copy(block[:], last)
	var full [64]byte
	if n == 0 {
		compressFull(&full, key, &block, counter, uint32(len(last)), flags|flagChunkStart|flagChunkEnd)
	} else {
		compressChainOut(&full, key, tail[:n*BlockSize], &block, counter, uint32(len(last)), flags, flagChunkStart, flagChunkEnd)
	}
	var cv [8]uint32
	for i := range cv {
		cv[i] = binary.LittleEndian.Uint32(full[4*i:])
	}
	return cv
}

func hashParents(cvs []byte, key *[8]uint32, flags uint32, out []byte) {
	if impl == implGeneric {
		hashParentsGeneric(cvs, key, flags, out)
		return
	}
	hashMany(cvs, len(cvs)/(2*outLen), 2*outLen, nil, nil, key, 0, 0, flags|flagParent, 0, 0, out)
}

// hashMany hashes n inputs of stride bytes (whole blocks) laid out one
// after the other in input, input i with counter counter+i*inc, then, if
// tail is not empty, a last input of at most chunkLen bytes (a partial
// chunk; padded holds it zero-padded to a whole chunk, since every lane of
// the 8- and 16-way kernels reads as many blocks), writing their chaining
// values to out. Groups of more than one input go to the widest kernel
// that fits; the tail rides along as a lane with fewer blocks, and unused
// lanes repeat the first input.
func hashMany(input []byte, n, stride int, tail []byte, padded *[chunkLen]byte, key *[8]uint32, counter, inc uint64, flags, flagsStart, flagsEnd uint32, out []byte) {
	blocks := stride / BlockSize
	tailLen := len(tail)
	var tailBlocks, tailLast uint32
	if tailLen > 0 {
		tailBlocks = uint32(tailLen+BlockSize-1) / BlockSize
		tailLast = uint32(tailLen) - (tailBlocks-1)*BlockSize
	}
	// lane returns the parameters of lane i of a group of k real lanes:
	// the full inputs, then the tail if the group has it.
	lane := func(i, k int) (p *byte, c uint64, last, length uint32) {
		j := i
		if j >= k {
			j = 0
		}
		c = counter + uint64(j)*inc
		if j < n {
			return &input[j*stride], c, uint32(blocks - 1), BlockSize
		}
		return &padded[0], c, tailBlocks - 1, tailLast
	}
	// A group takes the kernel its full inputs call for; the tail joins a
	// group only where the kernel has a lane to spare, and a group of one
	// full input takes a long tail only (a 2-lane 8-way call costs about
	// 1.6 serial chunks here).
	hasTail := tailLen > 0
	longTail := tailBlocks*8 >= uint32(blocks)*5
	if impl == implAVX2 {
		// Whole groups of eight straight into out: no lane closure, no
		// staging buffer and its copy (hashMany and its closure were 5% of
		// a 1 MiB Sum256 in a profile on a Zen 3, 2.9% with this).
		for n >= 8 {
			var ptrs [8]*byte
			var lp [32]uint32
			for i := range ptrs {
				ptrs[i] = &input[i*stride]
				c := counter + uint64(i)*inc
				lp[i], lp[8+i], lp[16+i], lp[24+i] = uint32(c), uint32(c>>32), uint32(blocks-1), BlockSize
			}
			hash8AVX2(&ptrs, blocks, key, &lp, flags, flagsStart, flagsEnd, (*[256]byte)(out))
			n, input, out, counter = n-8, input[8*stride:], out[8*outLen:], counter+8*inc
		}
	}
	for n > 0 || hasTail {
		switch {
		case impl >= implAVX512 && hasTail && (n == 8 || n == 16):
			// A full group and the tail: the tail runs as a chain inside
			// the group's pass, where the kernel has no lane for it.
			var tcv [8]uint32
			tlp := [4]uint32{uint32(counter + uint64(n)*inc), uint32((counter + uint64(n)*inc) >> 32), tailBlocks, tailLast}
			if n == 16 {
				var ptrs [16]*byte
				var lp [64]uint32
				for i := range ptrs {
					var c uint64
					ptrs[i], c, lp[32+i], lp[48+i] = lane(i, 16)
					lp[i], lp[16+i] = uint32(c), uint32(c>>32)
				}
				hash16TailAVX512(&ptrs, blocks, key, &lp, flags, flagsStart, flagsEnd, (*[512]byte)(out), &padded[0], &tlp, &tcv)
			} else {
				var ptrs [8]*byte
				var lp [32]uint32
				for i := range ptrs {
					var c uint64
					ptrs[i], c, lp[16+i], lp[24+i] = lane(i, 8)
					lp[i], lp[8+i] = uint32(c), uint32(c>>32)
				}
				hash8TailAVX512(&ptrs, blocks, key, &lp, flags, flagsStart, flagsEnd, (*[256]byte)(out), &padded[0], &tlp, &tcv)
			}
			putCV(out[n*outLen:], &tcv)
			n, hasTail = 0, false
		case n > 8 && impl >= implAVX512:
			k := min(n, 16)
			withTail := hasTail && k < 16
			lanes := k
			if withTail {
				lanes++
			}
			var ptrs [16]*byte
			var lp [64]uint32
			for i := range ptrs {
				var c uint64
				ptrs[i], c, lp[32+i], lp[48+i] = lane(i, lanes)
				lp[i], lp[16+i] = uint32(c), uint32(c>>32)
			}
			var tmp [512]byte
			hash16AVX512(&ptrs, blocks, key, &lp, flags, flagsStart, flagsEnd, &tmp)
			copy(out[:lanes*outLen], tmp[:])
			out = out[lanes*outLen:]
			n, input, counter = n-k, input[k*stride:], counter+uint64(lanes)*inc
			hasTail = hasTail && !withTail
		case impl >= implAVX2 && (n == 2 && (!hasTail || tailBlocks <= chain2Tail()) || n == 1 && hasTail):
			// Two inputs side by side in one chain2 call: two full ones (a
			// short tail follows on its own: cheaper than a 3-lane 8-way
			// call), or the last full one and the tail.
			var cvs [16]uint32
			for i := range 8 {
				cvs[i], cvs[8+i] = key[i], key[i]
			}
			// Chain 1's blocks from the input, but a partial last one.
			p1, n1, len1 := input[stride:], uint32(blocks), uint32(BlockSize)
			var block [BlockSize]byte
			last1 := &block[0]
			if n == 2 {
				last1 = &p1[(blocks-1)*BlockSize]
			} else {
				p1, n1, len1, hasTail = tail, tailBlocks, tailLast, false
				copy(block[:], tail[(n1-1)*BlockSize:])
			}
			c0, c1 := counter, counter+inc
			lp := chain2Params(c0, c1, uint32(blocks), n1, BlockSize, len1, flags, flags, flagsStart, flagsStart, flagsEnd, flagsEnd)
			chain2(&cvs, &input[0], &input[(blocks-1)*BlockSize], &p1[0], last1, &lp)
			putCV(out, (*[8]uint32)(cvs[:8]))
			putCV(out[outLen:], (*[8]uint32)(cvs[8:]))
			input, out, counter = input[n*stride:], out[2*outLen:], counter+2*inc
			n = 0
		case (n > 1 || (n == 1 && hasTail && longTail)) && impl >= implAVX2:
			k := min(n, 8)
			withTail := hasTail && k < 8
			lanes := k
			if withTail {
				lanes++
			}
			var ptrs [8]*byte
			var lp [32]uint32
			for i := range ptrs {
				var c uint64
				ptrs[i], c, lp[16+i], lp[24+i] = lane(i, lanes)
				lp[i], lp[8+i] = uint32(c), uint32(c>>32)
			}
			var tmp [256]byte
			if impl >= implAVX512 {
				hash8AVX512(&ptrs, blocks, key, &lp, flags, flagsStart, flagsEnd, &tmp)
			} else {
				hash8AVX2(&ptrs, blocks, key, &lp, flags, flagsStart, flagsEnd, &tmp)
			}
			copy(out[:lanes*outLen], tmp[:])
			out = out[lanes*outLen:]
			n, input, counter = n-k, input[k*stride:], counter+uint64(lanes)*inc
			hasTail = hasTail && !withTail
		case n > 0:
			if n == 1 && hasTail {
				// The tail's blocks first: their latency chain overlaps
				// the start of the full input's.
				cv := tailCV(tail, key, counter+inc, flags)
				putCV(out[outLen:], &cv)
				hasTail = false
				out2 := out[:outLen]
				cv = *key
				compressChain(&cv, input[:stride], counter, flags, flagsStart, flagsEnd)
				putCV(out2, &cv)
				n, input, out, counter = 0, input[stride:], out[2*outLen:], counter+2*inc
				continue
			}
			cv := *key
			compressChain(&cv, input[:stride], counter, flags, flagsStart, flagsEnd)
			putCV(out, &cv)
			n, input, out, counter = n-1, input[stride:], out[outLen:], counter+inc
		default:
			cv := tailCV(tail, key, counter, flags)
			putCV(out, &cv)
			hasTail = false
		}
	}
}
