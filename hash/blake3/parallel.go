package blake3

import (
	"runtime"
	"sync"
	"sync/atomic"
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
// (about 1 KiB per goroutine). With GOMAXPROCS=1, or for shorter inputs,
// it is Sum256.
//
// A subtree handed to a goroutine that has not started by the time the
// caller needs it is hashed by the caller itself, so a machine whose other
// cores are busy costs little more than Sum256.
func Sum256Parallel(data []byte) [32]byte {
	procs := runtime.GOMAXPROCS(0)
	if len(data) < parallelMin || procs < 2 {
		return Sum256(data)
	}
	// About eight subtrees per thread, for balance.
	piece := max(parallelPiece, len(data)/(8*procs))
	cvs := new([2 * maxSIMD * outLen]byte)
	n := compressSubtreeWideParallel(data, &iv, 0, 0, cvs[:], piece)
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
// of every split of an input of at least 2*piece bytes offered to a new
// goroutine; whichever of that goroutine and the caller claims it first
// hashes it.
func compressSubtreeWideParallel(input []byte, key *[8]uint32, counter uint64, flags uint32, out []byte, piece int) int {
	if len(input) < 2*piece {
		return compressSubtreeWide(input, key, counter, flags, out)
	}
	l := leftLen(len(input))
	degree := max(simdDegree, 2)
	cvs := new([2 * maxSIMD * outLen]byte)
	var nl int
	var claimed atomic.Bool
	left := func() {
		if claimed.CompareAndSwap(false, true) {
			nl = compressSubtreeWideParallel(input[:l], key, counter, flags, cvs[:], piece)
		}
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		left()
	}()
	nr := compressSubtreeWideParallel(input[l:], key, counter+uint64(l/chunkLen), flags, cvs[degree*outLen:], piece)
	left()
	wg.Wait()
	return compressParentsParallel(cvs[:(nl+nr)*outLen], key, flags, out)
}
