// Package tea implements the 16-cycle TEA cipher in the padding and chaining
// mode of the QQ protocol, byte-compatible with the Go QQ clients
// (Mrs4s/MiraiGo binary/tea.go and fumiama/gofastTEA).
//
// # Security warning
//
// This is a legacy cipher, provided only to speak to peers that require it.
// It is NOT secure: TEA has a 64-bit block and known related-key weaknesses,
// the mode has no IV beyond a few filler bytes, and above all there is no
// integrity check. A corrupted, truncated, extended or forged ciphertext, or
// one decrypted under the wrong key, decrypts without error to garbage of
// some length; an attacker can modify messages undetected. Never use it to
// protect anything on its own; new protocols should use package
// github.com/tendril-p2p/tendril/cipher/aead.
//
// # Format
//
// The key is four big-endian 32-bit words. A plaintext of n bytes is padded
// to N = 8*ceil((n+10)/8) bytes: one header byte 0xF8|(fill-3) with
// fill = 10 - (n+1)%8, fill-1 filler bytes, the plaintext, and a 7-byte
// trailer meant to be zero. The padded 8-byte blocks p_i, read big-endian,
// are chained as x_i = p_i ^ c_(i-1), c_i = E(x_i) ^ x_(i-1) with c_0 = x_0 = 0,
// where E is TEA with 16 cycles and delta 0x9E3779B9. The layout is written
// down in detail in the shared vectors' FORMAT.md.
//
// Encrypt draws the filler bytes from crypto/rand and writes a zero trailer.
// Where the CPU has AVX2 or AVX-512, messages whose first block is all
// header and filler (3 plaintext lengths in 8, 16 bytes among them) start
// from a first block encrypted ahead of time, 16 side by side, and kept in a
// per-Cipher reserve until used, once; the filler of those blocks comes
// from a ChaCha8 generator (math/rand/v2) seeded from crypto/rand, which is
// three times cheaper per byte here. See reserve.go.
// EncryptWithFill takes the 12 filler bytes the references draw (including
// the three that end up in the trailer for plaintexts of 0 to 6 bytes) from
// a reader, which reproduces their output byte for byte.
//
// Decrypt accepts every input the references accept and returns the same
// plaintext; it returns a typed error where they return nil or panic.
// DecryptStrict also rejects a non-zero trailer, as the classic QQ decoder
// does.
//
// EncryptBatch and DecryptBatch process many independent messages at once
// in 16 SIMD lanes (AVX-512, or AVX2 as two groups of 8) where the CPU
// allows, with output identical to the single-message functions.
package tea

import (
	"encoding/binary"
	"fmt"
	"io"
	"sync"

	"github.com/tendril-p2p/tendril/internal/sliceutil"
)

// BlockSize is the TEA block size in bytes.
const BlockSize = 8

// KeySize is the TEA key size in bytes.
const KeySize = 16

// FillSize is the number of filler bytes EncryptWithFill reads per message.
const FillSize = 12

// MinCiphertextSize is the length of the shortest valid ciphertext, that of
// the empty plaintext. A ciphertext is 10 to 17 bytes longer than its
// plaintext (see CiphertextLen).
const MinCiphertextSize = 16

// A Cipher is a TEA key schedule. It is safe for concurrent use, and must
// not be copied after first use.
type Cipher struct {
	k   [4]uint32
	res reserve // first blocks for Encrypt (see reserve.go)
}

// NewCipher returns a Cipher for the 16-byte key. Any other length yields an
// error wrapping ErrKeySize.
func NewCipher(key []byte) (*Cipher, error) {
	if len(key) != KeySize {
		return nil, fmt.Errorf("%w: %d bytes, want %d", ErrKeySize, len(key), KeySize)
	}
	c := new(Cipher)
	for i := range c.k {
		c.k[i] = binary.BigEndian.Uint32(key[4*i:])
	}
	return c, nil
}

// fillLen returns the number of bytes before the plaintext (header and
// filler): 10 - (n+1)%8, in 3..10.
func fillLen(n int) int {
	return 10 - (n+1)%8
}

// CiphertextLen returns the ciphertext length for an n-byte plaintext:
// n+10 rounded up to a multiple of 8. It returns 0 for a negative n.
func CiphertextLen(n int) int {
	if n < 0 {
		return 0
	}
	return fillLen(n) + n + 7
}

// layout writes the padded message for plaintext into out
// (len(out) == CiphertextLen(len(plaintext))): header, filler r[1:fill],
// plaintext, trailer. With keepTrailer the trailer holds r[9:12] for
// plaintexts of 0 to 6 bytes, as the references produce; otherwise it is
// zero. plaintext may overlap out: it is moved first.
func layout(out, plaintext []byte, r *[FillSize]byte, keepTrailer bool) {
	n := len(plaintext)
	fill := fillLen(n)
	copy(out[fill:], plaintext)
	out[0] = 0xF8 | byte(fill-3)
	copy(out[1:fill], r[1:fill])
	trailer := out[fill+n:]
	clear(trailer)
	if keepTrailer && n <= 6 {
		// fill+n == 9 here: buffer bytes 9..11 keep r[9:12].
		copy(out[9:12], r[9:12])
	}
}

// Encrypt appends the encryption of plaintext to dst and returns the
// extended slice. The filler bytes are random (see the package
// documentation) and the trailer is zero. dst may be plaintext[:0] to encrypt in place when its capacity holds
// CiphertextLen(len(plaintext)) bytes.
//
// Where the CPU runs the batch kernels (AVX2 or AVX-512), the first block of
// a message with 8 or more bytes of header and filler (a plaintext length
// of 8k+7, 8k or 8k+1 bytes) is not computed here: it comes from a per-Cipher
// reserve of random first blocks encrypted ahead of time, 16 side by side,
// each used exactly once. The output is the same as with the block computed
// here from the same filler bytes.
func (c *Cipher) Encrypt(dst, plaintext []byte) []byte {
	n := len(plaintext)
	fill := fillLen(n)
	ret, out := sliceutil.ForAppend(dst, CiphertextLen(n))
	if fill >= 8 && useReserve {
		x, e, extra := c.takeHead(fill)
		copy(out[fill:], plaintext) // first: plaintext may overlap out
		binary.BigEndian.PutUint64(out, e)
		copy(out[BlockSize:fill], extra[:])
		clear(out[fill+n:])
		encryptChainFrom(&c.k, out[BlockSize:], e, x)
		return ret
	}
	var r [FillSize]byte
	readRandom(r[1:fill])
	layout(out, plaintext, &r, false)
	encryptChain(&c.k, out)
	return ret
}

var fillPool = sync.Pool{New: func() any { return new([FillSize]byte) }}

// EncryptWithFill appends the encryption of plaintext to dst as Encrypt
// does, but reads the FillSize filler bytes R from fill and lays them out as
// the references do: R[0] is unused, R[1:f] follow the header, and for
// plaintexts of 0 to 6 bytes R[9:12] end up in the trailer. All-zero R
// reproduces MiraiGo's current output. If fill fails, the error wraps
// ErrFill and dst is returned unchanged.
func (c *Cipher) EncryptWithFill(dst, plaintext []byte, fill io.Reader) ([]byte, error) {
	// The buffer passed to the reader escapes; a pooled one keeps this
	// function from allocating.
	r := fillPool.Get().(*[FillSize]byte)
	defer fillPool.Put(r)
	if _, err := io.ReadFull(fill, r[:]); err != nil {
		return dst, fmt.Errorf("%w: %w", ErrFill, err)
	}
	ret, out := sliceutil.ForAppend(dst, CiphertextLen(len(plaintext)))
	layout(out, plaintext, r, true)
	encryptChain(&c.k, out)
	return ret, nil
}

// Decrypt appends the plaintext of ciphertext to dst and returns the
// extended slice. It returns what the reference decoders return, including
// for inputs with a non-zero trailer; the empty plaintext gives an empty
// slice and a nil error. A ciphertext shorter than 16 bytes or not a multiple
// of 8 yields an error wrapping ErrCiphertextSize; a 16-byte input whose
// header points past its end one wrapping ErrPadding. On error dst is
// returned unchanged.
//
// A nil error does not mean the message is authentic: TEA has no integrity
// check, and tampered input decrypts to garbage. dst and ciphertext may
// overlap exactly (dst = ciphertext[:0]) or not at all; in place, the
// ciphertext is overwritten even when an error is returned.
func (c *Cipher) Decrypt(dst, ciphertext []byte) ([]byte, error) {
	return c.decrypt(dst, ciphertext, false)
}

// DecryptStrict is Decrypt that also rejects, with an error wrapping
// ErrTrailer, a message whose 7-byte trailer is not all zero, as the classic
// QQ C decoder does. It refuses gofastTEA's output for plaintexts of 0 to 6
// bytes (which carries random trailer bytes) but accepts Encrypt's.
func (c *Cipher) DecryptStrict(dst, ciphertext []byte) ([]byte, error) {
	return c.decrypt(dst, ciphertext, true)
}

func checkCiphertextLen(n int) error {
	if n < MinCiphertextSize || n%BlockSize != 0 {
		return fmt.Errorf("%w: %d bytes", ErrCiphertextSize, n)
	}
	return nil
}

func (c *Cipher) decrypt(dst, ciphertext []byte, strict bool) ([]byte, error) {
	if err := checkCiphertextLen(len(ciphertext)); err != nil {
		return dst, err
	}
	ret, out := sliceutil.ForAppend(dst, len(ciphertext))
	decryptChain(&c.k, out, ciphertext)
	n, err := unpad(out, strict)
	if err != nil {
		return dst, err
	}
	return ret[:len(dst)+n], nil
}

// unpad moves the plaintext of the decrypted padded message out to its
// start and returns its length. On error it clears out.
func unpad(out []byte, strict bool) (int, error) {
	start, end := int(out[0]&7)+3, len(out)-7
	if start > end {
		clear(out)
		return 0, fmt.Errorf("%w: plaintext would start at %d of %d bytes", ErrPadding, start, len(out))
	}
	if strict && binary.BigEndian.Uint64(out[len(out)-8:])<<8 != 0 {
		clear(out)
		return 0, ErrTrailer
	}
	return copy(out, out[start:end]), nil
}
