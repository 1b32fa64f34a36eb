package main

import (
	"fmt"
	"testing"

	tendril "github.com/tendril-p2p/tendril/hash/blake3"
	zeebo "github.com/zeebo/blake3"
	luke "lukechampine.com/blake3"
)

// The BLAKE3 comparison: one-shot 32-byte hashes of the same buffer, side
// by side. Compare with
//
//	go test -run XXX -bench BLAKE3$ -count 6 -cpu 1 . > blake3.txt && benchstat -col /lib blake3.txt
//
// and the multi-core rows with -bench BLAKE3Parallel -cpu 2.
var blake3Sizes = []int{64, 1 << 10, 8 << 10, 64 << 10, 1 << 20}

var blake3Sink [32]byte

func sizeName(n int) string {
	switch {
	case n >= 1<<20:
		return fmt.Sprintf("%dMiB", n>>20)
	case n >= 1<<10:
		return fmt.Sprintf("%dKiB", n>>10)
	}
	return fmt.Sprintf("%dB", n)
}

func BenchmarkBLAKE3(b *testing.B) {
	buf := make([]byte, 1<<20)
	for i := range buf {
		buf[i] = byte(i)
	}
	libs := []struct {
		name string
		sum  func([]byte) [32]byte
	}{
		{"tendril", tendril.Sum256},
		{"zeebo", zeebo.Sum256},
		{"lukechampine", func(p []byte) [32]byte { return luke.Sum256(p) }},
	}
	for _, n := range blake3Sizes {
		for _, lib := range libs {
			b.Run(fmt.Sprintf("size=%s/lib=%s", sizeName(n), lib.name), func(b *testing.B) {
				b.SetBytes(int64(n))
				b.ReportAllocs()
				for b.Loop() {
					blake3Sink = lib.sum(buf[:n])
				}
			})
		}
	}
}

// BenchmarkBLAKE3Parallel compares the multi-core hash with the single-core
// ones on long inputs; run it with -cpu 2 (or more).
func BenchmarkBLAKE3Parallel(b *testing.B) {
	buf := make([]byte, 16<<20)
	for i := range buf {
		buf[i] = byte(i)
	}
	libs := []struct {
		name string
		sum  func([]byte) [32]byte
	}{
		{"tendril", tendril.Sum256},
		{"tendril-parallel", tendril.Sum256Parallel},
		{"zeebo", zeebo.Sum256},
		{"lukechampine", func(p []byte) [32]byte { return luke.Sum256(p) }},
	}
	for _, n := range []int{1 << 20, 4 << 20, 16 << 20} {
		for _, lib := range libs {
			b.Run(fmt.Sprintf("size=%s/lib=%s", sizeName(n), lib.name), func(b *testing.B) {
				b.SetBytes(int64(n))
				b.ReportAllocs()
				for b.Loop() {
					blake3Sink = lib.sum(buf[:n])
				}
			})
		}
	}
}
