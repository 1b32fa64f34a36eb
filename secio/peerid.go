package secio

import (
	"bytes"
	"fmt"
	"log/slog"

	"github.com/mr-tron/base58"
	"github.com/tendril-p2p/tendril/hash/blake3"
)

// Multihash parameters of a peer ID.
const (
	// MultihashBLAKE3 is the multicodec code of BLAKE3 (0x1e) in a peer ID.
	MultihashBLAKE3 = 0x1e
	// PeerIDDigestSize is the digest length of a peer ID (BLAKE3-256).
	PeerIDDigestSize = 32
	// PeerIDSize is the length of a peer ID's binary form: the multihash
	// code byte, the length byte and the digest.
	PeerIDSize = 2 + PeerIDDigestSize
)

// PeerID identifies a node: the multihash (code 0x1e, BLAKE3-256, length 32)
// of the canonical encoding of its identity public key. PeerID is
// comparable and can be used as a map key; its zero value means "no peer"
// (IsZero) and is what a legacy TEA Conn reports.
type PeerID struct {
	digest [PeerIDDigestSize]byte
}

// peerIDFromEncoding hashes a public key's canonical encoding.
func peerIDFromEncoding(pub []byte) PeerID {
	return PeerID{digest: blake3.Sum256(pub)}
}

// PeerIDFromPublicKey returns the peer ID of k.
func PeerIDFromPublicKey(k *PublicKey) PeerID { return k.id }

// PeerIDFromBytes parses the binary form of a peer ID (34 bytes: 0x1e, 0x20,
// then the BLAKE3-256 digest). Other multihash codes or lengths, and an
// all-zero digest (reserved for the zero PeerID), yield an error wrapping
// ErrInvalidPeerID.
func PeerIDFromBytes(b []byte) (PeerID, error) {
	if len(b) != PeerIDSize {
		return PeerID{}, fmt.Errorf("%w: %d bytes, want %d", ErrInvalidPeerID, len(b), PeerIDSize)
	}
	if b[0] != MultihashBLAKE3 {
		return PeerID{}, fmt.Errorf("%w: multihash code 0x%02x, want 0x%02x", ErrInvalidPeerID, b[0], MultihashBLAKE3)
	}
	if b[1] != PeerIDDigestSize {
		return PeerID{}, fmt.Errorf("%w: digest length %d, want %d", ErrInvalidPeerID, b[1], PeerIDDigestSize)
	}
	var id PeerID
	copy(id.digest[:], b[2:])
	if id.IsZero() {
		return PeerID{}, fmt.Errorf("%w: all-zero digest", ErrInvalidPeerID)
	}
	return id, nil
}

// ParsePeerID parses the base58btc form returned by String.
func ParsePeerID(s string) (PeerID, error) {
	// A 34-byte value is at most 47 base58 characters; refuse long input
	// before decoding it.
	if len(s) == 0 || len(s) > 50 {
		return PeerID{}, fmt.Errorf("%w: %d characters", ErrInvalidPeerID, len(s))
	}
	b, err := base58.Decode(s)
	if err != nil {
		return PeerID{}, fmt.Errorf("%w: %v", ErrInvalidPeerID, err)
	}
	id, err := PeerIDFromBytes(b)
	if err != nil {
		return PeerID{}, err
	}
	return id, nil
}

// IsZero reports whether id is the zero PeerID ("no peer").
func (id PeerID) IsZero() bool { return id == PeerID{} }

// Compare orders peer IDs by their binary form: -1 if id sorts before other, 0 if they are
// equal, +1 otherwise. Both ends of a connection compute the same order, which is what
// deciding between duplicate sessions needs.
func (id PeerID) Compare(other PeerID) int { return bytes.Compare(id.digest[:], other.digest[:]) }

// Bytes returns the 34-byte multihash form of id, or nil for the zero
// PeerID.
func (id PeerID) Bytes() []byte {
	if id.IsZero() {
		return nil
	}
	b := make([]byte, PeerIDSize)
	b[0] = MultihashBLAKE3
	b[1] = PeerIDDigestSize
	copy(b[2:], id.digest[:])
	return b
}

// String returns the base58btc encoding of Bytes, or "" for the zero
// PeerID. Every peer ID string is 46 characters long and starts with "gV"
// or "gW" (the multihash prefix 0x1e 0x20 fixes the leading digits).
func (id PeerID) String() string {
	if id.IsZero() {
		return ""
	}
	return base58.Encode(id.Bytes())
}

// LogValue makes log/slog print the peer ID as its string, encoded only if the record is
// actually logged.
func (id PeerID) LogValue() slog.Value { return slog.StringValue(id.String()) }

// Matches reports whether id is the peer ID of k. The zero PeerID matches
// no key.
func (id PeerID) Matches(k *PublicKey) bool {
	if k == nil || id.IsZero() {
		return false
	}
	return k.id == id
}

// MarshalText implements encoding.TextMarshaler with the String form (empty
// for the zero PeerID).
func (id PeerID) MarshalText() ([]byte, error) {
	return []byte(id.String()), nil
}

// UnmarshalText implements encoding.TextUnmarshaler; empty text yields the
// zero PeerID.
func (id *PeerID) UnmarshalText(text []byte) error {
	if len(text) == 0 {
		*id = PeerID{}
		return nil
	}
	p, err := ParsePeerID(string(text))
	if err != nil {
		return err
	}
	*id = p
	return nil
}
