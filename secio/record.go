package secio

import (
	"crypto/cipher"
	"fmt"

	"github.com/tendril-p2p/tendril/cipher/aead"
	"github.com/tendril-p2p/tendril/hash/blake3"
)

// Record types. The type is the last byte of every encrypted frame's
// plaintext (as TLS 1.3's inner content type), so that it is authenticated
// and hidden from an observer, who sees only lengths.
const (
	recordHandshake = 0x01 // an Auth message, under a handshake key
	recordData      = 0x02 // application bytes
	recordKeyUpdate = 0x03 // empty: the sender's next frames use the next key
	recordClose     = 0x04 // empty: the sender sends nothing more
)

// recordTypeSize is the record type byte at the end of each plaintext.
const recordTypeSize = 1

// Key update. Each direction moves to its next key after
// keyUpdateBlocks 16-byte blocks (about 64 GiB) have been sealed under
// its current one.
//
// The bound comes from AES-GCM, the weaker of the suites: RFC 8446
// section 5.5 allows 2^24.5 full records of 2^14 bytes (2^34.5 blocks)
// per key for an advantage of 2^-57, and draft-irtf-cfrg-aead-limits
// (section 5.1) bounds the confidentiality advantage by ((s + q + 1)^2) /
// 2^129 for s blocks in q records, so 2^32 blocks counting one more per
// record for its counter block give about 2^-65. ChaCha20-Poly1305 has no
// comparable confidentiality limit before its nonce space (the draft's
// section 5.2), so the same count is merely conservative for it. The
// integrity limits of both concern forgery attempts, and a Conn ends at
// the first frame that fails authentication.
//
// Frames are up to 16 MiB, so the count is in blocks, not in frames: at
// 1 GB/s a key lasts about a minute, and an update costs one BLAKE3 call
// and one AEAD key schedule.
const keyUpdateBlocks = 1 << 32

// recordBlocks is what sealing a plaintext of n bytes (record type
// included) counts against a key: its 16-byte blocks and one for the
// counter block of the tag.
func recordBlocks(n int) uint64 { return uint64(n+15)/16 + 1 }

// recordKey is one direction's current AEAD key, its frame counter (the
// nonce) and the secret from which the next key is derived.
type recordKey struct {
	aead   cipher.AEAD
	ctr    counter
	suite  aead.Suite
	secret [32]byte // current key (its first suite.KeySize() bytes)
	// updates counts the key updates of this direction (tests read it).
	updates uint64

	// byteSealer is aead's SealWithByte when it has one (aesgcm's
	// kernels), so that a record is sealed from the writer's buffer.
	byteSealer byteSealer
}

// setKey installs key as the current key with a fresh counter.
func (k *recordKey) setKey(s aead.Suite, key []byte) error {
	a, err := aead.New(s, key)
	if err != nil {
		return fmt.Errorf("secio: %s key: %w", s, err)
	}
	k.aead, k.suite, k.ctr = a, s, counter{}
	k.byteSealer, _ = a.(byteSealer)
	copy(k.secret[:], key)
	return nil
}

// byteSealer is an AEAD that seals plaintext || last without plaintext
// being copied next to last first: aesgcm's vector kernels
// (aesgcm's SealWithByte). The result is Seal(dst, nonce, plaintext ||
// last, additionalData); dst must not overlap plaintext.
type byteSealer interface {
	SealWithByte(dst, nonce, plaintext []byte, last byte, additionalData []byte) []byte
}

// update moves to the next key, K' = BLAKE3-derive-key(contextKeyUpdate,
// K), with its counter back at zero: each key is used with each nonce at
// most once, and an earlier key cannot be computed from a later one.
func (k *recordKey) update() error {
	ks := k.suite.KeySize()
	var next [32]byte
	blake3.DeriveKey(next[:ks], contextKeyUpdate, k.secret[:ks])
	err := k.setKey(k.suite, next[:ks])
	clear(next[:])
	k.updates++
	return err
}
