package secio

import (
	"crypto/cipher"
	"encoding/binary"
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

// Limits on records that deliver no data, so that a peer cannot make this
// side work without sending data: an empty data record costs its receiver
// about as much as a one-byte one, but a key update derives a secret, a key
// and an IV and rekeys the AEAD (BenchmarkControlRecords: about ten times an
// empty record).
const (
	// keyUpdateMinRecords is the fewest records a key must have protected
	// before its sender may move to the next one: a key update record whose
	// sequence number is below it is ErrKeyUpdateTooSoon. A sender updates
	// after keyUpdateBlocks blocks, which take at least 4,095 records of the
	// largest size (TestKeyUpdateThreshold), so it never comes near.
	keyUpdateMinRecords = 64
	// maxNonDataRecords is the most records in a row that deliver no data
	// (empty data records and key updates; a close record ends the stream
	// anyway): one more is ErrTooManyNonDataRecords. crypto/tls stops at the
	// same count (maxUselessRecords). A Write of nothing sends no record,
	// and a key update is always followed by the data record that made the
	// sender update, so a sender following this package sends at most one.
	maxNonDataRecords = 16
)

// recordBlocks is what sealing a plaintext of n bytes (record type
// included) counts against a key: its 16-byte blocks and one for the
// counter block of the tag.
func recordBlocks(n int) uint64 { return uint64(n+15)/16 + 1 }

// Key schedule (docs/secio.md section 4). Each direction has a secret of
// secretSize bytes: a handshake secret while the Auth records travel, then a
// traffic secret. The record key and the record IV of the current key are
// derived from it, each with its own context, and so is the direction's next
// secret at a key update:
//
//	key          = DK(contextRecordKey, secret)[:KeySize]
//	iv           = DK(contextRecordIV, secret)[:12]
//	next secret  = DK(contextSecretUpdate, secret)
//
// The AEAD key itself never feeds a derivation, and neither a key nor an IV
// reveals the secret (as TLS 1.3's traffic secrets, RFC 8446 section 7.2).
const secretSize = 32

// Derive-key states of the record layer's contexts, the context already
// hashed (copied for each derivation, never modified).
var (
	recordKeyStart    = *blake3.NewDeriveKey(contextRecordKey)
	recordIVStart     = *blake3.NewDeriveKey(contextRecordIV)
	secretUpdateStart = *blake3.NewDeriveKey(contextSecretUpdate)
)

// derive sets dst (at most 32 bytes) to the first len(dst) bytes of BLAKE3
// derive-key of secret under the context whose state is start.
func derive(dst []byte, start *blake3.Hasher, secret *[secretSize]byte) {
	h := *start
	h.Write(secret[:])
	var out [32]byte
	h.Sum(out[:0])
	copy(dst, out[:])
	clear(out[:])
}

// recordKey is one direction's key material: its secret, the AEAD keyed with
// the record key derived from it, the record IV, and the sequence number of
// the next record under that key. The nonce of a record is the IV with the
// sequence number (big-endian, 64 bits) XORed into its last 8 bytes (RFC 8446
// section 5.3), so that no two keys, and no two connections, start from the
// same nonce.
type recordKey struct {
	aead   cipher.AEAD
	suite  aead.Suite
	secret [secretSize]byte // this direction's current secret
	iv     [nonceSize]byte  // the current key's record IV
	// seq is the sequence number of the next record: the number of records
	// sealed (or opened) under the current key. exhausted is set once every
	// value has been used.
	seq       uint64
	exhausted bool
	nonce     [nonceSize]byte // the nonce returned by the last nextNonce
	// updates counts the key updates of this direction (tests read it).
	updates uint64

	// byteSealer is aead's SealWithByte when it has one (aesgcm's
	// kernels), so that a record is sealed from the writer's buffer.
	byteSealer byteSealer
}

// newAEAD makes the AEAD of a key that cannot be rekeyed in place; tests
// wrap it to see the nonces in use.
var newAEAD = aead.New

// rekeyer is an AEAD that can move to another key in place and clear its key
// schedule: aesgcm's kernels (aesgcm's Rekey and Clear). crypto/cipher's GCM
// and x/crypto's ChaCha20-Poly1305 cannot: a new key replaces them, and the
// old one is dropped for the garbage collector, which does not overwrite it.
type rekeyer interface {
	Rekey(key []byte) error
	Clear()
}

// install makes secret this direction's current secret: it derives the
// record key and IV from it, keys the AEAD (in place when the AEAD can be
// rekeyed, which overwrites the previous key's schedule; else a new one) and
// starts the sequence number at zero. The previous secret and IV are
// overwritten; the caller clears its copy of secret.
func (k *recordKey) install(s aead.Suite, secret *[secretSize]byte) error {
	// The key's one copy outside the AEAD lives here for the call: a buffer of its own,
	// overwritten before it is dropped (an array on the stack would escape through the
	// AEAD's interface all the same, and one in the Conn would cost every idle connection).
	key := make([]byte, s.KeySize())
	defer clear(key)
	derive(key, &recordKeyStart, secret)
	if r, ok := k.aead.(rekeyer); ok && k.suite == s {
		if err := r.Rekey(key); err != nil {
			return fmt.Errorf("secio: %s key: %w", s, err)
		}
	} else {
		a, err := newAEAD(s, key)
		if err != nil {
			return fmt.Errorf("secio: %s key: %w", s, err)
		}
		if r, ok := k.aead.(rekeyer); ok {
			r.Clear()
		}
		k.aead = a
		k.byteSealer, _ = a.(byteSealer)
	}
	derive(k.iv[:], &recordIVStart, secret)
	k.secret = *secret
	k.suite = s
	k.seq, k.exhausted = 0, false
	return nil
}

// nextNonce returns the nonce of the next record, the IV XOR its sequence
// number, and advances the sequence number; it fails once every value has
// been used (2^64 records under one key, which key updates rule out). The
// nonce stays valid until the next call.
func (k *recordKey) nextNonce() ([]byte, error) {
	if k.exhausted {
		return nil, ErrNonceExhausted
	}
	k.nonce = k.iv
	binary.BigEndian.PutUint64(k.nonce[4:], binary.BigEndian.Uint64(k.iv[4:])^k.seq)
	k.seq++
	k.exhausted = k.seq == 0
	return k.nonce[:], nil
}

// byteSealer is an AEAD that seals plaintext || last without plaintext
// being copied next to last first: aesgcm's vector kernels
// (aesgcm's SealWithByte). The result is Seal(dst, nonce, plaintext ||
// last, additionalData); dst must not overlap plaintext.
type byteSealer interface {
	SealWithByte(dst, nonce, plaintext []byte, last byte, additionalData []byte) []byte
}

// update moves to the next key: the next secret is derived from the
// current one (which it overwrites), and the key and IV from it, with the
// sequence number back at zero. Each key is used with each nonce at most
// once, and no earlier secret, key or IV can be computed from a later one.
func (k *recordKey) update() error {
	var next [secretSize]byte
	derive(next[:], &secretUpdateStart, &k.secret)
	err := k.install(k.suite, &next)
	clear(next[:])
	k.updates++
	return err
}

// wipe overwrites this direction's key material once the Conn will not use it
// again: the secret, the IV and, when the AEAD can be cleared, its key
// schedule.
func (k *recordKey) wipe() {
	clear(k.secret[:])
	clear(k.iv[:])
	clear(k.nonce[:])
	if r, ok := k.aead.(rekeyer); ok {
		r.Clear()
	}
}
