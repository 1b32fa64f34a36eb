//go:build !amd64 || purego

package blake3

// Without assembly every kernel is the portable one.

const (
	implGeneric = iota
	implMax     = implGeneric
)

var implNames = [...]string{"generic"}

// impl is the level in use and simdDegree the number of chunks the widest
// kernel hashes at once.
var (
	impl       = implGeneric
	simdDegree = 1
)

// setImpl forces an implementation level; without assembly only
// implGeneric exists. It reports whether the level is available.
func setImpl(level int) bool {
	if level != implGeneric {
		return false
	}
	impl = level
	return true
}

// bestImpl is the level chosen at init.
func bestImpl() int { return implGeneric }

func compressFull(out *[64]byte, cv *[8]uint32, block *[64]byte, counter uint64, blockLen, flags uint32) {
	compressFullGeneric(out, cv, block, counter, blockLen, flags)
}

func compressChain(cv *[8]uint32, p []byte, counter uint64, flags, flagsStart, flagsEnd uint32) {
	compressChainGeneric(cv, p, counter, flags, flagsStart, flagsEnd)
}

func compressChainOut(out *[64]byte, cv *[8]uint32, p []byte, last *[64]byte, counter uint64, lastLen, flags, flagsStart, flagsEnd uint32) {
	compressChainOutGeneric(out, cv, p, last, counter, lastLen, flags, flagsStart, flagsEnd)
}

// hashSmallTree has no fast path without assembly.
func hashSmallTree(pair *[2 * outLen]byte, input []byte, key *[8]uint32, flags uint32, root *[64]byte) bool {
	return false
}

func hashChunks(input, tail []byte, key *[8]uint32, counter uint64, flags uint32, out []byte) {
	hashChunksGeneric(input, tail, key, counter, flags, out)
}

func hashParents(cvs []byte, key *[8]uint32, flags uint32, out []byte) {
	hashParentsGeneric(cvs, key, flags, out)
}
