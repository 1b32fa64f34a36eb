package tea

import (
	"bytes"
	"crypto/rand"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/tendril-p2p/tendril/internal/testutil"
)

type vectorFile struct {
	Cases []struct {
		ID           string `json:"id"`
		KeyHex       string `json:"key_hex"`
		PlaintextHex string `json:"plaintext_hex"`
		FillHex      string `json:"fill_hex"`
		Ciphertext   string `json:"ciphertext_hex"`
		PaddedHex    string `json:"padded_hex"`
	} `json:"cases"`
	Negative []struct {
		ID         string  `json:"id"`
		KeyHex     string  `json:"key_hex"`
		Ciphertext string  `json:"ciphertext_hex"`
		Blocks     string  `json:"decrypted_blocks_hex"`
		MiraiGo    outcome `json:"miraigo"`
		GofastTEA  outcome `json:"gofasttea"`
	} `json:"decrypt_negative_cases"`
}

type outcome struct {
	Outcome      string  `json:"outcome"`
	PlaintextHex *string `json:"plaintext_hex"`
	Panic        string  `json:"panic"`
}

func loadVectors(t testing.TB) *vectorFile {
	t.Helper()
	var v vectorFile
	testutil.ReadJSON(t, "testdata/tea_vectors.json", &v)
	if len(v.Cases) < 100 || len(v.Negative) < 10 {
		t.Fatalf("vector file has only %d cases and %d negative cases", len(v.Cases), len(v.Negative))
	}
	return &v
}

func mustCipher(t testing.TB, key []byte) *Cipher {
	t.Helper()
	c, err := NewCipher(key)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestVectors(t *testing.T) {
	v := loadVectors(t)
	lengths := map[int]bool{}
	for _, tc := range v.Cases {
		c := mustCipher(t, testutil.Unhex(t, tc.KeyHex))
		pt, fill, want := testutil.Unhex(t, tc.PlaintextHex), testutil.Unhex(t, tc.FillHex), testutil.Unhex(t, tc.Ciphertext)
		lengths[len(pt)%8] = true
		if CiphertextLen(len(pt)) != len(want) {
			t.Errorf("%s: CiphertextLen(%d) = %d, want %d", tc.ID, len(pt), CiphertextLen(len(pt)), len(want))
		}
		got, err := c.EncryptWithFill(nil, pt, bytes.NewReader(fill))
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("%s: EncryptWithFill = %x, %v\nwant %x", tc.ID, got, err, want)
		}
		// The padded buffer the references encrypt.
		padded := make([]byte, len(want))
		var r [FillSize]byte
		copy(r[:], fill)
		layout(padded, pt, &r, true)
		if wantPadded := testutil.Unhex(t, tc.PaddedHex); !bytes.Equal(padded, wantPadded) {
			t.Errorf("%s: layout = %x, want %x", tc.ID, padded, wantPadded)
		}
		blocks := make([]byte, len(want))
		decryptChain(&c.k, blocks, want)
		if !bytes.Equal(blocks, padded) {
			t.Errorf("%s: decrypted blocks = %x, want %x", tc.ID, blocks, padded)
		}
		dec, err := c.Decrypt(nil, want)
		if err != nil || !bytes.Equal(dec, pt) || dec == nil {
			t.Errorf("%s: Decrypt = %x (nil=%v), %v; want %x", tc.ID, dec, dec == nil, err, pt)
		}
		_, err = c.DecryptStrict(nil, want)
		trailerZero := !bytes.ContainsFunc(padded[len(padded)-7:], func(r rune) bool { return r != 0 })
		if trailerZero && err != nil || !trailerZero && !errors.Is(err, ErrTrailer) {
			t.Errorf("%s: DecryptStrict error = %v with trailer %x", tc.ID, err, padded[len(padded)-7:])
		}
	}
	if len(lengths) != 8 {
		t.Errorf("vectors cover only %d residues of n mod 8", len(lengths))
	}
}

func TestNegativeVectors(t *testing.T) {
	v := loadVectors(t)
	for _, tc := range v.Negative {
		c := mustCipher(t, testutil.Unhex(t, tc.KeyHex))
		ct := testutil.Unhex(t, tc.Ciphertext)
		if tc.Blocks != "" {
			blocks := make([]byte, len(ct))
			decryptChain(&c.k, blocks, ct)
			if want := testutil.Unhex(t, tc.Blocks); !bytes.Equal(blocks, want) {
				t.Errorf("%s: blocks = %x, want %x", tc.ID, blocks, want)
			}
		}
		prefix := []byte("prefix")
		got, err := c.Decrypt(bytes.Clone(prefix), ct)
		switch {
		case tc.MiraiGo.Outcome == "nil" && tc.GofastTEA.Outcome == "nil":
			if !errors.Is(err, ErrCiphertextSize) {
				t.Errorf("%s: error = %v, want ErrCiphertextSize", tc.ID, err)
			}
		case tc.MiraiGo.Outcome == "panic":
			if !errors.Is(err, ErrPadding) {
				t.Errorf("%s: error = %v, want ErrPadding", tc.ID, err)
			}
		case tc.MiraiGo.Outcome == "bytes":
			want := testutil.Unhex(t, *tc.MiraiGo.PlaintextHex)
			if tc.GofastTEA.Outcome == "bytes" && *tc.GofastTEA.PlaintextHex != *tc.MiraiGo.PlaintextHex {
				t.Fatalf("%s: references disagree", tc.ID)
			}
			if err != nil || !bytes.Equal(got[len(prefix):], want) {
				t.Errorf("%s: Decrypt = %x, %v; want %x", tc.ID, got, err, want)
			}
		default:
			t.Fatalf("%s: unhandled outcome %+v", tc.ID, tc.MiraiGo)
		}
		if err != nil {
			if !bytes.Equal(got, prefix) {
				t.Errorf("%s: dst changed on error: %q", tc.ID, got)
			}
			if !strings.HasPrefix(err.Error(), "tea: ") {
				t.Errorf("%s: error %q lacks the package prefix", tc.ID, err)
			}
		}
	}
}

func TestNewCipherKeySize(t *testing.T) {
	for _, n := range []int{0, 1, 8, 15, 17, 24, 32} {
		if _, err := NewCipher(make([]byte, n)); !errors.Is(err, ErrKeySize) {
			t.Errorf("NewCipher(%d bytes) error = %v, want ErrKeySize", n, err)
		}
	}
}

func TestCiphertextLen(t *testing.T) {
	if CiphertextLen(-1) != 0 {
		t.Error("CiphertextLen(-1) != 0")
	}
	for n := range 1000 {
		got := CiphertextLen(n)
		want := 8 * ((n + 10 + 7) / 8)
		if got != want || got%8 != 0 || got-n < 10 || got-n > 17 {
			t.Fatalf("CiphertextLen(%d) = %d, want %d", n, got, want)
		}
	}
}

func TestRoundTrip(t *testing.T) {
	key := make([]byte, KeySize)
	rand.Read(key)
	c := mustCipher(t, key)
	check := func(n int) {
		pt := make([]byte, n)
		rand.Read(pt)
		ct := c.Encrypt([]byte("x"), pt)
		if len(ct) != 1+CiphertextLen(n) || ct[0] != 'x' {
			t.Fatalf("n=%d: Encrypt gave %d bytes", n, len(ct))
		}
		for _, dec := range []func([]byte, []byte) ([]byte, error){c.Decrypt, c.DecryptStrict} {
			got, err := dec([]byte("y"), ct[1:])
			if err != nil || got[0] != 'y' || !bytes.Equal(got[1:], pt) {
				t.Fatalf("n=%d: round trip failed: %v", n, err)
			}
		}
		ct2, err := c.EncryptWithFill(nil, pt, rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		if got, err := c.Decrypt(nil, ct2); err != nil || !bytes.Equal(got, pt) {
			t.Fatalf("n=%d: EncryptWithFill round trip failed: %v", n, err)
		}
	}
	for n := 0; n <= 300; n++ {
		check(n)
	}
	r := mrand.New(mrand.NewPCG(1, 2))
	for range 50 {
		check(301 + r.IntN(70000))
	}
}

// TestEncryptRandomizes checks that Encrypt draws filler: two encryptions of
// the same plaintext differ in their first block, and the trailer is zero.
func TestEncryptRandomizes(t *testing.T) {
	c := mustCipher(t, make([]byte, KeySize))
	for n := range 16 {
		pt := make([]byte, n)
		a, b := c.Encrypt(nil, pt), c.Encrypt(nil, pt)
		if bytes.Equal(a[:8], b[:8]) {
			t.Errorf("n=%d: two encryptions share their first block", n)
		}
		if _, err := c.DecryptStrict(nil, a); err != nil {
			t.Errorf("n=%d: Encrypt output has a non-zero trailer: %v", n, err)
		}
	}
}

func TestEncryptInPlace(t *testing.T) {
	c := mustCipher(t, []byte("0123456789ABCDEF"))
	for n := range 100 {
		pt := make([]byte, n)
		rand.Read(pt)
		fill := make([]byte, FillSize)
		rand.Read(fill)
		want, _ := c.EncryptWithFill(nil, pt, bytes.NewReader(fill))
		buf := make([]byte, n, CiphertextLen(n))
		copy(buf, pt)
		got, err := c.EncryptWithFill(buf[:0], buf, bytes.NewReader(fill))
		if err != nil || !bytes.Equal(got, want) || &got[0] != &buf[:1][0] {
			t.Fatalf("n=%d: in-place EncryptWithFill differs or reallocated", n)
		}
		dec, err := c.Decrypt(got[:0], got)
		if err != nil || !bytes.Equal(dec, pt) {
			t.Fatalf("n=%d: in-place Decrypt = %x, %v", n, dec, err)
		}
	}
}

func TestEncryptWithFillError(t *testing.T) {
	c := mustCipher(t, make([]byte, KeySize))
	dst := []byte("keep")
	for _, r := range []interface{ Read([]byte) (int, error) }{
		bytes.NewReader(make([]byte, FillSize-1)),
		iotest.ErrReader(errors.New("boom")),
	} {
		got, err := c.EncryptWithFill(dst, []byte("hi"), r)
		if !errors.Is(err, ErrFill) || string(got) != "keep" {
			t.Errorf("EncryptWithFill with a failing reader = %q, %v", got, err)
		}
	}
}

func TestDecryptLengths(t *testing.T) {
	c := mustCipher(t, make([]byte, KeySize))
	for n := range 64 {
		got, err := c.Decrypt(nil, make([]byte, n))
		valid := n >= 16 && n%8 == 0
		if valid != (err == nil) && !errors.Is(err, ErrPadding) {
			t.Errorf("Decrypt(%d bytes) = %x, %v", n, got, err)
		}
		if !valid && !errors.Is(err, ErrCiphertextSize) {
			t.Errorf("Decrypt(%d bytes) error = %v, want ErrCiphertextSize", n, err)
		}
	}
}

// TestDecryptShort16 checks every header value of a 16-byte message.
func TestDecryptShort16(t *testing.T) {
	c := mustCipher(t, []byte("0123456789ABCDEF"))
	for h := range 8 {
		padded := make([]byte, 16)
		padded[0] = byte(h)
		for i := 1; i < 16; i++ {
			padded[i] = byte(i)
		}
		ct := bytes.Clone(padded)
		encryptChain(&c.k, ct)
		got, err := c.Decrypt(nil, ct)
		start := h + 3
		switch {
		case start > 9:
			if !errors.Is(err, ErrPadding) {
				t.Errorf("header %d: error %v, want ErrPadding", h, err)
			}
		case err != nil || !bytes.Equal(got, padded[start:9]) || got == nil:
			t.Errorf("header %d: Decrypt = %x, %v; want %x", h, got, err, padded[start:9])
		}
	}
}

func TestNoAllocs(t *testing.T) {
	if testing.CoverMode() != "" || raceEnabled {
		t.Skip("coverage and the race detector change allocations")
	}
	c := mustCipher(t, make([]byte, KeySize))
	pt := make([]byte, 1000)
	dst := make([]byte, 0, 2000)
	ct := c.Encrypt(nil, pt)
	zeros := make([]byte, FillSize)
	fill := bytes.NewReader(zeros)
	pt16 := make([]byte, 16)
	for name, f := range map[string]func(){
		"Encrypt":    func() { c.Encrypt(dst, pt) },
		"Encrypt/16": func() { c.Encrypt(dst, pt16) },
		"Encrypt/15": func() { c.Encrypt(dst, pt16[:15]) },
		"EncryptWithFill": func() {
			fill.Reset(zeros)
			c.EncryptWithFill(dst, pt, fill)
		},
		"Decrypt":       func() { c.Decrypt(dst, ct) },
		"DecryptStrict": func() { c.DecryptStrict(dst, ct) },
	} {
		if n := testing.AllocsPerRun(100, f); n != 0 {
			t.Errorf("%s allocates %v times", name, n)
		}
	}
}

func FuzzDecrypt(f *testing.F) {
	v := loadVectors(f)
	for _, tc := range v.Cases[:20] {
		f.Add(testutil.Unhex(f, tc.KeyHex), testutil.Unhex(f, tc.Ciphertext))
	}
	for _, tc := range v.Negative {
		f.Add(testutil.Unhex(f, tc.KeyHex), testutil.Unhex(f, tc.Ciphertext))
	}
	f.Fuzz(func(t *testing.T, key, ct []byte) {
		if len(key) < KeySize {
			key = append(key, make([]byte, KeySize-len(key))...)
		}
		c := mustCipher(t, key[:KeySize])
		pt, err := c.Decrypt(nil, ct)
		if err != nil {
			if pt != nil {
				t.Fatalf("error %v with output %x", err, pt)
			}
			return
		}
		if pt == nil || len(pt) > len(ct)-9 {
			t.Fatalf("Decrypt of %d bytes gave %d bytes", len(ct), len(pt))
		}
		// Re-encrypting with the filler and trailer recovered from the
		// decrypted blocks must give back the ciphertext.
		blocks := make([]byte, len(ct))
		decryptChain(&c.k, blocks, ct)
		re := bytes.Clone(blocks)
		encryptChain(&c.k, re)
		if !bytes.Equal(re, ct) {
			t.Fatalf("chain is not invertible for %x", ct)
		}
		strict, serr := c.DecryptStrict(nil, ct)
		if serr == nil && !bytes.Equal(strict, pt) || serr != nil && !errors.Is(serr, ErrTrailer) {
			t.Fatalf("DecryptStrict = %x, %v; Decrypt = %x", strict, serr, pt)
		}
	})
}

func ExampleCipher_EncryptWithFill() {
	c, err := NewCipher([]byte("0123456789ABCDEF"))
	if err != nil {
		panic(err)
	}
	// An all-zero filler reproduces MiraiGo's deterministic output.
	ct, err := c.EncryptWithFill(nil, nil, bytes.NewReader(make([]byte, FillSize)))
	if err != nil {
		panic(err)
	}
	fmt.Printf("%x\n", ct)
	pt, err := c.Decrypt(nil, ct)
	fmt.Printf("%q %v\n", pt, err)
	// Output:
	// c0a216328836ea1a3fb8fbe418d1e15f
	// "" <nil>
}

func TestReadRandom(t *testing.T) {
	// Many small reads crossing refills: no two consecutive 9-byte reads are
	// equal and the bytes are not all zero.
	var prev [9]byte
	zero := 0
	for range 1000 {
		var r [9]byte
		readRandom(r[:])
		if r == prev {
			t.Fatal("readRandom repeated itself")
		}
		if r == [9]byte{} {
			zero++
		}
		prev = r
	}
	if zero > 0 {
		t.Fatalf("%d all-zero reads", zero)
	}
}
