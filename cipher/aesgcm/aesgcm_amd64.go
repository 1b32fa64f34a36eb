//go:build amd64 && !purego

package aesgcm

import (
	"crypto/cipher"
	"crypto/subtle"

	"github.com/tendril-p2p/tendril/internal/sliceutil"
	"golang.org/x/sys/cpu"
)

// ksSize is the size of the key schedule the kernels share (see
// _asm/main.go): 15 round keys broadcast to 64 bytes each, then H^16..H^1
// and four zero blocks.
const ksSize = 1280

// CPU features, read once. golang.org/x/sys/cpu reports VAES and
// VPCLMULQDQ only when AVX-512 is present, so the 256-bit kernel's check
// reads CPUID leaf 7 itself (AVX2 implies the leaf exists and that the OS
// saves YMM state).
var (
	hasVAES512 = cpu.X86.HasAVX512F && cpu.X86.HasAVX512BW && cpu.X86.HasAVX512VL &&
		cpu.X86.HasAVX512VAES && cpu.X86.HasAVX512VPCLMULQDQ && cpu.X86.HasBMI2 &&
		cpu.X86.HasAES && cpu.X86.HasPCLMULQDQ
	hasVAES256 = cpu.X86.HasAVX2 && cpu.X86.HasAES && cpu.X86.HasPCLMULQDQ && vaesCPUID()
)

func vaesCPUID() bool {
	if !cpu.X86.HasAVX2 {
		return false
	}
	const vaes, vpclmulqdq = 1 << 9, 1 << 10
	ecx := cpuid7ECX()
	return ecx&vaes != 0 && ecx&vpclmulqdq != 0
}

// bestImpl returns the widest kernel this CPU runs.
func bestImpl() impl {
	switch {
	case hasVAES512:
		return implVAES512
	case hasVAES256:
		return implVAES256
	}
	return implStdlib
}

// available lists the implementations this build and CPU can run.
func available() []impl {
	impls := []impl{implStdlib}
	if hasVAES256 || hasVAES512 {
		impls = append(impls, implVAES256)
	}
	if hasVAES512 {
		impls = append(impls, implVAES512)
	}
	return impls
}

// gcmMaxPlaintext is the most GCM may encrypt under one nonce: 2^32-2
// blocks (the 32-bit counter starts at 2 and must not wrap into J0).
const gcmMaxPlaintext = (1<<32 - 2) * 16

// vaesGCM is the AEAD of the vector kernels.
type vaesGCM struct {
	ks     [ksSize]byte
	wide   bool // the 512-bit kernels
	aes256 bool
}

// newVAES expands key with the kernels' key setup.
func newVAES(key []byte, which impl) (cipher.AEAD, error) {
	g := &vaesGCM{wide: which == implVAES512, aes256: len(key) == 32}
	if g.aes256 {
		initKey256((*[32]byte)(key), &g.ks)
	} else {
		initKey128((*[16]byte)(key), &g.ks)
	}
	return g, nil
}

// NonceSize returns 12.
func (g *vaesGCM) NonceSize() int { return NonceSize }

// Overhead returns 16, the tag's length.
func (g *vaesGCM) Overhead() int { return TagSize }

// Seal encrypts and authenticates plaintext, authenticates additionalData
// and appends the result to dst. It panics, as crypto/cipher's GCM does,
// if nonce is not 12 bytes, if plaintext is longer than GCM allows, or if
// dst and plaintext overlap other than exactly.
func (g *vaesGCM) Seal(dst, nonce, plaintext, additionalData []byte) []byte {
	if len(nonce) != NonceSize {
		panic("aesgcm: incorrect nonce length given to GCM")
	}
	if uint64(len(plaintext)) > gcmMaxPlaintext {
		panic("aesgcm: message too large for GCM")
	}
	ret, out := sliceutil.ForAppend(dst, len(plaintext)+TagSize)
	if sliceutil.InexactOverlap(out, plaintext) {
		panic("aesgcm: invalid buffer overlap")
	}
	// The tag goes through a local: the kernel parks E(J0) in it while it
	// still reads the inputs, which may lie where the tag will go.
	var tag [TagSize]byte
	n := (*[NonceSize]byte)(nonce)
	ct := out[:len(plaintext)]
	switch {
	case g.wide && g.aes256:
		sealZ256(&g.ks, n, ct, plaintext, additionalData, &tag)
	case g.wide:
		sealZ128(&g.ks, n, ct, plaintext, additionalData, &tag)
	case g.aes256:
		sealY256(&g.ks, n, ct, plaintext, additionalData, &tag)
	default:
		sealY128(&g.ks, n, ct, plaintext, additionalData, &tag)
	}
	copy(out[len(plaintext):], tag[:])
	return ret
}

// Open authenticates and decrypts ciphertext (which ends with the tag)
// and additionalData and appends the plaintext to dst. A ciphertext that
// fails authentication yields [ErrOpen], and whatever was written to dst's
// spare capacity is zeroed. It panics if nonce is not 12 bytes or dst and
// ciphertext overlap other than exactly.
func (g *vaesGCM) Open(dst, nonce, ciphertext, additionalData []byte) ([]byte, error) {
	if len(nonce) != NonceSize {
		panic("aesgcm: incorrect nonce length given to GCM")
	}
	if len(ciphertext) < TagSize || uint64(len(ciphertext)) > gcmMaxPlaintext+TagSize {
		return nil, ErrOpen
	}
	body := ciphertext[:len(ciphertext)-TagSize]
	tag := ciphertext[len(body):]
	ret, out := sliceutil.ForAppend(dst, len(body))
	if sliceutil.InexactOverlap(out, ciphertext) {
		panic("aesgcm: invalid buffer overlap")
	}
	var want [TagSize]byte
	n := (*[NonceSize]byte)(nonce)
	switch {
	case g.wide && g.aes256:
		openZ256(&g.ks, n, out, body, additionalData, &want)
	case g.wide:
		openZ128(&g.ks, n, out, body, additionalData, &want)
	case g.aes256:
		openY256(&g.ks, n, out, body, additionalData, &want)
	default:
		openY128(&g.ks, n, out, body, additionalData, &want)
	}
	if subtle.ConstantTimeCompare(want[:], tag) != 1 {
		clear(out)
		return nil, ErrOpen
	}
	return ret, nil
}

// SealWithByte is Seal of plaintext followed by the one byte last, without
// plaintext being copied next to last first: the record layer (package
// secio) seals a Write's data and its record type from the caller's buffer
// straight into the frame. The result, appended to dst, is exactly
// Seal(dst, nonce, append(plaintext, last), additionalData). Unlike Seal it
// does not work in place: it panics if dst's new bytes overlap plaintext,
// as well as on a bad nonce length or a message too long for GCM.
//
// It exists only on the kernels' AEAD; crypto/cipher's GCM (other CPUs,
// purego builds, TENDRIL_AESGCM=stdlib) has no such method, and callers
// keep their copy path for it.
func (g *vaesGCM) SealWithByte(dst, nonce, plaintext []byte, last byte, additionalData []byte) []byte {
	if len(nonce) != NonceSize {
		panic("aesgcm: incorrect nonce length given to GCM")
	}
	if uint64(len(plaintext)) >= gcmMaxPlaintext {
		panic("aesgcm: message too large for GCM")
	}
	ret, out := sliceutil.ForAppend(dst, len(plaintext)+1+TagSize)
	if sliceutil.AnyOverlap(out, plaintext) {
		panic("aesgcm: invalid buffer overlap")
	}
	// The kernel reads whole 256-byte chunks from plaintext, then moves to
	// tail: the partial last chunk and last, at most 256 bytes, staged here.
	bulk := len(plaintext) &^ (splitChunk - 1)
	var tail [splitChunk]byte
	t := copy(tail[:], plaintext[bulk:])
	tail[t] = last
	var tag [TagSize]byte
	n := (*[NonceSize]byte)(nonce)
	ct := out[:len(plaintext)+1]
	src, rest := plaintext[:bulk], tail[:t+1]
	// The 256-bit split kernels serve both widths: they need only VAES and
	// VPCLMULQDQ on YMM, which every CPU with the 512-bit kernels also has.
	if g.aes256 {
		sealSplitY256(&g.ks, n, ct, src, rest, additionalData, &tag)
	} else {
		sealSplitY128(&g.ks, n, ct, src, rest, additionalData, &tag)
	}
	copy(out[len(ct):], tag[:])
	return ret
}

// splitChunk is the kernels' chunk: the split Seal kernels need len(src) to
// be a multiple of it and take at most one chunk of tail.
const splitChunk = 256
