package aead

import (
	"bytes"
	"crypto/cipher"
	"crypto/rand"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/tendril-p2p/tendril/cipher/aesgcm"
	"github.com/tendril-p2p/tendril/internal/testutil"
)

var allSuites = []Suite{AES128GCM, AES256GCM, ChaCha20Poly1305}

func TestSuiteNames(t *testing.T) {
	want := map[Suite]string{
		AES128GCM:        "AES-128-GCM",
		AES256GCM:        "AES-256-GCM",
		ChaCha20Poly1305: "CHACHA20-POLY1305",
	}
	for s, name := range want {
		if got := s.String(); got != name {
			t.Errorf("%d.String() = %q, want %q", s, got, name)
		}
		p, err := ParseSuite(name)
		if err != nil || p != s {
			t.Errorf("ParseSuite(%q) = %v, %v; want %v", name, p, err, s)
		}
		if !s.Valid() {
			t.Errorf("%v.Valid() = false", s)
		}
	}
	for _, bad := range []string{"", "aes-128-gcm", "AES-192-GCM", "CHACHA20-POLY1305 ", "ChaCha20-Poly1305"} {
		if _, err := ParseSuite(bad); !errors.Is(err, ErrUnknownSuite) {
			t.Errorf("ParseSuite(%q) error = %v, want ErrUnknownSuite", bad, err)
		}
	}
	for _, s := range []Suite{0, 4, 255} {
		if s.Valid() || s.KeySize() != 0 || s.NonceSize() != 0 || s.Overhead() != 0 {
			t.Errorf("invalid suite %d reports sizes %d/%d/%d valid=%v", s, s.KeySize(), s.NonceSize(), s.Overhead(), s.Valid())
		}
		if got, want := s.String(), fmt.Sprintf("Suite(%d)", s); got != want {
			t.Errorf("String() = %q, want %q", got, want)
		}
		if _, err := New(s, make([]byte, 32)); !errors.Is(err, ErrUnknownSuite) {
			t.Errorf("New(%d) error = %v, want ErrUnknownSuite", s, err)
		}
	}
}

func TestSizes(t *testing.T) {
	wantKey := map[Suite]int{AES128GCM: 16, AES256GCM: 32, ChaCha20Poly1305: 32}
	for _, s := range allSuites {
		if s.KeySize() != wantKey[s] {
			t.Errorf("%v.KeySize() = %d, want %d", s, s.KeySize(), wantKey[s])
		}
		a, err := New(s, make([]byte, s.KeySize()))
		if err != nil {
			t.Fatal(err)
		}
		if a.NonceSize() != s.NonceSize() || s.NonceSize() != 12 {
			t.Errorf("%v: NonceSize %d, AEAD says %d", s, s.NonceSize(), a.NonceSize())
		}
		if a.Overhead() != s.Overhead() || s.Overhead() != 16 {
			t.Errorf("%v: Overhead %d, AEAD says %d", s, s.Overhead(), a.Overhead())
		}
	}
}

func TestKeySizeErrors(t *testing.T) {
	for _, s := range allSuites {
		for _, n := range []int{0, 1, 15, 16, 17, 24, 31, 32, 33, 64} {
			_, err := New(s, make([]byte, n))
			if n == s.KeySize() {
				if err != nil {
					t.Errorf("New(%v, %d bytes) = %v", s, n, err)
				}
				continue
			}
			if !errors.Is(err, ErrKeySize) {
				t.Errorf("New(%v, %d bytes) error = %v, want ErrKeySize", s, n, err)
			}
		}
	}
}

func TestPreferred(t *testing.T) {
	defer func(v bool) { hasAESHW = v }(hasAESHW)
	for _, hw := range []bool{true, false} {
		hasAESHW = hw
		if HasAESHardware() != hw {
			t.Fatal("HasAESHardware does not follow the switch")
		}
		p := Preferred()
		if len(p) != 3 {
			t.Fatalf("Preferred() = %v", p)
		}
		for _, s := range allSuites {
			if !slices.Contains(p, s) {
				t.Errorf("hw=%v: Preferred() = %v lacks %v", hw, p, s)
			}
		}
		want := ChaCha20Poly1305
		if hw {
			want = AES128GCM
		}
		if p[0] != want {
			t.Errorf("hw=%v: Preferred()[0] = %v, want %v", hw, p[0], want)
		}
		p[0] = 0 // the caller owns the slice
		if Preferred()[0] != want {
			t.Error("Preferred returns a shared slice")
		}
	}
}

func TestDetectAESHardware(t *testing.T) {
	if detectAESHardware() != HasAESHardware() {
		t.Error("HasAESHardware differs from detection at init")
	}
	t.Logf("HasAESHardware() = %v, Preferred() = %v", HasAESHardware(), Preferred())
}

func runWycheproof(t *testing.T, file string, suiteFor func(keyBits int) (Suite, bool)) {
	var f testutil.WycheproofAEAD
	testutil.ReadJSON(t, file, &f)
	var ran, valid, invalid, skipped int
	for _, g := range f.TestGroups {
		s, ok := suiteFor(g.KeySize)
		if !ok || g.IvSize != 96 || g.TagSize != 128 {
			skipped += len(g.Tests)
			continue
		}
		for _, tc := range g.Tests {
			name := fmt.Sprintf("%s/tc%d", s, tc.TcID)
			a, err := New(s, testutil.Unhex(t, tc.Key))
			if err != nil {
				t.Fatalf("%s: New: %v", name, err)
			}
			nonce, aad, msg := testutil.Unhex(t, tc.Iv), testutil.Unhex(t, tc.Aad), testutil.Unhex(t, tc.Msg)
			sealed := append(testutil.Unhex(t, tc.Ct), testutil.Unhex(t, tc.Tag)...)
			opened, openErr := a.Open(nil, nonce, sealed, aad)
			ran++
			switch tc.Result {
			case "valid":
				valid++
				if got := a.Seal(nil, nonce, msg, aad); !bytes.Equal(got, sealed) {
					t.Errorf("%s (%s): Seal = %x, want %x", name, tc.Comment, got, sealed)
				}
				if openErr != nil || !bytes.Equal(opened, msg) {
					t.Errorf("%s (%s): Open = %x, %v; want %x", name, tc.Comment, opened, openErr, msg)
				}
			case "invalid":
				invalid++
				if openErr == nil {
					t.Errorf("%s (%s, %v): Open of an invalid case succeeded", name, tc.Comment, tc.Flags)
				}
			default:
				t.Errorf("%s: unexpected result %q", name, tc.Result)
			}
		}
	}
	t.Logf("%s: %d cases run through New (%d valid, %d invalid), %d not expressible (key or nonce size)",
		f.Algorithm, ran, valid, invalid, skipped)
	if ran == 0 || valid == 0 || invalid == 0 {
		t.Fatal("vector file yielded no usable cases")
	}
}

// forEachAESPath runs f with the AES suites on aesgcm's kernels (where this
// CPU has them) and on crypto/cipher.
func forEachAESPath(t *testing.T, f func(t *testing.T)) {
	t.Helper()
	prev := useVAES
	defer func() { useVAES = prev }()
	paths := []bool{false}
	if aesgcm.Implementation() != "stdlib" {
		paths = append(paths, true)
	}
	for _, v := range paths {
		useVAES = v
		t.Run(Implementation(AES128GCM), f)
	}
}

func TestImplementation(t *testing.T) {
	forEachAESPath(t, func(t *testing.T) {
		for _, s := range []Suite{AES128GCM, AES256GCM} {
			a, err := New(s, make([]byte, s.KeySize()))
			if err != nil {
				t.Fatal(err)
			}
			isVAES := strings.HasPrefix(fmt.Sprintf("%T", a), "*aesgcm.")
			if want := strings.HasPrefix(Implementation(s), "aesgcm/"); isVAES != want {
				t.Errorf("%v: Implementation says %q but New gave %T", s, Implementation(s), a)
			}
		}
	})
	if got := Implementation(ChaCha20Poly1305); got != "x/crypto/chacha20poly1305" {
		t.Errorf("Implementation(ChaCha20Poly1305) = %q", got)
	}
	if got := Implementation(0); got != "" {
		t.Errorf("Implementation(0) = %q, want empty", got)
	}
	t.Logf("AES-128-GCM: %s", Implementation(AES128GCM))
}

// TestAESPathsInteroperate seals on one AES-GCM path and opens on the other.
func TestAESPathsInteroperate(t *testing.T) {
	if aesgcm.Implementation() == "stdlib" {
		t.Skip("no aesgcm kernel on this CPU or build")
	}
	prev := useVAES
	defer func() { useVAES = prev }()
	for _, s := range []Suite{AES128GCM, AES256GCM} {
		key := make([]byte, s.KeySize())
		rand.Read(key)
		nonce := make([]byte, 12)
		msg := make([]byte, 5000)
		rand.Read(msg)
		useVAES = true
		fast, _ := New(s, key)
		useVAES = false
		std, _ := New(s, key)
		for _, pair := range [][2]cipher.AEAD{{fast, std}, {std, fast}} {
			got, err := pair[1].Open(nil, nonce, pair[0].Seal(nil, nonce, msg, []byte("hdr")), []byte("hdr"))
			if err != nil || !bytes.Equal(got, msg) {
				t.Fatalf("%v: sealed with %T, opened with %T: %v", s, pair[0], pair[1], err)
			}
		}
	}
}

func TestWycheproofAESGCM(t *testing.T) {
	forEachAESPath(t, testWycheproofAESGCM)
}

func testWycheproofAESGCM(t *testing.T) {
	runWycheproof(t, "testdata/aes_gcm_test.json", func(bits int) (Suite, bool) {
		switch bits {
		case 128:
			return AES128GCM, true
		case 256:
			return AES256GCM, true
		}
		return 0, false
	})
}

func TestWycheproofChaCha20Poly1305(t *testing.T) {
	runWycheproof(t, "testdata/chacha20_poly1305_test.json", func(bits int) (Suite, bool) {
		return ChaCha20Poly1305, bits == 256
	})
}

// TestBitFlips flips every bit of the sealed message, the nonce and the
// additional data in turn; each must make Open fail.
func TestBitFlips(t *testing.T) { forEachAESPath(t, testBitFlips) }

func testBitFlips(t *testing.T) {
	for _, s := range allSuites {
		key := make([]byte, s.KeySize())
		rand.Read(key)
		a, err := New(s, key)
		if err != nil {
			t.Fatal(err)
		}
		nonce := make([]byte, s.NonceSize())
		rand.Read(nonce)
		msg := []byte("tendril carries bytes between peers")
		aad := []byte("header")
		sealed := a.Seal(nil, nonce, msg, aad)
		if got, err := a.Open(nil, nonce, sealed, aad); err != nil || !bytes.Equal(got, msg) {
			t.Fatalf("%v: round trip failed: %v", s, err)
		}
		for name, buf := range map[string][]byte{"sealed": sealed, "nonce": nonce, "aad": aad} {
			for i := range len(buf) * 8 {
				buf[i/8] ^= 1 << (i % 8)
				if _, err := a.Open(nil, nonce, sealed, aad); err == nil {
					t.Errorf("%v: Open succeeded with bit %d of %s flipped", s, i, name)
				}
				buf[i/8] ^= 1 << (i % 8)
			}
		}
		for n := range len(sealed) {
			if _, err := a.Open(nil, nonce, sealed[:n], aad); err == nil {
				t.Errorf("%v: Open succeeded on %d-byte truncation", s, n)
			}
		}
	}
}

// TestWrongKey checks that a message sealed under one key does not open
// under another key of any suite.
func TestWrongKey(t *testing.T) { forEachAESPath(t, testWrongKey) }

func testWrongKey(t *testing.T) {
	nonce := make([]byte, 12)
	for _, s := range allSuites {
		key := make([]byte, s.KeySize())
		rand.Read(key)
		a, _ := New(s, key)
		sealed := a.Seal(nil, nonce, []byte("msg"), nil)
		for _, s2 := range allSuites {
			key2 := make([]byte, s2.KeySize())
			copy(key2, key)
			key2[0] ^= 1
			b, err := New(s2, key2)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := b.Open(nil, nonce, sealed, nil); err == nil {
				t.Errorf("sealed with %v, opened with %v under a different key", s, s2)
			}
		}
	}
}

func BenchmarkSeal(b *testing.B) {
	benchSuites(b, func(b *testing.B, a cipher.AEAD, nonce []byte, size int) {
		msg := make([]byte, size)
		dst := make([]byte, 0, size+a.Overhead())
		for b.Loop() {
			dst = a.Seal(dst[:0], nonce, msg, nil)
		}
	})
}

func BenchmarkOpen(b *testing.B) {
	benchSuites(b, func(b *testing.B, a cipher.AEAD, nonce []byte, size int) {
		sealed := a.Seal(nil, nonce, make([]byte, size), nil)
		dst := make([]byte, 0, size)
		for b.Loop() {
			var err error
			dst, err = a.Open(dst[:0], nonce, sealed, nil)
			if err != nil {
				b.Fatal(err)
			}
		}
	})
}

// benchSuites runs f for every suite and message size, with the suite's AEAD under a zero
// key and a zero nonce; the sub-benchmark is named "suite/size" and counts size bytes a loop.
func benchSuites(b *testing.B, f func(b *testing.B, a cipher.AEAD, nonce []byte, size int)) {
	for _, s := range allSuites {
		for _, size := range []int{64, 1024, 16 * 1024} {
			b.Run(fmt.Sprintf("%s/%s", s, testutil.SizeName(size)), func(b *testing.B) {
				a, _ := New(s, make([]byte, s.KeySize()))
				b.SetBytes(int64(size))
				b.ReportAllocs()
				f(b, a, make([]byte, s.NonceSize()), size)
			})
		}
	}
}
