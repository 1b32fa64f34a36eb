//go:build amd64 && !purego

package tea

import "golang.org/x/sys/cpu"

// hasChainAsm reports that this build has the assembly single-message
// chain (plain amd64, no CPU feature needed).
const hasChainAsm = true

// useChainAsm selects it; tests switch it off to run the generic code.
var useChainAsm = true

func encryptChain(k *[4]uint32, buf []byte) {
	encryptChainFrom(k, buf, 0, 0)
}

func encryptChainFrom(k *[4]uint32, buf []byte, c, x uint64) {
	if useChainAsm {
		encryptChainAsm(k, buf[:len(buf)&^7], c, x)
		return
	}
	encryptChainFromGeneric(k, buf, c, x)
}

func decryptChain(k *[4]uint32, dst, src []byte) {
	if useChainAsm {
		n := min(len(dst), len(src)) &^ 7
		decryptChainAsm(k, dst[:n], src[:n])
		return
	}
	decryptChainGeneric(k, dst, src)
}

var (
	hasAVX2   = cpu.X86.HasAVX2
	hasAVX512 = cpu.X86.HasAVX512F && cpu.X86.HasAVX512VL && cpu.X86.HasMOVBE
)

// useReserve makes Encrypt take first blocks from the Cipher's reserve,
// computed by the batch kernels; tests switch it.
var useReserve = hasAVX2 || hasAVX512

// batchImpl is the batch implementation in use; tests switch it.
var batchImpl = bestBatchImpl()

func bestBatchImpl() int {
	switch {
	case hasAVX512:
		return batchAVX512
	case hasAVX2:
		return batchAVX2
	}
	return batchGeneric
}

// batchImpls lists the implementations this machine can run.
func batchImpls() []int {
	impls := []int{batchGeneric, batchLanesGo}
	if hasAVX2 {
		impls = append(impls, batchAVX2)
	}
	if hasAVX512 {
		impls = append(impls, batchAVX512)
	}
	return impls
}

// laneWidth returns the number of lanes of impl, 0 for batchGeneric.
func laneWidth(impl int) int {
	switch impl {
	case batchAVX512, batchAVX2, batchLanesGo:
		return 16
	}
	return 0
}

// encryptBlocks enciphers 16 independent blocks in v (high words, then low
// words) with the kernel of impl.
func encryptBlocks(impl int, k *[4]uint32, v *[32]uint32) {
	switch impl {
	case batchAVX512:
		encryptBlocksAVX512(k, v)
	case batchAVX2:
		encryptBlocksAVX2(k, v)
	default:
		encryptBlocksGo(k, v)
	}
}

// decryptBlocks deciphers 16 independent blocks in v (high words, then low
// words) with the kernel of impl.
func decryptBlocks(impl int, k *[4]uint32, v *[32]uint32) {
	switch impl {
	case batchAVX512:
		decryptBlocksAVX512(k, v)
	case batchAVX2:
		decryptBlocksAVX2(k, v)
	default:
		decryptBlocksGo(k, v)
	}
}

// runKernel calls the lane kernel of impl directly (a call through a
// function value would make its arguments escape).
func runKernel(impl int, decrypt bool, k *[4]uint32, ins, outs *[16]*byte, strides *[16]uint64, state *[64]uint32, nblocks int) {
	switch {
	case impl == batchAVX512 && decrypt:
		decryptLanesAVX512(k, ins, outs, strides, state, nblocks)
	case impl == batchAVX512:
		encryptLanesAVX512(k, ins, outs, strides, state, nblocks)
	case impl == batchAVX2 && decrypt:
		decryptLanesAVX2(k, ins, outs, strides, state, nblocks)
	case impl == batchAVX2:
		encryptLanesAVX2(k, ins, outs, strides, state, nblocks)
	case decrypt:
		decryptLanesGo(k, ins, outs, strides, state, nblocks)
	default:
		encryptLanesGo(k, ins, outs, strides, state, nblocks)
	}
}
