//go:build !amd64 || purego

package tea

// hasChainAsm reports that this build has no assembly chain.
const hasChainAsm = false

// useChainAsm is never read without assembly; tests may set it.
var useChainAsm = false

func encryptChain(k *[4]uint32, buf []byte) { encryptChainGeneric(k, buf) }

func encryptChainFrom(k *[4]uint32, buf []byte, c, x uint64) {
	encryptChainFromGeneric(k, buf, c, x)
}

func decryptChain(k *[4]uint32, dst, src []byte) { decryptChainGeneric(k, dst, src) }

// useReserve makes Encrypt take first blocks from the Cipher's reserve;
// without assembly kernels that would not be faster, but tests switch it on.
var useReserve = false

// batchImpl is the batch implementation in use; tests switch it.
var batchImpl = batchGeneric

func batchImpls() []int { return []int{batchGeneric, batchLanesGo} }

// laneWidth returns the number of lanes of impl, 0 for batchGeneric.
func laneWidth(impl int) int {
	if impl == batchLanesGo {
		return 16
	}
	return 0
}

// encryptBlocks enciphers 16 independent blocks in v (high words, then low
// words).
func encryptBlocks(_ int, k *[4]uint32, v *[32]uint32) { encryptBlocksGo(k, v) }

// decryptBlocks deciphers 16 independent blocks in v (high words, then low
// words).
func decryptBlocks(_ int, k *[4]uint32, v *[32]uint32) { decryptBlocksGo(k, v) }

// runKernel calls the Go lane kernel.
func runKernel(_ int, decrypt bool, k *[4]uint32, ins, outs *[16]*byte, strides *[16]uint64, state *[64]uint32, nblocks int) {
	if decrypt {
		decryptLanesGo(k, ins, outs, strides, state, nblocks)
		return
	}
	encryptLanesGo(k, ins, outs, strides, state, nblocks)
}
