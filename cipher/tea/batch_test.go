package tea

import (
	"bytes"
	"crypto/rand"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"testing"
	"testing/iotest"

	"github.com/tendril-p2p/tendril/internal/testutil"
)

var batchNames = map[int]string{
	batchGeneric: "generic",
	batchLanesGo: "lanes-go",
	batchAVX2:    "avx2",
	batchAVX512:  "avx512",
}

// forEachBatch runs f once per batch implementation this machine can run.
func forEachBatch(t *testing.T, f func(t *testing.T)) {
	defer func(v int) { batchImpl = v }(batchImpl)
	for _, impl := range batchImpls() {
		batchImpl = impl
		t.Run(batchNames[impl], f)
	}
}

func TestBatchImpls(t *testing.T) {
	t.Logf("batch implementations: %v, in use: %s", batchImpls(), batchNames[batchImpl])
}

func TestBatchVectors(t *testing.T) {
	v := loadVectors(t)
	forEachBatch(t, func(t *testing.T) {
		// All cases of one key as one batch, with the vectors' filler.
		byKey := map[string][]int{}
		for i, tc := range v.Cases {
			byKey[tc.KeyHex] = append(byKey[tc.KeyHex], i)
		}
		for key, idx := range byKey {
			c := mustCipher(t, testutil.Unhex(t, key))
			var fill []byte
			srcs := make([][]byte, len(idx))
			dsts := make([][]byte, len(idx))
			for j, i := range idx {
				srcs[j] = testutil.Unhex(t, v.Cases[i].PlaintextHex)
				fill = append(fill, testutil.Unhex(t, v.Cases[i].FillHex)...)
			}
			if err := c.EncryptBatchWithFill(dsts, srcs, bytes.NewReader(fill)); err != nil {
				t.Fatal(err)
			}
			cts := make([][]byte, len(idx))
			for j, i := range idx {
				want := testutil.Unhex(t, v.Cases[i].Ciphertext)
				if !bytes.Equal(dsts[j], want) {
					t.Errorf("%s: EncryptBatchWithFill = %x, want %x", v.Cases[i].ID, dsts[j], want)
				}
				cts[j] = want
			}
			pts := make([][]byte, len(idx))
			if err := c.DecryptBatch(pts, cts); err != nil {
				t.Fatal(err)
			}
			for j, i := range idx {
				if !bytes.Equal(pts[j], srcs[j]) || pts[j] == nil {
					t.Errorf("%s: DecryptBatch = %x, want %x", v.Cases[i].ID, pts[j], srcs[j])
				}
			}
		}
	})
}

// randomBatch returns count plaintexts with lengths drawn to mix short,
// equal and very uneven messages.
func randomBatch(r *mrand.Rand, count int) [][]byte {
	srcs := make([][]byte, count)
	for i := range srcs {
		var n int
		switch r.IntN(4) {
		case 0:
			n = r.IntN(40)
		case 1:
			n = 4096
		case 2:
			n = r.IntN(2000)
		default:
			n = r.IntN(20000)
		}
		srcs[i] = make([]byte, n)
		rand.Read(srcs[i])
	}
	return srcs
}

// TestBatchDifferential compares every batch implementation with the single
// message functions on random batches of random sizes.
func TestBatchDifferential(t *testing.T) {
	r := mrand.New(mrand.NewPCG(3, 4))
	counts := []int{0, 1, 2, 3, 7, 8, 9, 15, 16, 17, 31, 33, 64, 65, 100}
	forEachBatch(t, func(t *testing.T) {
		for _, count := range counts {
			key := make([]byte, KeySize)
			rand.Read(key)
			c := mustCipher(t, key)
			srcs := randomBatch(r, count)
			fill := make([]byte, FillSize*count)
			rand.Read(fill)
			dsts := make([][]byte, count)
			for i := range dsts {
				dsts[i] = []byte(fmt.Sprintf("head%d", i))
			}
			if err := c.EncryptBatchWithFill(dsts, srcs, bytes.NewReader(fill)); err != nil {
				t.Fatal(err)
			}
			for i := range srcs {
				want, _ := c.EncryptWithFill([]byte(fmt.Sprintf("head%d", i)), srcs[i], bytes.NewReader(fill[i*FillSize:]))
				if !bytes.Equal(dsts[i], want) {
					t.Fatalf("count %d, message %d (%d bytes): batch ciphertext differs", count, i, len(srcs[i]))
				}
			}
			// Decrypt, mixing in invalid ciphertexts.
			cts := make([][]byte, count)
			pts := make([][]byte, count)
			bad := map[int]bool{}
			for i := range cts {
				cts[i] = dsts[i][len(fmt.Sprintf("head%d", i)):]
				if r.IntN(8) == 0 {
					cts[i] = cts[i][:len(cts[i])-1-r.IntN(7)] // never a multiple of 8
					bad[i] = true
				}
				pts[i] = []byte("p")
			}
			err := c.DecryptBatch(pts, cts)
			var berr *BatchError
			if len(bad) > 0 && (!errors.As(err, &berr) || !errors.Is(err, ErrCiphertextSize)) {
				t.Fatalf("count %d: DecryptBatch error %v, want a BatchError", count, err)
			}
			if len(bad) == 0 && err != nil {
				t.Fatalf("count %d: DecryptBatch error %v", count, err)
			}
			for i := range cts {
				if bad[i] {
					if berr.Errs[i] == nil || string(pts[i]) != "p" {
						t.Fatalf("message %d: invalid ciphertext accepted", i)
					}
					continue
				}
				if berr != nil && berr.Errs[i] != nil {
					t.Fatalf("message %d: unexpected error %v", i, berr.Errs[i])
				}
				if !bytes.Equal(pts[i], append([]byte("p"), srcs[i]...)) {
					t.Fatalf("count %d, message %d: DecryptBatch differs", count, i)
				}
			}
		}
	})
}

// TestBatchInPlace encrypts and decrypts batches in place and with the
// random filler of EncryptBatch.
func TestBatchInPlace(t *testing.T) {
	r := mrand.New(mrand.NewPCG(5, 6))
	c := mustCipher(t, []byte("0123456789ABCDEF"))
	forEachBatch(t, func(t *testing.T) {
		srcs := randomBatch(r, 40)
		orig := make([][]byte, len(srcs))
		bufs := make([][]byte, len(srcs))
		for i, s := range srcs {
			orig[i] = bytes.Clone(s)
			bufs[i] = make([]byte, len(s), CiphertextLen(len(s)))
			copy(bufs[i], s)
		}
		dsts := make([][]byte, len(srcs))
		for i := range bufs {
			dsts[i] = bufs[i][:0]
		}
		c.EncryptBatch(dsts, bufs)
		for i := range dsts {
			if &dsts[i][0] != &bufs[i][:1][0] {
				t.Fatalf("message %d reallocated", i)
			}
			if got, err := c.DecryptStrict(nil, dsts[i]); err != nil || !bytes.Equal(got, orig[i]) {
				t.Fatalf("message %d: EncryptBatch output does not decrypt: %v", i, err)
			}
		}
		pts := make([][]byte, len(dsts))
		for i := range dsts {
			pts[i] = dsts[i][:0]
		}
		if err := c.DecryptBatch(pts, dsts); err != nil {
			t.Fatal(err)
		}
		for i := range pts {
			if !bytes.Equal(pts[i], orig[i]) {
				t.Fatalf("message %d: in-place DecryptBatch differs", i)
			}
		}
	})
}

func TestBatchErrors(t *testing.T) {
	c := mustCipher(t, make([]byte, KeySize))
	for _, f := range []func(){
		func() { c.EncryptBatch(make([][]byte, 2), make([][]byte, 3)) },
		func() { c.DecryptBatch(make([][]byte, 1), nil) },
		func() { c.EncryptBatchWithFill(nil, make([][]byte, 1), rand.Reader) },
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Error("mismatched batch lengths did not panic")
				}
			}()
			f()
		}()
	}
	// A failing filler leaves every destination as it was.
	srcs := make([][]byte, 100)
	dsts := make([][]byte, 100)
	for i := range dsts {
		dsts[i] = []byte("keep")
	}
	err := c.EncryptBatchWithFill(dsts, srcs, iotest.DataErrReader(bytes.NewReader(make([]byte, 70*FillSize))))
	if !errors.Is(err, ErrFill) {
		t.Fatalf("error %v, want ErrFill", err)
	}
	for i := range dsts {
		if string(dsts[i]) != "keep" {
			t.Fatalf("destination %d changed to %q", i, dsts[i])
		}
	}
	// A 16-byte ciphertext whose header points past its end.
	ct := make([]byte, 16)
	ct[0] = 7
	encryptChain(&c.k, ct)
	ok := c.Encrypt(nil, []byte("fine"))
	err = c.DecryptBatch(make([][]byte, 3), [][]byte{ok, ct, nil})
	var berr *BatchError
	if !errors.As(err, &berr) || !errors.Is(err, ErrPadding) || !errors.Is(err, ErrCiphertextSize) ||
		berr.Errs[0] != nil || berr.Errs[1] == nil || berr.Errs[2] == nil {
		t.Fatalf("DecryptBatch error = %v", err)
	}
	if msg := err.Error(); msg[:5] != "tea: " {
		t.Errorf("error message %q", msg)
	}
}

func BenchmarkEncryptBatch(b *testing.B) {
	benchBatch(b, false)
}

func BenchmarkDecryptBatch(b *testing.B) {
	benchBatch(b, true)
}

// benchBatch measures 16 messages of 4 KiB (and 64 of 256 B) per batch with
// each implementation; "single" is the same messages through
// Encrypt/Decrypt one by one. Throughput counts plaintext bytes.
func benchBatch(b *testing.B, decrypt bool) {
	defer func(v int) { batchImpl = v }(batchImpl)
	for _, shape := range []struct{ count, size int }{{16, 4096}, {64, 256}} {
		srcs := make([][]byte, shape.count)
		cts := make([][]byte, shape.count)
		for i := range srcs {
			srcs[i] = make([]byte, shape.size)
			rand.Read(srcs[i])
			cts[i] = benchCipher.Encrypt(nil, srcs[i])
		}
		dsts := make([][]byte, shape.count)
		for i := range dsts {
			dsts[i] = make([]byte, 0, CiphertextLen(shape.size))
		}
		reset := func() {
			for i := range dsts {
				dsts[i] = dsts[i][:0]
			}
		}
		name := fmt.Sprintf("%dx%d", shape.count, shape.size)
		b.Run(name+"/impl=single", func(b *testing.B) {
			b.SetBytes(int64(shape.count * shape.size))
			b.ReportAllocs()
			for b.Loop() {
				for i := range srcs {
					if decrypt {
						dsts[i], _ = benchCipher.Decrypt(dsts[i][:0], cts[i])
					} else {
						dsts[i] = benchCipher.Encrypt(dsts[i][:0], srcs[i])
					}
				}
			}
		})
		for _, impl := range batchImpls() {
			if impl == batchGeneric || impl == batchLanesGo {
				continue
			}
			batchImpl = impl
			b.Run(name+"/impl="+batchNames[impl], func(b *testing.B) {
				b.SetBytes(int64(shape.count * shape.size))
				b.ReportAllocs()
				for b.Loop() {
					reset()
					if decrypt {
						if err := benchCipher.DecryptBatch(dsts, cts); err != nil {
							b.Fatal(err)
						}
					} else {
						benchCipher.EncryptBatch(dsts, srcs)
					}
				}
			})
		}
	}
}

// FuzzDecryptBatch splits the input into messages and checks that
// DecryptBatch agrees with Decrypt on each, under every implementation.
func FuzzDecryptBatch(f *testing.F) {
	c := mustCipher(f, []byte("0123456789ABCDEF"))
	f.Add([]byte{16, 24, 0}, c.Encrypt(nil, make([]byte, 30)))
	f.Add([]byte{40, 3, 16}, bytes.Repeat([]byte{0x5a}, 200))
	f.Fuzz(func(t *testing.T, cuts, data []byte) {
		var srcs [][]byte
		for _, n := range cuts {
			n := min(int(n), len(data))
			srcs = append(srcs, data[:n])
			data = data[n:]
		}
		srcs = append(srcs, data)
		defer func(v int) { batchImpl = v }(batchImpl)
		for _, impl := range batchImpls() {
			batchImpl = impl
			dsts := make([][]byte, len(srcs))
			err := c.DecryptBatch(dsts, srcs)
			var berr *BatchError
			if err != nil && !errors.As(err, &berr) {
				t.Fatalf("%s: error %v is not a BatchError", batchNames[impl], err)
			}
			for i, src := range srcs {
				want, werr := c.Decrypt(nil, src)
				var gerr error
				if berr != nil {
					gerr = berr.Errs[i]
				}
				if (werr == nil) != (gerr == nil) || !bytes.Equal(dsts[i], want) {
					t.Fatalf("%s: message %d: batch %x, %v; single %x, %v", batchNames[impl], i, dsts[i], gerr, want, werr)
				}
			}
		}
	})
}

// BenchmarkLaneKernel measures the lane kernels alone: 16 lanes of 514
// blocks (a 4 KiB message each), in place, no Go-side preparation.
func BenchmarkLaneKernel(b *testing.B) {
	for _, impl := range batchImpls() {
		width := laneWidth(impl)
		if width == 0 {
			continue
		}
		for _, decrypt := range []bool{false, true} {
			b.Run(fmt.Sprintf("impl=%s/decrypt=%v", batchNames[impl], decrypt), func(b *testing.B) {
				const blocks = 514
				var l lanes
				bufs := make([][]byte, width)
				for j := range bufs {
					bufs[j] = make([]byte, blocks*BlockSize)
					l.ins[j], l.outs[j], l.strides[j] = &bufs[j][0], &bufs[j][0], BlockSize
				}
				b.SetBytes(int64(width * 4096))
				for b.Loop() {
					runKernel(impl, decrypt, &benchCipher.k, &l.ins, &l.outs, &l.strides, &l.state, blocks)
				}
			})
		}
	}
}
