//go:build amd64 && !purego

package blake3

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"testing"
)

// TestChain2 checks the two-chain kernel directly against the generic
// code for every pair of chain lengths up to a chunk, with a partial last
// block on the shorter chain.
func TestChain2(t *testing.T) { forEachChain2(t, testChain2) }

// forEachChain2 runs f with each level that has a chain2 kernel.
func forEachChain2(t *testing.T, f func(t *testing.T)) {
	defer setImpl(bestImpl())
	for _, level := range []int{implAVX2, implAVX512} {
		if !setImpl(level) {
			continue
		}
		t.Run(implNames[level], f)
	}
}

func testChain2(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	buf := randBytes(rng, 2*chunkLen)
	key := [8]uint32{9, 8, 7, 6, 5, 4, 3, 0xfffffffe}
	for n0 := 1; n0 <= 16; n0++ {
		for n1 := 1; n1 <= n0; n1++ {
			for _, len1 := range []uint32{0, 1, 63, 64} {
				p1 := make([]byte, n1*BlockSize) // zero-padded, as hashMany passes a tail
				copy(p1, buf[chunkLen:chunkLen+(n1-1)*BlockSize+int(len1)])
				var cvs [16]uint32
				copy(cvs[:8], key[:])
				copy(cvs[8:], key[:])
				c0, c1 := uint64(1<<32+3), uint64(1<<32+4)
				lp := chain2Params(c0, c1, uint32(n0), uint32(n1), BlockSize, len1, flagKeyedHash, flagKeyedHash, flagChunkStart, flagChunkStart, flagChunkEnd, flagChunkEnd)
				// The last block from elsewhere, as hashTwoChunks passes it.
				last := [64]byte(p1[(n1-1)*BlockSize:])
				for i := (n1 - 1) * BlockSize; i < len(p1); i++ {
					p1[i] = 0xff // must not be read
				}
				chain2(&cvs, &buf[0], &buf[(n0-1)*BlockSize], &p1[0], &last[0], &lp)

				want0 := key
				compressChainGeneric(&want0, buf[:n0*BlockSize], c0, flagKeyedHash, flagChunkStart, flagChunkEnd)
				var full [64]byte
				compressChainOutGeneric(&full, &key, p1[:(n1-1)*BlockSize], &last, c1, len1, flagKeyedHash, flagChunkStart, flagChunkEnd)
				var want1 [8]uint32
				for i := range want1 {
					want1[i] = uint32(full[4*i]) | uint32(full[4*i+1])<<8 | uint32(full[4*i+2])<<16 | uint32(full[4*i+3])<<24
				}
				if [8]uint32(cvs[:8]) != want0 || [8]uint32(cvs[8:]) != want1 {
					t.Fatalf("chain2(%d blocks, %d blocks of which the last %d bytes) differs", n0, n1, len1)
				}
			}
		}
	}
}

// TestChain2Flags gives the two chains different flags: a partial chunk
// (chain 0) next to a parent node (chain 1), as hashThreeChunks does.
func TestChain2Flags(t *testing.T) { forEachChain2(t, testChain2Flags) }

func testChain2Flags(t *testing.T) {
	rng := rand.New(rand.NewPCG(13, 14))
	buf := randBytes(rng, chunkLen+2*outLen)
	key := [8]uint32{1, 3, 5, 7, 9, 11, 13, 15}
	for n0 := 1; n0 <= 16; n0++ {
		for _, len0 := range []uint32{1, 64} {
			p0 := make([]byte, n0*BlockSize)
			copy(p0, buf[:(n0-1)*BlockSize+int(len0)])
			parent := buf[chunkLen:]
			var cvs [16]uint32
			copy(cvs[:8], key[:])
			copy(cvs[8:], key[:])
			lp := chain2Params(5, 0, uint32(n0), 1, len0, BlockSize, flagKeyedHash, flagKeyedHash|flagParent, flagChunkStart, 0, flagChunkEnd, 0)
			// Chain 0's last block from elsewhere too, as hashSmallTree passes it.
			last0 := [64]byte(p0[(n0-1)*BlockSize:])
			for i := (n0 - 1) * BlockSize; i < len(p0); i++ {
				p0[i] = 0xff // must not be read
			}
			chain2(&cvs, &p0[0], &last0[0], &parent[0], &parent[0], &lp)

			var full [64]byte
			compressChainOutGeneric(&full, &key, p0[:(n0-1)*BlockSize], &last0, 5, len0, flagKeyedHash, flagChunkStart, flagChunkEnd)
			want1 := key
			compressChainGeneric(&want1, parent[:BlockSize], 0, flagKeyedHash|flagParent, 0, 0)
			var want0 [8]uint32
			for i := range want0 {
				want0[i] = binary.LittleEndian.Uint32(full[4*i:])
			}
			if [8]uint32(cvs[:8]) != want0 || [8]uint32(cvs[8:]) != want1 {
				t.Fatalf("chain2(chunk of %d blocks, last %d bytes; parent) differs", n0, len0)
			}
		}
	}
}

// BenchmarkChain2 times the two-chain kernel per block step, for chains of
// 16 blocks (a pair of chunks) and of one (a pair of parents).
func BenchmarkChain2(b *testing.B) {
	defer setImpl(bestImpl())
	buf := make([]byte, 2*chunkLen)
	for _, level := range []int{implAVX2, implAVX512} {
		if !setImpl(level) {
			continue
		}
		for _, n := range []uint32{1, 16} {
			b.Run(fmt.Sprintf("%s/blocks=%d", implNames[level], n), func(b *testing.B) {
				cvs := [16]uint32{}
				lp := chain2Params(0, 1, n, n, 64, 64, 0, 0, flagChunkStart, flagChunkStart, flagChunkEnd, flagChunkEnd)
				for b.Loop() {
					chain2(&cvs, &buf[0], &buf[int(n-1)*BlockSize], &buf[chunkLen], &buf[chunkLen+int(n-1)*BlockSize], &lp)
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*int(n)), "ns/step")
			})
		}
	}
}

// TestLevelCap runs this test binary again with TENDRIL_BLAKE3 set to each
// level and checks that the level chosen at start-up is capped there.
func TestLevelCap(t *testing.T) {
	if want := os.Getenv("TENDRIL_BLAKE3_WANT"); want != "" {
		if got := implNames[impl]; got != want {
			t.Fatalf("TENDRIL_BLAKE3=%s: level %s, want %s", os.Getenv("TENDRIL_BLAKE3"), got, want)
		}
		return
	}
	if os.Getenv("TENDRIL_BLAKE3") != "" {
		t.Skip("TENDRIL_BLAKE3 is set: the CPU's own level is not known here")
	}
	for level, name := range implNames {
		want := implNames[min(level, bestImpl())]
		cmd := exec.Command(os.Args[0], "-test.run", "^TestLevelCap$")
		cmd.Env = append(os.Environ(), "TENDRIL_BLAKE3="+name, "TENDRIL_BLAKE3_WANT="+want)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("TENDRIL_BLAKE3=%s: %v\n%s", name, err, out)
		}
	}
}

// BenchmarkHash8 times the 8-way kernel alone on 8 full chunks (16 blocks
// per lane) and on 8 parent nodes (one block per lane), reporting ns per
// 8-lane block step: the figure to set against the kernel's throughput
// bound, and, for one block, the call's fixed cost on top of it.
func BenchmarkHash8(b *testing.B) {
	defer setImpl(bestImpl())
	buf := make([]byte, 8*chunkLen)
	for _, level := range []int{implAVX2, implAVX512} {
		if !setImpl(level) {
			continue
		}
		for _, blocks := range []int{1, chunkLen / BlockSize} {
			b.Run(fmt.Sprintf("%s/blocks=%d", implNames[level], blocks), func(b *testing.B) {
				var ptrs [8]*byte
				var lp [32]uint32
				for i := range ptrs {
					ptrs[i] = &buf[i*blocks*BlockSize]
					lp[i] = uint32(i)
					lp[16+i] = uint32(blocks - 1)
					lp[24+i] = BlockSize
				}
				var out [256]byte
				b.SetBytes(int64(8 * blocks * BlockSize))
				for b.Loop() {
					if level >= implAVX512 {
						hash8AVX512(&ptrs, blocks, &iv, &lp, 0, flagChunkStart, flagChunkEnd, &out)
					} else {
						hash8AVX2(&ptrs, blocks, &iv, &lp, 0, flagChunkStart, flagChunkEnd, &out)
					}
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*blocks), "ns/step")
			})
		}
	}
}
