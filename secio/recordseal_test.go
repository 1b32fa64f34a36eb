package secio

import (
	"bytes"
	"errors"
	"io"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/tendril-p2p/tendril/cipher/aead"
)

// recordSizes are record contents around every boundary the seal path has:
// the AES-GCM kernels' 16-byte blocks and 256-byte chunks, the
// write-behind threshold, the mux's 64 KiB data frames and 256 KiB writes.
var recordSizes = func() []int {
	var s []int
	for n := 0; n <= 600; n++ {
		s = append(s, n)
	}
	for _, base := range []int{4096, writeBehindMin, 65536, 65536 + 12, 4 * (65536 + 12), 262144} {
		for _, d := range []int{-257, -256, -255, -17, -16, -15, -1, 0, 1, 15, 16, 17, 255, 256, 257} {
			s = append(s, base+d)
		}
	}
	return s
}()

// TestSealRecordPaths seals every record size and type both ways, with the
// AEAD's SealWithByte (the data read from the caller's buffer) and with the
// copy path every AEAD has, and requires the same frames byte for byte, the
// caller's buffer untouched. On a CPU with the vector kernels the AES suites
// must take the SealWithByte path, so that the test covers it.
func TestSealRecordPaths(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for _, s := range []aead.Suite{aead.AES128GCM, aead.AES256GCM, aead.ChaCha20Poly1305} {
		t.Run(s.String(), func(t *testing.T) {
			var secret [secretSize]byte
			for i := range secret {
				secret[i] = byte(rng.Uint32())
			}
			var fast, slow outHalf
			if err := fast.install(s, &secret); err != nil {
				t.Fatal(err)
			}
			if err := slow.install(s, &secret); err != nil {
				t.Fatal(err)
			}
			slow.byteSealer = nil
			kernel := strings.HasPrefix(aead.Implementation(s), "aesgcm/vaes")
			if kernel != (fast.byteSealer != nil) {
				t.Fatalf("%s (%s): SealWithByte path %v", s, aead.Implementation(s), fast.byteSealer != nil)
			}
			t.Logf("%s: SealWithByte path %v", aead.Implementation(s), kernel)
			for _, n := range recordSizes {
				for _, typ := range []byte{recordData, recordHandshake, recordKeyUpdate, recordClose} {
					if typ != recordData && n > 0 && n%97 != 0 {
						continue
					}
					chunk := make([]byte, n+1)[1:] // unaligned
					for i := range chunk {
						chunk[i] = byte(rng.Uint32())
					}
					orig := bytes.Clone(chunk)
					a, err := fast.sealRecord(chunk, typ)
					if err != nil {
						t.Fatal(err)
					}
					b, err := slow.sealRecord(chunk, typ)
					if err != nil {
						t.Fatal(err)
					}
					if !bytes.Equal(*a, *b) {
						t.Fatalf("%d bytes, type %d: the frames differ", n, typ)
					}
					if !bytes.Equal(chunk, orig) {
						t.Fatalf("%d bytes: sealing changed the caller's buffer", n)
					}
					putBuffer(a)
					putBuffer(b)
				}
			}
			if fast.sealed != slow.sealed {
				t.Fatalf("blocks counted %d and %d", fast.sealed, slow.sealed)
			}
		})
	}
}

// TestTamperedRecordType: a record sealed on the SealWithByte path whose
// encrypted type byte (or any byte) is changed still fails authentication,
// nothing of it is delivered, and the error is permanent. The type byte is
// changed so that it would decrypt to each other record type.
func TestTamperedRecordType(t *testing.T) {
	for _, s := range []aead.Suite{aead.AES128GCM, aead.AES256GCM, aead.ChaCha20Poly1305} {
		for _, n := range []int{0, 1, 255, 256, 1000, writeBehindMin, 65536 + 12} {
			msg := bytes.Repeat([]byte{0x5a}, n)
			for _, to := range []byte{recordHandshake, recordKeyUpdate, recordClose, 0x00, 0xff} {
				x, y := newBufPair()
				sa, sb := rawPair(t, x, y, s)
				frame, err := sa.out.sealRecord(msg, recordData)
				if err != nil {
					t.Fatal(err)
				}
				f := bytes.Clone(*frame)
				putBuffer(frame)
				f[frameHeaderSize+n] ^= recordData ^ to // the encrypted type byte
				x.Write(f)
				buf := make([]byte, n+64)
				got, err := sb.Read(buf)
				if got != 0 || !errors.Is(err, ErrAuthFailed) {
					t.Fatalf("%s, %d bytes, type 0x%02x: Read %d bytes, %v; want ErrAuthFailed", s, n, to, got, err)
				}
				if bytes.ContainsRune(buf, 0x5a) {
					t.Fatalf("%s, %d bytes: plaintext of a forged record reached the buffer", s, n)
				}
				if _, err := sb.Read(buf); err == nil {
					t.Fatalf("%s, %d bytes: a second Read succeeded", s, n)
				}
			}
		}
	}
}

// TestReadSizesAroundFrame writes records of several sizes on the
// SealWithByte path and reads each with every buffer size from a few bytes
// below its content to a few above (the content exactly, and the content
// plus the type byte, are the edges of opening straight into the buffer),
// plus one byte and a mux header's 12.
func TestReadSizesAroundFrame(t *testing.T) {
	for _, s := range []aead.Suite{aead.AES128GCM, aead.ChaCha20Poly1305} {
		for _, n := range []int{1, 12, 255, 256, 257, 4096, writeBehindMin - 1, writeBehindMin, writeBehindMin + 1, 65536 + 12} {
			msg := make([]byte, n)
			for i := range msg {
				msg[i] = byte(i*7 + n)
			}
			sizes := []int{1, 12}
			for d := -3; d <= 3; d++ {
				if n+d > 0 {
					sizes = append(sizes, n+d)
				}
			}
			for _, size := range sizes {
				x, y := newBufPair()
				sa, sb := rawPair(t, x, y, s)
				// Two records back to back: the second must not be
				// disturbed by how the first was read.
				for range 2 {
					if _, err := sa.Write(msg); err != nil {
						t.Fatal(err)
					}
				}
				got := make([]byte, 0, 2*n)
				buf := make([]byte, size)
				for len(got) < 2*n {
					k, err := sb.Read(buf)
					if err != nil {
						t.Fatalf("%s, %d bytes read %d at a time: %v", s, n, size, err)
					}
					if k > n {
						t.Fatalf("%s: a Read returned %d bytes, more than one record's %d", s, k, n)
					}
					got = append(got, buf[:k]...)
				}
				if !bytes.Equal(got[:n], msg) || !bytes.Equal(got[n:], msg) {
					t.Fatalf("%s, %d bytes read %d at a time: data differs", s, n, size)
				}
				sa.Close()
				if k, err := sb.Read(buf); k != 0 || err != io.EOF {
					t.Fatalf("%s, %d bytes: after the close record Read %d, %v", s, n, k, err)
				}
			}
		}
	}
}
