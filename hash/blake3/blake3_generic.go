package blake3

import (
	"encoding/binary"
	"math/bits"
)

// This file holds the portable kernels. They are the reference every
// assembly kernel is tested against, and the implementation used by the
// purego build and on other architectures.

// g is the BLAKE3 quarter-round.
func g(a, b, c, d, mx, my uint32) (uint32, uint32, uint32, uint32) {
	a += b + mx
	d = bits.RotateLeft32(d^a, -16)
	c += d
	b = bits.RotateLeft32(b^c, -12)
	a += b + my
	d = bits.RotateLeft32(d^a, -8)
	c += d
	b = bits.RotateLeft32(b^c, -7)
	return a, b, c, d
}

// compressGeneric runs the seven rounds on one block and returns the full
// 16-word state before the feed-forward.
func compressGeneric(cv *[8]uint32, m *[16]uint32, counter uint64, blockLen, flags uint32) [16]uint32 {
	v0, v1, v2, v3 := cv[0], cv[1], cv[2], cv[3]
	v4, v5, v6, v7 := cv[4], cv[5], cv[6], cv[7]
	v8, v9, v10, v11 := iv[0], iv[1], iv[2], iv[3]
	v12, v13, v14, v15 := uint32(counter), uint32(counter>>32), blockLen, flags
	m0, m1, m2, m3 := m[0], m[1], m[2], m[3]
	m4, m5, m6, m7 := m[4], m[5], m[6], m[7]
	m8, m9, m10, m11 := m[8], m[9], m[10], m[11]
	m12, m13, m14, m15 := m[12], m[13], m[14], m[15]
	for r := 0; r < 7; r++ {
		v0, v4, v8, v12 = g(v0, v4, v8, v12, m0, m1)
		v1, v5, v9, v13 = g(v1, v5, v9, v13, m2, m3)
		v2, v6, v10, v14 = g(v2, v6, v10, v14, m4, m5)
		v3, v7, v11, v15 = g(v3, v7, v11, v15, m6, m7)
		v0, v5, v10, v15 = g(v0, v5, v10, v15, m8, m9)
		v1, v6, v11, v12 = g(v1, v6, v11, v12, m10, m11)
		v2, v7, v8, v13 = g(v2, v7, v8, v13, m12, m13)
		v3, v4, v9, v14 = g(v3, v4, v9, v14, m14, m15)
		// Apply the message permutation for the next round.
		m0, m1, m2, m3, m4, m5, m6, m7, m8, m9, m10, m11, m12, m13, m14, m15 =
			m2, m6, m3, m10, m7, m0, m4, m13, m1, m11, m12, m5, m9, m14, m15, m8
	}
	return [16]uint32{v0, v1, v2, v3, v4, v5, v6, v7, v8, v9, v10, v11, v12, v13, v14, v15}
}

func loadBlock(m *[16]uint32, p []byte) {
	_ = p[63]
	for i := range m {
		m[i] = binary.LittleEndian.Uint32(p[4*i:])
	}
}

// compressFullGeneric writes the 64-byte extended output of one block.
func compressFullGeneric(out *[64]byte, cv *[8]uint32, block *[64]byte, counter uint64, blockLen, flags uint32) {
	var m [16]uint32
	loadBlock(&m, block[:])
	s := compressGeneric(cv, &m, counter, blockLen, flags)
	for i := 0; i < 8; i++ {
		binary.LittleEndian.PutUint32(out[4*i:], s[i]^s[i+8])
		binary.LittleEndian.PutUint32(out[32+4*i:], s[i+8]^cv[i])
	}
}

// compressChainGeneric compresses the full 64-byte blocks of p in sequence,
// each with block length 64, updating cv in place. flagsStart is added to
// the first block's flags and flagsEnd to the last one's.
func compressChainGeneric(cv *[8]uint32, p []byte, counter uint64, flags, flagsStart, flagsEnd uint32) {
	var m [16]uint32
	n := len(p) / BlockSize
	for i := 0; i < n; i++ {
		f := flags
		if i == 0 {
			f |= flagsStart
		}
		if i == n-1 {
			f |= flagsEnd
		}
		loadBlock(&m, p[i*BlockSize:])
		s := compressGeneric(cv, &m, counter, BlockSize, f)
		for j := 0; j < 8; j++ {
			cv[j] = s[j] ^ s[j+8]
		}
	}
}

// compressChainOutGeneric compresses the full blocks of p and then last,
// of lastLen bytes, in sequence from cv (which it leaves unchanged),
// flagsStart added to the first block's flags and flagsEnd to the last's,
// and writes the last block's 64-byte extended output to out.
func compressChainOutGeneric(out *[64]byte, cv *[8]uint32, p []byte, last *[64]byte, counter uint64, lastLen, flags, flagsStart, flagsEnd uint32) {
	c := *cv
	if len(p) >= BlockSize {
		compressChainGeneric(&c, p, counter, flags, flagsStart, 0)
		flagsStart = 0
	}
	compressFullGeneric(out, &c, last, counter, lastLen, flags|flagsStart|flagsEnd)
}

func putCV(out []byte, cv *[8]uint32) {
	_ = out[31]
	for i, w := range cv {
		binary.LittleEndian.PutUint32(out[4*i:], w)
	}
}

// hashChunksGeneric writes the chaining values of the full chunks of input
// (chunk i has counter counter+i), then of tail, a partial chunk that may
// be empty, to out, 32 bytes each.
func hashChunksGeneric(input, tail []byte, key *[8]uint32, counter uint64, flags uint32, out []byte) {
	for i := 0; i+chunkLen <= len(input); i += chunkLen {
		cv := *key
		compressChainGeneric(&cv, input[i:i+chunkLen], counter, flags, flagChunkStart, flagChunkEnd)
		putCV(out, &cv)
		out = out[outLen:]
		counter++
	}
	if len(tail) > 0 {
		o := chunkOutput(tail, key, counter, flags)
		cv := o.chainingValue()
		putCV(out, &cv)
	}
}

// hashParentsGeneric merges each pair of adjacent chaining values in cvs
// (64 bytes per pair) into its parent's chaining value, written to out.
func hashParentsGeneric(cvs []byte, key *[8]uint32, flags uint32, out []byte) {
	for i := 0; i+2*outLen <= len(cvs); i += 2 * outLen {
		cv := *key
		compressChainGeneric(&cv, cvs[i:i+2*outLen], 0, flags|flagParent, 0, 0)
		putCV(out, &cv)
		out = out[outLen:]
	}
}
