//go:build amd64 && !purego

package blake3

import "golang.org/x/sys/cpu"

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

// impl is the level in use and simdDegree the number of chunks its widest
// kernel hashes at once; both are set at init from the CPU's features and
// changed only by setImpl in tests and benchmarks.
var (
	impl       int
	simdDegree int
)

func init() { setImpl(bestImpl()) }

// bestImpl returns the widest level this CPU supports.
func bestImpl() int {
	switch {
	case hasAVX512:
		return implAVX512
	case hasAVX2 && hasSSE41:
		return implAVX2
	case hasSSE41:
		return implSSE41
	}
	return implGeneric
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

func hashChunks(input []byte, key *[8]uint32, counter uint64, flags uint32, out []byte) {
	if impl == implGeneric {
		hashChunksGeneric(input, key, counter, flags, out)
		return
	}
	hashMany(input, len(input)/chunkLen, chunkLen, key, counter, 1, flags, flagChunkStart, flagChunkEnd, out)
}

func hashParents(cvs []byte, key *[8]uint32, flags uint32, out []byte) {
	if impl == implGeneric {
		hashParentsGeneric(cvs, key, flags, out)
		return
	}
	hashMany(cvs, len(cvs)/(2*outLen), 2*outLen, key, 0, 0, flags|flagParent, 0, 0, out)
}

// hashMany hashes n inputs of stride bytes (whole blocks) laid out one
// after the other in input, input i with counter counter+i*inc, writing
// their chaining values to out. Groups of more than one input go to the
// widest kernel that fits, unused lanes repeating the first input.
func hashMany(input []byte, n, stride int, key *[8]uint32, counter, inc uint64, flags, flagsStart, flagsEnd uint32, out []byte) {
	blocks := stride / BlockSize
	for n > 0 {
		switch {
		case n > 8 && impl >= implAVX512:
			k := min(n, 16)
			var ptrs [16]*byte
			var ctr [32]uint32
			for i := range ptrs {
				j := i
				if j >= k {
					j = 0
				}
				ptrs[i] = &input[j*stride]
				c := counter + uint64(i)*inc
				ctr[i], ctr[16+i] = uint32(c), uint32(c>>32)
			}
			if k == 16 && len(out) >= 16*outLen {
				hash16AVX512(&ptrs, blocks, key, &ctr, flags, flagsStart, flagsEnd, (*[512]byte)(out))
			} else {
				var tmp [512]byte
				hash16AVX512(&ptrs, blocks, key, &ctr, flags, flagsStart, flagsEnd, &tmp)
				copy(out[:k*outLen], tmp[:])
			}
			n, input, out, counter = n-k, input[k*stride:], out[k*outLen:], counter+uint64(k)*inc
		case n > 1 && impl >= implAVX2:
			k := min(n, 8)
			var ptrs [8]*byte
			var ctr [16]uint32
			for i := range ptrs {
				j := i
				if j >= k {
					j = 0
				}
				ptrs[i] = &input[j*stride]
				c := counter + uint64(i)*inc
				ctr[i], ctr[8+i] = uint32(c), uint32(c>>32)
			}
			var tmp [256]byte
			dst := &tmp
			if k == 8 && len(out) >= 8*outLen {
				dst = (*[256]byte)(out)
			}
			if impl >= implAVX512 {
				hash8AVX512(&ptrs, blocks, key, &ctr, flags, flagsStart, flagsEnd, dst)
			} else {
				hash8AVX2(&ptrs, blocks, key, &ctr, flags, flagsStart, flagsEnd, dst)
			}
			if dst == &tmp {
				copy(out[:k*outLen], tmp[:])
			}
			n, input, out, counter = n-k, input[k*stride:], out[k*outLen:], counter+uint64(k)*inc
		default:
			cv := *key
			compressChain(&cv, input[:stride], counter, flags, flagsStart, flagsEnd)
			putCV(out, &cv)
			n, input, out, counter = n-1, input[stride:], out[outLen:], counter+inc
		}
	}
}
