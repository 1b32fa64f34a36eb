package blake3

import (
	"runtime"
	"sync"
)

const (
	// parallelMin is the input length from which Sum256Parallel uses more
	// than one goroutine; below it the goroutines cost more than they save.
	parallelMin = 1 << 20
	// parallelPiece is the smallest subtree handed to its own goroutine.
	parallelPiece = 128 << 10
)

// Sum256Parallel returns the same hash as Sum256, but for inputs of 1 MiB
// and more it hashes subtrees on up to GOMAXPROCS goroutines at once. It
// returns only when all of them have finished. Unlike Sum256 it allocates
// (a few KiB per MiB of input). With GOMAXPROCS=1, or for shorter inputs,
// it is Sum256.
func Sum256Parallel(data []byte) [32]byte {
	if len(data) < parallelMin || runtime.GOMAXPROCS(0) < 2 {
		return Sum256(data)
	}
	cvs := new([2 * maxSIMD * outLen]byte)
	n := compressSubtreeWideParallel(data, &iv, 0, 0, cvs[:])
	var tmp [maxSIMD * outLen]byte
	for n > 2 {
		n = compressParentsParallel(cvs[:n*outLen], &iv, 0, tmp[:])
		copy(cvs[:], tmp[:n*outLen])
	}
	o := output{cv: iv, block: [64]byte(cvs[:2*outLen]), blockLen: BlockSize, flags: flagParent}
	var full [64]byte
	compressFull(&full, &o.cv, &o.block, 0, o.blockLen, o.flags|flagRoot)
	return [32]byte(full[:32])
}

// compressSubtreeWideParallel is compressSubtreeWide with the left subtree
// of every split at least 2*parallelPiece long hashed on its own goroutine.
// The Go scheduler spreads them over GOMAXPROCS threads.
func compressSubtreeWideParallel(input []byte, key *[8]uint32, counter uint64, flags uint32, out []byte) int {
	if len(input) < 2*parallelPiece {
		return compressSubtreeWide(input, key, counter, flags, out)
	}
	l := leftLen(len(input))
	degree := max(simdDegree, 2)
	cvs := new([2 * maxSIMD * outLen]byte)
	var nl int
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		nl = compressSubtreeWideParallel(input[:l], key, counter, flags, cvs[:])
	}()
	nr := compressSubtreeWideParallel(input[l:], key, counter+uint64(l/chunkLen), flags, cvs[degree*outLen:])
	wg.Wait()
	return compressParentsParallel(cvs[:(nl+nr)*outLen], key, flags, out)
}
