package blake3

import (
	"fmt"
	"testing"

	"github.com/tendril-p2p/tendril/internal/testutil"
)

var benchSizes = []int{64, 1 << 10, 8 << 10, 64 << 10, 1 << 20}

var benchSink [32]byte

// forEachImplB runs f once per implementation available on this machine.
func forEachImplB(b *testing.B, f func(b *testing.B)) {
	defer setImpl(bestImpl())
	for level := 0; level <= implMax; level++ {
		if !setImpl(level) {
			continue
		}
		b.Run(implNames[level], f)
	}
}

func BenchmarkSum256(b *testing.B) {
	benchEachSize(b, func(b *testing.B, p []byte) {
		for b.Loop() {
			benchSink = Sum256(p)
		}
	})
}

func BenchmarkWrite(b *testing.B) {
	benchEachSize(b, func(b *testing.B, p []byte) {
		h := New()
		for b.Loop() {
			h.Reset()
			h.Write(p)
			h.Sum(benchSink[:0])
		}
	})
}

// benchEachSize runs f for every implementation and every length in benchSizes, on that
// many bytes, counted a loop.
func benchEachSize(b *testing.B, f func(b *testing.B, p []byte)) {
	buf := make([]byte, 1<<20)
	forEachImplB(b, func(b *testing.B) {
		for _, n := range benchSizes {
			b.Run(testutil.SizeName(n), func(b *testing.B) {
				b.SetBytes(int64(n))
				b.ReportAllocs()
				f(b, buf[:n])
			})
		}
	})
}

func BenchmarkXOF(b *testing.B) {
	out := make([]byte, 1<<10)
	h := New()
	b.SetBytes(int64(len(out)))
	b.ReportAllocs()
	for b.Loop() {
		h.XOF().Read(out)
	}
}

// BenchmarkParallel compares Sum256Parallel with Sum256; run with -cpu 1,2.
func BenchmarkParallel(b *testing.B) {
	buf := make([]byte, 16<<20)
	for _, n := range []int{1 << 20, 4 << 20, 16 << 20} {
		b.Run(testutil.SizeName(n)+"/serial", func(b *testing.B) {
			b.SetBytes(int64(n))
			for b.Loop() {
				benchSink = Sum256(buf[:n])
			}
		})
		b.Run(testutil.SizeName(n)+"/parallel", func(b *testing.B) {
			b.SetBytes(int64(n))
			for b.Loop() {
				benchSink = Sum256Parallel(buf[:n])
			}
		})
	}
}

// BenchmarkChain times the single-block chain kernels per block (ns/op is
// per call of n blocks; divide by n), for comparing with their critical path.
func BenchmarkChain(b *testing.B) {
	buf := make([]byte, 256*BlockSize)
	forEachImplB(b, func(b *testing.B) {
		if impl == implGeneric {
			b.Skip("assembly only")
		}
		for _, n := range []int{1, 16, 256} {
			b.Run(fmt.Sprintf("blocks=%d", n), func(b *testing.B) {
				b.SetBytes(int64(n * BlockSize))
				cv := iv
				for b.Loop() {
					compressChain(&cv, buf[:n*BlockSize], 0, 0, flagChunkStart, flagChunkEnd)
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/block")
			})
		}
	})
}

// BenchmarkSweep times Sum256 just below, at and just above the sizes where
// the tree changes shape, for checking that throughput does not dip.
func BenchmarkSweep(b *testing.B) {
	buf := make([]byte, 64<<10)
	for _, n := range []int{1024, 1025, 1088, 1089, 2048, 2049, 2560, 2561, 2880, 2881, 3072, 4096, 4097, 8192, 8193, 8448, 8449, 8832, 12288, 16384, 16385, 16512, 16513, 17000, 32768, 32769, 65536} {
		b.Run(fmt.Sprintf("%d", n), func(b *testing.B) {
			b.SetBytes(int64(n))
			for b.Loop() {
				benchSink = Sum256(buf[:n])
			}
		})
	}
}
