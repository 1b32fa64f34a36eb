package blake3

import (
	"bytes"
	"io"
	"math/rand/v2"
	"testing"
)

// Differential tests: every forced implementation against the generic one.

func randBytes(rng *rand.Rand, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(rng.Uint32())
	}
	return b
}

// reference computes results with the generic implementation forced.
func reference(f func()) {
	prev := impl
	setImpl(implGeneric)
	defer setImpl(prev)
	f()
}

func TestKernelsAgainstGeneric(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	input := randBytes(rng, 40*chunkLen)
	key := [8]uint32{1, 2, 3, 4, 5, 6, 7, 0xffffffff}
	forEachImpl(t, func(t *testing.T) {
		for _, counter := range []uint64{0, 1<<32 - 5, 1<<40 + 7} {
			for n := 1; n <= 40; n++ {
				got := make([]byte, n*outLen)
				want := make([]byte, n*outLen)
				hashChunks(input[:n*chunkLen], nil, &key, counter, flagKeyedHash, got)
				hashChunksGeneric(input[:n*chunkLen], nil, &key, counter, flagKeyedHash, want)
				if !bytes.Equal(got, want) {
					t.Fatalf("hashChunks(%d chunks, counter %#x) differs", n, counter)
				}
				for _, tl := range []int{1, 63, 64, 65, 500, 1023} {
					tail := input[:tl]
					if n < 40 {
						tail = input[n*chunkLen : n*chunkLen+tl]
					}
					got := make([]byte, (n+1)*outLen)
					want := make([]byte, (n+1)*outLen)
					hashChunks(input[:n*chunkLen], tail, &key, counter, flagKeyedHash, got)
					hashChunksGeneric(input[:n*chunkLen], tail, &key, counter, flagKeyedHash, want)
					if !bytes.Equal(got, want) {
						t.Fatalf("hashChunks(%d chunks + %d, counter %#x) differs", n, tl, counter)
					}
				}
			}
		}
		for n := 1; n <= 40; n++ {
			got := make([]byte, n*outLen)
			want := make([]byte, n*outLen)
			hashParents(input[:n*2*outLen], &key, 0, got)
			hashParentsGeneric(input[:n*2*outLen], &key, 0, want)
			if !bytes.Equal(got, want) {
				t.Fatalf("hashParents(%d) differs", n)
			}
		}
		for _, blockLen := range []uint32{0, 1, 33, 64} {
			var got, want [64]byte
			block := [64]byte(input[:64])
			cv := key
			compressFull(&got, &cv, &block, 1<<33+9, blockLen, flagRoot|flagChunkEnd)
			compressFullGeneric(&want, &cv, &block, 1<<33+9, blockLen, flagRoot|flagChunkEnd)
			if got != want {
				t.Fatalf("compressFull(blockLen %d) differs", blockLen)
			}
		}
		for n := 1; n <= 16; n++ {
			a, b := key, key
			compressChain(&a, input[:n*64], 1<<32+1, 0, flagChunkStart, flagChunkEnd)
			compressChainGeneric(&b, input[:n*64], 1<<32+1, 0, flagChunkStart, flagChunkEnd)
			if a != b {
				t.Fatalf("compressChain(%d blocks) differs", n)
			}
		}
		for n := 0; n <= 16; n++ {
			for _, lastLen := range []uint32{0, 1, 63, 64} {
				last := [64]byte(input[2000 : 2000+64])
				cv := key
				var got, want [64]byte
				compressChainOut(&got, &cv, input[:n*64], &last, 1<<32+1, lastLen, flagKeyedHash, flagChunkStart, flagChunkEnd|flagRoot)
				compressChainOutGeneric(&want, &cv, input[:n*64], &last, 1<<32+1, lastLen, flagKeyedHash, flagChunkStart, flagChunkEnd|flagRoot)
				if got != want || cv != key {
					t.Fatalf("compressChainOut(%d blocks, last %d bytes) differs", n, lastLen)
				}
			}
		}
	})
}

// TestLengthsAgainstGeneric hashes every length up to 20 chunks, in all
// three modes, one-shot and incrementally in random pieces.
func TestLengthsAgainstGeneric(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	const maxLen = 20*chunkLen + 100
	input := randBytes(rng, maxLen)
	var want [maxLen + 1][32]byte
	reference(func() {
		for n := 0; n <= maxLen; n++ {
			want[n] = Sum256(input[:n])
		}
	})
	forEachImpl(t, func(t *testing.T) {
		if impl == implGeneric {
			return
		}
		for n := 0; n <= maxLen; n++ {
			if got := Sum256(input[:n]); got != want[n] {
				t.Fatalf("Sum256(len %d) differs from generic", n)
			}
		}
		for n := 0; n <= maxLen; n += 1 + rng.IntN(97) {
			h := New()
			for p := input[:n]; len(p) > 0; {
				k := min(1+rng.IntN(2*chunkLen), len(p))
				h.Write(p[:k])
				p = p[k:]
			}
			if got := h.Sum(nil); !bytes.Equal(got, want[n][:]) {
				t.Fatalf("incremental len %d differs from generic", n)
			}
		}
	})
}

// TestLongAgainstGeneric covers multi-MiB inputs around 16-chunk (and
// larger power-of-two) subtree boundaries, all modes, random splits and
// XOF offsets.
func TestLongAgainstGeneric(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	input := randBytes(rng, 3<<20+64*chunkLen)
	var lengths []int
	for _, base := range []int{16 * chunkLen, 32 * chunkLen, 1 << 20, 2 << 20, 3 << 20, 3<<20 + 48*chunkLen} {
		for _, d := range []int{-chunkLen - 1, -1, 0, 1, chunkLen, chunkLen + 1, 15 * chunkLen} {
			lengths = append(lengths, base+d)
		}
	}
	key := randBytes(rng, 32)
	type result struct{ plain, keyed, derive, xof []byte }
	run := func(n int, splits []int) result {
		var r result
		s := Sum256(input[:n])
		r.plain = s[:]
		kh, _ := NewKeyed(key)
		p := input[:n]
		for _, k := range splits {
			k = min(k, len(p))
			kh.Write(p[:k])
			p = p[k:]
		}
		kh.Write(p)
		r.keyed = kh.Sum(nil)
		r.derive = make([]byte, 40)
		DeriveKey(r.derive, "tendril blake3 differential test", input[:n])
		x := kh.XOF()
		x.Seek(int64(n%1000)*64+int64(n%63), io.SeekStart)
		r.xof = make([]byte, 200)
		io.ReadFull(x, r.xof)
		return r
	}
	splits := make([][]int, len(lengths))
	for i := range splits {
		for j := 0; j < 5; j++ {
			splits[i] = append(splits[i], rng.IntN(300*chunkLen))
		}
	}
	want := make([]result, len(lengths))
	reference(func() {
		for i, n := range lengths {
			want[i] = run(n, splits[i])
		}
	})
	forEachImpl(t, func(t *testing.T) {
		if impl == implGeneric {
			return
		}
		for i, n := range lengths {
			got := run(n, splits[i])
			if !bytes.Equal(got.plain, want[i].plain) || !bytes.Equal(got.keyed, want[i].keyed) ||
				!bytes.Equal(got.derive, want[i].derive) || !bytes.Equal(got.xof, want[i].xof) {
				t.Errorf("len %d differs from generic", n)
			}
		}
	})
}

// FuzzImplementations checks every implementation against the generic one
// on the fuzzer's input, one-shot and split.
func FuzzImplementations(f *testing.F) {
	f.Add(vectorInput(100), uint16(3))
	f.Add(vectorInput(17*chunkLen+5), uint16(1000))
	defer setImpl(bestImpl())
	f.Fuzz(func(t *testing.T, data []byte, split uint16) {
		var want [32]byte
		reference(func() { want = Sum256(data) })
		for level := implGeneric + 1; level <= implMax; level++ {
			if !setImpl(level) {
				continue
			}
			if got := Sum256(data); got != want {
				t.Fatalf("%s: Sum256 differs", implNames[level])
			}
			k := min(int(split), len(data))
			h := New()
			h.Write(data[:k])
			h.Write(data[k:])
			if got := h.Sum(nil); !bytes.Equal(got, want[:]) {
				t.Fatalf("%s: split at %d differs", implNames[level], k)
			}
		}
		setImpl(bestImpl())
	})
}

func TestSum256Parallel(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	input := randBytes(rng, 9<<20+5*chunkLen)
	lengths := []int{0, 1, 1024, parallelMin - 1, parallelMin, parallelMin + 1,
		2*parallelPiece*8 + chunkLen + 1, 3<<20 + 7, 4 << 20, 9<<20 + 5*chunkLen}
	forEachImpl(t, func(t *testing.T) {
		for _, n := range lengths {
			if got, want := Sum256Parallel(input[:n]), Sum256(input[:n]); got != want {
				t.Errorf("Sum256Parallel(len %d) = %x, want %x", n, got, want)
			}
		}
	})
}
