package tea

import (
	"crypto/rand"
	"testing"
)

// benchSizes are the plaintext sizes and sub-benchmark names of the
// reference libraries' BenchmarkTEAen/BenchmarkTEAde, so results compare
// directly: Encrypt is measured in plaintext bytes, Decrypt in ciphertext
// bytes, as there.
var benchSizes = []struct {
	name string
	n    int
}{{"16", 16}, {"256", 256}, {"4K", 4 << 10}, {"32K", 32 << 10}}

var benchCipher = func() *Cipher {
	c, err := NewCipher([]byte("0123456789ABCDEF"))
	if err != nil {
		panic(err)
	}
	return c
}()

func BenchmarkTEAen(b *testing.B) {
	for _, s := range benchSizes {
		b.Run(s.name, func(b *testing.B) {
			pt := make([]byte, s.n)
			rand.Read(pt)
			dst := make([]byte, 0, CiphertextLen(s.n))
			b.SetBytes(int64(s.n))
			b.ReportAllocs()
			for b.Loop() {
				dst = benchCipher.Encrypt(dst[:0], pt)
			}
		})
	}
}

func BenchmarkTEAde(b *testing.B) {
	for _, s := range benchSizes {
		b.Run(s.name, func(b *testing.B) {
			pt := make([]byte, s.n)
			rand.Read(pt)
			ct := benchCipher.Encrypt(nil, pt)
			dst := make([]byte, 0, len(ct))
			b.SetBytes(int64(len(ct)))
			b.ReportAllocs()
			for b.Loop() {
				var err error
				if dst, err = benchCipher.Decrypt(dst[:0], ct); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
