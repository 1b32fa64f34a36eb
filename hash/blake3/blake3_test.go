package blake3

import (
	"bytes"
	"errors"
	"io"
	"math/rand/v2"
	"testing"

	"github.com/tendril-p2p/tendril/internal/testutil"
)

type vectorFile struct {
	Key     string `json:"key"`
	Context string `json:"context_string"`
	Cases   []struct {
		InputLen  int    `json:"input_len"`
		Hash      string `json:"hash"`
		KeyedHash string `json:"keyed_hash"`
		DeriveKey string `json:"derive_key"`
	} `json:"cases"`
}

func loadVectors(t testing.TB) *vectorFile {
	t.Helper()
	var v vectorFile
	testutil.ReadJSON(t, "testdata/test_vectors.json", &v)
	if len(v.Cases) != 35 {
		t.Fatalf("got %d cases, want 35", len(v.Cases))
	}
	return &v
}

func vectorInput(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i % 251)
	}
	return b
}

// forEachImpl runs f once per implementation available on this machine,
// forcing each in turn, and restores the best one afterwards.
func forEachImpl(t *testing.T, f func(t *testing.T)) {
	t.Helper()
	defer setImpl(bestImpl())
	for level := 0; level <= implMax; level++ {
		if !setImpl(level) {
			t.Logf("%s: not supported by this CPU, skipped", implNames[level])
			continue
		}
		t.Run(implNames[level], f)
	}
}

// xofOf reads n bytes of the extended output of h.
func xofOf(t testing.TB, h *Hasher, n int) []byte {
	t.Helper()
	out := make([]byte, n)
	if _, err := io.ReadFull(h.XOF(), out); err != nil {
		t.Fatal(err)
	}
	return out
}

func TestVectors(t *testing.T) {
	v := loadVectors(t)
	forEachImpl(t, func(t *testing.T) {
		for _, c := range v.Cases {
			in := vectorInput(c.InputLen)
			want := testutil.Unhex(t, c.Hash)
			wantKeyed := testutil.Unhex(t, c.KeyedHash)
			wantDerive := testutil.Unhex(t, c.DeriveKey)

			if got := Sum256(in); !bytes.Equal(got[:], want[:32]) {
				t.Errorf("Sum256(len %d) = %x, want %x", c.InputLen, got, want[:32])
			}
			if got := Sum512(in); !bytes.Equal(got[:], want[:64]) {
				t.Errorf("Sum512(len %d) = %x, want %x", c.InputLen, got, want[:64])
			}
			h := New()
			h.Write(in)
			if got := h.Sum(nil); !bytes.Equal(got, want[:32]) {
				t.Errorf("New().Sum(len %d) = %x, want %x", c.InputLen, got, want[:32])
			}
			if got := xofOf(t, h, len(want)); !bytes.Equal(got, want) {
				t.Errorf("hash XOF(len %d) = %x, want %x", c.InputLen, got, want)
			}

			kh, err := NewKeyed([]byte(v.Key))
			if err != nil {
				t.Fatal(err)
			}
			kh.Write(in)
			if got := kh.Sum(nil); !bytes.Equal(got, wantKeyed[:32]) {
				t.Errorf("keyed Sum(len %d) = %x, want %x", c.InputLen, got, wantKeyed[:32])
			}
			if got := xofOf(t, kh, len(wantKeyed)); !bytes.Equal(got, wantKeyed) {
				t.Errorf("keyed XOF(len %d) = %x, want %x", c.InputLen, got, wantKeyed)
			}

			dh := NewDeriveKey(v.Context)
			dh.Write(in)
			if got := dh.Sum(nil); !bytes.Equal(got, wantDerive[:32]) {
				t.Errorf("derive Sum(len %d) = %x, want %x", c.InputLen, got, wantDerive[:32])
			}
			if got := xofOf(t, dh, len(wantDerive)); !bytes.Equal(got, wantDerive) {
				t.Errorf("derive XOF(len %d) = %x, want %x", c.InputLen, got, wantDerive)
			}
			dk := make([]byte, len(wantDerive))
			DeriveKey(dk, v.Context, in)
			if !bytes.Equal(dk, wantDerive) {
				t.Errorf("DeriveKey(len %d) = %x, want %x", c.InputLen, dk, wantDerive)
			}
		}
	})
}

// TestWriteSplits checks that every way of feeding the vector inputs gives
// the vector's hash: byte by byte, in pieces of each size around the block
// and chunk sizes, and in random pieces.
func TestWriteSplits(t *testing.T) {
	v := loadVectors(t)
	rng := rand.New(rand.NewPCG(1, 2))
	forEachImpl(t, func(t *testing.T) {
		for _, c := range v.Cases {
			in := vectorInput(c.InputLen)
			want := testutil.Unhex(t, c.Hash)[:32]
			for _, step := range []int{1, 7, 63, 64, 65, 1023, 1024, 1025, 4096, 8193} {
				h := New()
				for p := in; len(p) > 0; {
					k := min(step, len(p))
					h.Write(p[:k])
					p = p[k:]
				}
				if got := h.Sum(nil); !bytes.Equal(got, want) {
					t.Errorf("len %d in pieces of %d: %x, want %x", c.InputLen, step, got, want)
				}
			}
			for trial := 0; trial < 5; trial++ {
				h := New()
				for p := in; len(p) > 0; {
					k := min(rng.IntN(3000), len(p))
					h.Write(p[:k])
					p = p[k:]
				}
				if got := h.Sum(nil); !bytes.Equal(got, want) {
					t.Errorf("len %d in random pieces: %x, want %x", c.InputLen, got, want)
				}
			}
		}
	})
}

func TestSumDoesNotChangeState(t *testing.T) {
	in := vectorInput(5000)
	h := New()
	h.Write(in[:3000])
	h.Sum(nil)
	h.XOF()
	h.Write(in[3000:])
	if got, want := h.Sum(nil), Sum256(in); !bytes.Equal(got, want[:]) {
		t.Fatalf("got %x, want %x", got, want)
	}
}

func TestResetAndClone(t *testing.T) {
	in := vectorInput(3000)
	h, err := NewKeyed(bytes.Repeat([]byte{7}, 32))
	if err != nil {
		t.Fatal(err)
	}
	h.Write(in)
	want := h.Sum(nil)
	h.Reset()
	h.Write(in[:1500])
	c := h.Clone()
	c.Write(in[1500:])
	h.Write([]byte("different"))
	if got := c.Sum(nil); !bytes.Equal(got, want) {
		t.Fatalf("clone: got %x, want %x", got, want)
	}
	h.Reset()
	h.Write(in)
	if got := h.Sum(nil); !bytes.Equal(got, want) {
		t.Fatalf("reset: got %x, want %x", got, want)
	}
	if h.Size() != 32 || h.BlockSize() != 64 {
		t.Fatal("wrong Size or BlockSize")
	}
}

func TestNewKeyedBadKey(t *testing.T) {
	for _, n := range []int{0, 16, 31, 33, 64} {
		if _, err := NewKeyed(make([]byte, n)); !errors.Is(err, ErrKeySize) {
			t.Errorf("key of %d bytes: err = %v, want ErrKeySize", n, err)
		}
	}
}

func TestMarshal(t *testing.T) {
	v := loadVectors(t)
	for _, c := range v.Cases {
		in := vectorInput(c.InputLen)
		want := testutil.Unhex(t, c.KeyedHash)[:32]
		for _, cut := range []int{0, 1, c.InputLen / 3, c.InputLen / 2, c.InputLen} {
			cut = min(cut, c.InputLen)
			h, _ := NewKeyed([]byte(v.Key))
			h.Write(in[:cut])
			state, err := h.MarshalBinary()
			if err != nil {
				t.Fatal(err)
			}
			r := New()
			if err := r.UnmarshalBinary(state); err != nil {
				t.Fatalf("len %d cut %d: %v", c.InputLen, cut, err)
			}
			r.Write(in[cut:])
			if got := r.Sum(nil); !bytes.Equal(got, want) {
				t.Errorf("len %d resumed at %d: %x, want %x", c.InputLen, cut, got, want)
			}
		}
	}
}

func TestUnmarshalRejects(t *testing.T) {
	h := New()
	h.Write(vectorInput(5000))
	good, _ := h.MarshalBinary()
	cases := map[string]func([]byte) []byte{
		"empty":    func(b []byte) []byte { return nil },
		"short":    func(b []byte) []byte { return b[:len(b)-1] },
		"long":     func(b []byte) []byte { return append(b, 0) },
		"magic":    func(b []byte) []byte { b[0] ^= 1; return b },
		"flags":    func(b []byte) []byte { b[len(marshalMagic)+32] = 0x7f; return b },
		"key":      func(b []byte) []byte { b[len(marshalMagic)] ^= 1; return b },
		"bufLen":   func(b []byte) []byte { b[marshalFixed-3] = 65; return b },
		"blocks":   func(b []byte) []byte { b[marshalFixed-2] = 16; return b },
		"stackLen": func(b []byte) []byte { b[marshalFixed-1] = 200; return b },
		"bufGarbage": func(b []byte) []byte {
			b[marshalFixed-4] = 1 // last buffer byte, past bufLen
			return b
		},
	}
	for name, mutate := range cases {
		b := mutate(append([]byte(nil), good...))
		r := New()
		before := *r
		if err := r.UnmarshalBinary(b); !errors.Is(err, ErrInvalidState) {
			t.Errorf("%s: err = %v, want ErrInvalidState", name, err)
		}
		if *r != before {
			t.Errorf("%s: state changed on error", name)
		}
	}
}

func TestXOFSeek(t *testing.T) {
	in := vectorInput(2000)
	h := New()
	h.Write(in)
	ref := xofOf(t, h, 1000)
	for _, off := range []int{0, 1, 31, 32, 63, 64, 65, 127, 128, 500, 999} {
		for _, n := range []int{0, 1, 5, 64, 65, 130, 1000 - off} {
			n = min(n, 1000-off)
			r := h.XOF()
			if pos, err := r.Seek(int64(off), io.SeekStart); err != nil || pos != int64(off) {
				t.Fatalf("Seek(%d) = %d, %v", off, pos, err)
			}
			got := make([]byte, n)
			if _, err := io.ReadFull(r, got); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, ref[off:off+n]) {
				t.Errorf("offset %d length %d: mismatch", off, n)
			}
		}
	}
	// Reads in odd pieces match one long read.
	r := h.XOF()
	var got []byte
	for i := 1; len(got) < 1000; i = i%70 + 1 {
		b := make([]byte, min(i, 1000-len(got)))
		r.Read(b)
		got = append(got, b...)
	}
	if !bytes.Equal(got, ref) {
		t.Error("piecewise reads differ")
	}
	// SeekCurrent, and the far end of the stream.
	r = h.XOF()
	r.Seek(100, io.SeekStart)
	if pos, err := r.Seek(-40, io.SeekCurrent); err != nil || pos != 60 {
		t.Fatalf("SeekCurrent = %d, %v", pos, err)
	}
	b := make([]byte, 10)
	r.Read(b)
	if !bytes.Equal(b, ref[60:70]) {
		t.Error("after SeekCurrent: mismatch")
	}
	if _, err := r.Seek(-1, io.SeekStart); !errors.Is(err, ErrSeek) {
		t.Errorf("negative seek: %v", err)
	}
	if _, err := r.Seek(0, io.SeekEnd); !errors.Is(err, ErrSeek) {
		t.Errorf("SeekEnd: %v", err)
	}
	if _, err := r.Seek(1<<62, io.SeekStart); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Seek(1<<62, io.SeekCurrent); !errors.Is(err, ErrSeek) {
		t.Errorf("overflowing seek: %v", err)
	}
	if n, err := r.Read(b); n != 10 || err != nil {
		t.Errorf("read far out: %d, %v", n, err)
	}
}

func TestAllocs(t *testing.T) {
	in := vectorInput(1 << 20)
	h := New()
	h.Write(in[:100])
	var out []byte = make([]byte, 0, 32)
	forEachImpl(t, func(t *testing.T) {
		for _, n := range []int{0, 64, 1024, 8192, 65536, 1 << 20} {
			if a := testing.AllocsPerRun(10, func() { Sum256(in[:n]) }); a != 0 {
				t.Errorf("Sum256(%d): %v allocs", n, a)
			}
			if a := testing.AllocsPerRun(10, func() { h.Write(in[:n]) }); a != 0 {
				t.Errorf("Write(%d): %v allocs", n, a)
			}
		}
		if a := testing.AllocsPerRun(10, func() { out = h.Sum(out[:0]) }); a != 0 {
			t.Errorf("Sum: %v allocs", a)
		}
		dk := make([]byte, 32)
		if a := testing.AllocsPerRun(10, func() { DeriveKey(dk, "tendril test context 2026-11-30 long enough", in[:100]) }); a != 0 {
			t.Errorf("DeriveKey: %v allocs", a)
		}
	})
}

// FuzzWrite checks that incremental writes in the fuzzer's pieces match the
// one-shot functions.
func FuzzWrite(f *testing.F) {
	f.Add([]byte("hello"), uint16(1), uint16(3))
	f.Add(vectorInput(3000), uint16(1025), uint16(64))
	f.Add(vectorInput(9000), uint16(7), uint16(8192))
	f.Fuzz(func(t *testing.T, data []byte, s1, s2 uint16) {
		want := Sum256(data)
		h := New()
		steps := [2]int{int(s1)%4100 + 1, int(s2)%4100 + 1}
		for i, p := 0, data; len(p) > 0; i++ {
			k := min(steps[i%2], len(p))
			h.Write(p[:k])
			p = p[k:]
		}
		if got := h.Sum(nil); !bytes.Equal(got, want[:]) {
			t.Fatalf("incremental %x, one-shot %x", got, want)
		}
		w512 := Sum512(data)
		if got := xofOf(t, h, 64); !bytes.Equal(got, w512[:]) {
			t.Fatalf("XOF %x, Sum512 %x", got, w512)
		}
	})
}

// FuzzUnmarshalBinary feeds arbitrary states to UnmarshalBinary: it must
// reject or accept without panicking, and an accepted state must hash on.
func FuzzUnmarshalBinary(f *testing.F) {
	for _, n := range []int{0, 1, 1024, 5000, 70000} {
		h := New()
		h.Write(vectorInput(n))
		b, _ := h.MarshalBinary()
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		h := New()
		if err := h.UnmarshalBinary(b); err != nil {
			if !errors.Is(err, ErrInvalidState) {
				t.Fatalf("error %v does not wrap ErrInvalidState", err)
			}
			return
		}
		h.Write(vectorInput(3000))
		h.Sum(nil)
		r := h.XOF()
		r.Read(make([]byte, 100))
		again, err := h.MarshalBinary()
		if err != nil || len(again) == 0 {
			t.Fatalf("MarshalBinary after resume: %v", err)
		}
	})
}
