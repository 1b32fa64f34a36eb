package secio

import (
	"bytes"
	"errors"
	"testing"
)

// FuzzParsePeerID feeds arbitrary text to ParsePeerID and arbitrary bytes to
// PeerIDFromBytes (peer IDs come from users, address books and peers). Neither
// may panic; whatever is accepted must re-encode to the same text and bytes;
// every refusal wraps ErrInvalidPeerID.
func FuzzParsePeerID(f *testing.F) {
	f.Add("gW3BXdPdNE8Rq2guvJUdVMvh2qLZar8UWrUrEgm78CmwdP", []byte{0x1e, 0x20})
	f.Add("gW4w5ShBtkYq6badKJNZKfmhuC7hGVsoSHgs7zdzsUPmHS", append([]byte{0x1e, 0x20}, make([]byte, 32)...))
	f.Add("QmYyQSo1c1Ym7orWxLYvCrM2EmxFTANf8wXmmE7DWjhx5N", []byte{0x12, 0x20, 1})
	f.Add("0OIl", []byte{})
	f.Fuzz(func(t *testing.T, s string, b []byte) {
		if id, err := ParsePeerID(s); err != nil {
			if !errors.Is(err, ErrInvalidPeerID) {
				t.Fatalf("ParsePeerID(%q): %v does not wrap ErrInvalidPeerID", s, err)
			}
		} else {
			if id.IsZero() {
				t.Fatalf("ParsePeerID(%q) accepted the zero ID", s)
			}
			back, err := ParsePeerID(id.String())
			if err != nil || back != id {
				t.Fatalf("ParsePeerID(%q) -> %s does not round-trip: %v", s, id, err)
			}
		}
		if id, err := PeerIDFromBytes(b); err != nil {
			if !errors.Is(err, ErrInvalidPeerID) {
				t.Fatalf("PeerIDFromBytes(%x): %v does not wrap ErrInvalidPeerID", b, err)
			}
		} else if !bytes.Equal(id.Bytes(), b) {
			t.Fatalf("PeerIDFromBytes(%x).Bytes() = %x", b, id.Bytes())
		}
	})
}
