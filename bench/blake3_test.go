package main

import (
	"fmt"
	"slices"
	"testing"

	tendril "github.com/tendril-p2p/tendril/hash/blake3"
	"github.com/tendril-p2p/tendril/internal/testutil"
	zeebo "github.com/zeebo/blake3"
	luke "lukechampine.com/blake3"
)

// The BLAKE3 comparison: one-shot 32-byte hashes of the same buffer, side
// by side. Compare with
//
//	go test -run XXX -bench BLAKE3$ -count 6 -cpu 1 . > blake3.txt && benchstat -col /lib blake3.txt
//
// and the multi-core rows with -bench BLAKE3Parallel -cpu 2. 2 KiB is two
// chunks, which hash/blake3 runs side by side in one kernel call. Run with
// TENDRIL_BLAKE3=avx2 to measure tendril's AVX2 path on an AVX-512 CPU
// (zeebo/blake3 has no AVX-512 path; lukechampine.com/blake3 uses its own).
var blake3Sizes = []int{64, 1 << 10, 2 << 10, 8 << 10, 64 << 10, 1 << 20}

var blake3Sink [32]byte

// blake3Lib is one library's one-shot 32-byte hash.
type blake3Lib struct {
	name string
	sum  func([]byte) [32]byte
}

func BenchmarkBLAKE3(b *testing.B) {
	benchBLAKE3(b, blake3Sizes, []blake3Lib{
		{"tendril", tendril.Sum256},
		{"zeebo", zeebo.Sum256},
		{"lukechampine", func(p []byte) [32]byte { return luke.Sum256(p) }},
	})
}

// BenchmarkBLAKE3Parallel compares the multi-core hash with the single-core
// ones on long inputs; run it with -cpu 2 (or more).
func BenchmarkBLAKE3Parallel(b *testing.B) {
	benchBLAKE3(b, []int{1 << 20, 4 << 20, 16 << 20}, []blake3Lib{
		{"tendril", tendril.Sum256},
		{"tendril-parallel", tendril.Sum256Parallel},
		{"zeebo", zeebo.Sum256},
		{"lukechampine", func(p []byte) [32]byte { return luke.Sum256(p) }},
	})
}

// benchBLAKE3 hashes the first n bytes of the same buffer with every library, for every n
// in sizes, as sub-benchmarks "size=N/lib=NAME".
func benchBLAKE3(b *testing.B, sizes []int, libs []blake3Lib) {
	buf := make([]byte, slices.Max(sizes))
	for i := range buf {
		buf[i] = byte(i)
	}
	for _, n := range sizes {
		for _, lib := range libs {
			b.Run(fmt.Sprintf("size=%s/lib=%s", testutil.SizeName(n), lib.name), func(b *testing.B) {
				b.SetBytes(int64(n))
				b.ReportAllocs()
				for b.Loop() {
					blake3Sink = lib.sum(buf[:n])
				}
			})
		}
	}
}
