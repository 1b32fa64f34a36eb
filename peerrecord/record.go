// Package peerrecord is a peer's signed statement of the addresses it can be reached at.
//
// A Record carries the peer's Ed25519 identity key, a sequence number and up to MaxAddrs
// transport multiaddrs, signed by that key. Because it is signed, a record can be passed
// on by anyone (peer exchange, mDNS, a saved address book) and still be checked against its
// owner: a third peer can repeat it or withhold it, never change it. An address that a
// peer merely claims for another peer never enters an address book as the owner's.
//
// Records are small by construction (at most MaxSize bytes encoded) and parsing one costs
// at most one Ed25519 verification, about 50-60 µs, so code that receives records from
// strangers bounds how many it parses per peer and per second, not how large they are.
//
// The encoding (all integers unsigned varints unless sized):
//
//	version  1 byte, 1
//	key      32 bytes, the Ed25519 public key
//	seq      uvarint
//	count    1 byte, the number of addresses (at most MaxAddrs)
//	addrs    count times: uvarint length, then the multiaddr's binary form
//	sig      64 bytes, Ed25519 over signingContext followed by every byte above
package peerrecord

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	ma "github.com/multiformats/go-multiaddr"
	"github.com/tendril-p2p/tendril/secio"
)

const (
	// MaxSize bounds a record's encoding, signature included.
	MaxSize = 1024
	// MaxAddrs bounds the addresses in one record.
	MaxAddrs = 16

	version = 1
	keySize = secio.PublicKeySize
	sigSize = secio.SignatureSize
)

// signingContext separates record signatures from every other signature the same key
// makes (secio's handshake signs with its own context).
const signingContext = "tendril peer record v1\x00"

var (
	// ErrTooLarge: a record's encoding would exceed MaxSize, or it lists more than
	// MaxAddrs addresses.
	ErrTooLarge = errors.New("peerrecord: record too large")
	// ErrMalformed: the bytes are not a record in the encoding above (wrong version,
	// truncated, trailing bytes, an address that is not a valid multiaddr, or the same
	// address twice).
	ErrMalformed = errors.New("peerrecord: malformed record")
	// ErrBadSignature: the record is well formed but its signature does not verify under
	// its key.
	ErrBadSignature = errors.New("peerrecord: bad signature")
)

// Record is a verified peer record. Create one with New, or get one from Parse; a Record
// is immutable and safe to share.
type Record struct {
	key *secio.PublicKey
	seq uint64
	// raw is the signed encoding; the addresses are decoded from it when asked for, not
	// kept decoded: an address book holds thousands of records, and 16 decoded multiaddrs
	// took about 8 times the encoding's size.
	raw   []byte
	addrs int // offset in raw of the address count
}

// New signs a record for key's owner with sequence number seq (see NextSeq) and addrs,
// which must be transport multiaddrs without /p2p.
func New(key *secio.PrivateKey, seq uint64, addrs []ma.Multiaddr) (*Record, error) {
	if len(addrs) > MaxAddrs {
		return nil, fmt.Errorf("%w: %d addresses, at most %d", ErrTooLarge, len(addrs), MaxAddrs)
	}
	pub := key.Public()
	body := make([]byte, 0, 128)
	body = append(body, version)
	body = append(body, pub.Bytes()...)
	body = binary.AppendUvarint(body, seq)
	body = append(body, byte(len(addrs)))
	for i, a := range addrs {
		b := a.Bytes()
		for _, prev := range addrs[:i] {
			if bytes.Equal(prev.Bytes(), b) {
				return nil, fmt.Errorf("%w: address %s listed twice", ErrMalformed, a)
			}
		}
		body = binary.AppendUvarint(body, uint64(len(b)))
		body = append(body, b...)
	}
	if len(body)+sigSize > MaxSize {
		return nil, fmt.Errorf("%w: %d bytes, at most %d", ErrTooLarge, len(body)+sigSize, MaxSize)
	}
	raw := append(body, key.Sign(signed(body))...)
	return &Record{key: pub, seq: seq, raw: raw, addrs: 1 + keySize + uvarintLen(seq)}, nil
}

// Parse decodes and verifies a record. It reads nothing beyond MaxSize and does at most one
// signature verification, after every structural check has passed.
func Parse(b []byte) (*Record, error) {
	if len(b) > MaxSize {
		return nil, fmt.Errorf("%w: %d bytes, at most %d", ErrTooLarge, len(b), MaxSize)
	}
	if len(b) < 1+keySize+1+1+sigSize {
		return nil, fmt.Errorf("%w: %d bytes is too short", ErrMalformed, len(b))
	}
	if b[0] != version {
		return nil, fmt.Errorf("%w: version %d", ErrMalformed, b[0])
	}
	body, sig := b[:len(b)-sigSize], b[len(b)-sigSize:]
	key, err := secio.UnmarshalPublicKey(body[1 : 1+keySize])
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrMalformed, err)
	}
	rest := body[1+keySize:]
	seq, n := binary.Uvarint(rest)
	if n <= 0 {
		return nil, fmt.Errorf("%w: bad sequence number", ErrMalformed)
	}
	rest = rest[n:]
	if len(rest) < 1 {
		return nil, fmt.Errorf("%w: no address count", ErrMalformed)
	}
	count := int(rest[0])
	rest = rest[1:]
	if count > MaxAddrs {
		return nil, fmt.Errorf("%w: %d addresses, at most %d", ErrTooLarge, count, MaxAddrs)
	}
	at := len(body) - len(rest) - 1 // the count byte
	raws := make([][]byte, 0, count)
	for range count {
		l, n := binary.Uvarint(rest)
		if n <= 0 || l == 0 || l > uint64(len(rest)-n) {
			return nil, fmt.Errorf("%w: bad address length", ErrMalformed)
		}
		ab := rest[n : n+int(l)]
		rest = rest[n+int(l):]
		for _, prev := range raws {
			if bytes.Equal(prev, ab) {
				return nil, fmt.Errorf("%w: an address listed twice", ErrMalformed)
			}
		}
		if _, err := ma.NewMultiaddrBytes(ab); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrMalformed, err)
		}
		raws = append(raws, ab)
	}
	if len(rest) != 0 {
		return nil, fmt.Errorf("%w: %d trailing bytes", ErrMalformed, len(rest))
	}
	if !key.Verify(signed(body), sig) {
		return nil, ErrBadSignature
	}
	return &Record{key: key, seq: seq, raw: bytes.Clone(b), addrs: at}, nil
}

// signed returns what a record's signature covers.
func signed(body []byte) []byte {
	return append([]byte(signingContext), body...)
}

// Key returns the public key of the record's owner.
func (r *Record) Key() *secio.PublicKey { return r.key }

// Peer returns the owner's peer ID.
func (r *Record) Peer() secio.PeerID { return r.key.PeerID() }

// Seq returns the record's sequence number: of two records of one peer, the one with the
// higher number is the newer.
func (r *Record) Seq() uint64 { return r.seq }

// Addrs returns the addresses, decoded afresh on every call.
func (r *Record) Addrs() []ma.Multiaddr {
	var out []ma.Multiaddr
	r.eachAddr(func(b []byte) bool {
		// Checked by New or Parse, so this cannot fail.
		if a, err := ma.NewMultiaddrBytes(bytes.Clone(b)); err == nil {
			out = append(out, a)
		}
		return true
	})
	return out
}

// Lists reports whether the record lists the address whose binary form is b, without
// decoding any address.
func (r *Record) Lists(b []byte) bool {
	found := false
	r.eachAddr(func(a []byte) bool {
		found = bytes.Equal(a, b)
		return !found
	})
	return found
}

// eachAddr calls f with the binary form of each address, in order, until f returns false.
func (r *Record) eachAddr(f func([]byte) bool) {
	rest := r.raw[r.addrs : len(r.raw)-sigSize]
	count := int(rest[0])
	rest = rest[1:]
	for range count {
		l, n := binary.Uvarint(rest)
		if !f(rest[n : n+int(l)]) {
			return
		}
		rest = rest[n+int(l):]
	}
}

// Bytes returns the signed encoding, which Parse accepts. The caller must not modify it.
func (r *Record) Bytes() []byte { return r.raw }

// Supersedes reports whether r should replace old: both are the same peer's, and r is
// newer. A record never supersedes another peer's.
func (r *Record) Supersedes(old *Record) bool {
	return old == nil || (r.key.Equal(old.key) && r.seq > old.seq)
}

// String returns a short description for logs.
func (r *Record) String() string {
	return fmt.Sprintf("record %s seq %d, %d addrs", r.Peer(), r.seq, r.raw[r.addrs])
}

// NextSeq returns the sequence number for a new record after one numbered last: the time in
// nanoseconds since 1970, so that a node restarted without its last number still outranks
// its earlier records, or last+1 if the clock has not moved past it.
func NextSeq(now time.Time, last uint64) uint64 {
	return max(uint64(now.UnixNano()), last+1)
}

func uvarintLen(v uint64) int { return len(binary.AppendUvarint(nil, v)) }
