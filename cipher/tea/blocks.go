package tea

import "encoding/binary"

// Kernels for 16 independent blocks (no chaining), used for first blocks:
// Encrypt's reserve (reserve.go) and the header blocks of DecryptBatch
// (decryptStarts). The assembly versions (AVX-512, AVX2) run the 16 blocks
// in SIMD lanes; encryptBlocks and decryptBlocks choose by batch
// implementation.

// encryptBlocksGo is the portable twin of the encryptBlocks kernels: it
// enciphers 16 independent blocks, v[j] and v[16+j] the high and low words
// of block j.
func encryptBlocksGo(k *[4]uint32, v *[32]uint32) {
	for j := range 16 {
		var b [BlockSize]byte
		binary.BigEndian.PutUint64(b[:], uint64(v[j])<<32|uint64(v[16+j]))
		encryptChainGeneric(k, b[:]) // one block, zero state: E(x)
		x := binary.BigEndian.Uint64(b[:])
		v[j], v[16+j] = uint32(x>>32), uint32(x)
	}
}

// decryptBlocksGo is the portable twin of the decryptBlocks kernels.
func decryptBlocksGo(k *[4]uint32, v *[32]uint32) {
	for j := range 16 {
		x := decryptBlockGo(k, uint64(v[j])<<32|uint64(v[16+j]))
		v[j], v[16+j] = uint32(x>>32), uint32(x)
	}
}
