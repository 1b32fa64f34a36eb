package secio

import (
	"encoding/binary"
	"fmt"

	"github.com/tendril-p2p/tendril/cipher/aead"
)

// Handshake message types (the first byte of every message body).
const (
	msgPropose  = 0x01
	msgExchange = 0x02
	msgConfirm  = 0x03
)

// ProtocolVersion is the highest handshake version this package speaks, sent
// in every Propose. Two sides use the lower of their versions.
const ProtocolVersion = 1

// NonceSize is the length of the random nonce in a Propose.
const NonceSize = 16

// propose is a decoded Propose message.
type propose struct {
	version uint16
	// The key share, if present with a known code: its key exchange and
	// where its key starts in ext (see shareKey). shareKex is 0 otherwise.
	shareKex KeyExchange
	shareAt  uint16
	nonce    [NonceSize]byte
	pubKey   []byte // canonical encoding of an Ed25519 key
	maxFrame uint32
	kexes    []KeyExchange // as sent, may include codes unknown here
	ciphers  []aead.Suite  // as sent, may include codes unknown here
	ext      []byte        // extensions, validated TLV

	// Room for the lists of a parsed Propose (parsePropose points kexes
	// and ciphers here, so a propose must not be copied after parsing).
	kexBuf    [maxListLen]KeyExchange
	cipherBuf [maxListLen]aead.Suite
}

// exchange is a decoded Exchange message.
type exchange struct {
	kex KeyExchange
	key []byte // ephemeral public key
}

// confirm is a decoded key-confirmation message.
type confirm struct {
	nonce [NonceSize]byte
	sig   []byte
}

// reader decodes a message body, reporting truncation.
type reader struct {
	b   []byte
	bad bool
}

func (r *reader) u8() uint8 {
	if len(r.b) < 1 {
		r.bad = true
		return 0
	}
	v := r.b[0]
	r.b = r.b[1:]
	return v
}

func (r *reader) u16() uint16 {
	if len(r.b) < 2 {
		r.bad = true
		return 0
	}
	v := binary.BigEndian.Uint16(r.b)
	r.b = r.b[2:]
	return v
}

func (r *reader) u32() uint32 {
	if len(r.b) < 4 {
		r.bad = true
		return 0
	}
	v := binary.BigEndian.Uint32(r.b)
	r.b = r.b[4:]
	return v
}

// bytes returns the next n bytes, aliasing the input.
func (r *reader) bytes(n int) []byte {
	if len(r.b) < n {
		r.bad = true
		r.b = nil
		return nil
	}
	v := r.b[:n:n]
	r.b = r.b[n:]
	return v
}

// end checks that the body was consumed exactly.
func (r *reader) end(what string) error {
	if r.bad {
		return fmt.Errorf("%w: truncated %s", ErrInvalidMessage, what)
	}
	if len(r.b) != 0 {
		return fmt.Errorf("%w: %d trailing bytes after %s", ErrInvalidMessage, len(r.b), what)
	}
	return nil
}

// shareKey returns the key of p's key share (aliasing ext), or nil.
func (p *propose) shareKey() []byte {
	if p.shareKex == 0 {
		return nil
	}
	return p.ext[p.shareAt : int(p.shareAt)+p.shareKex.publicKeySize()]
}

// appendTo appends p as a handshake message (length prefix included).
func (p *propose) appendTo(b []byte) []byte {
	start := len(b)
	b = append(b, 0, 0, 0, 0) // length, set below
	b = append(b, msgPropose)
	b = binary.BigEndian.AppendUint16(b, p.version)
	b = append(b, p.nonce[:]...)
	b = append(b, keyTypeEd25519)
	b = binary.BigEndian.AppendUint16(b, uint16(len(p.pubKey)))
	b = append(b, p.pubKey...)
	b = binary.BigEndian.AppendUint32(b, p.maxFrame)
	b = append(b, uint8(len(p.kexes)))
	for _, k := range p.kexes {
		b = append(b, uint8(k))
	}
	b = append(b, uint8(len(p.ciphers)))
	for _, s := range p.ciphers {
		b = append(b, uint8(s))
	}
	b = binary.BigEndian.AppendUint16(b, uint16(len(p.ext)))
	b = append(b, p.ext...)
	binary.BigEndian.PutUint32(b[start:], uint32(len(b)-start-frameHeaderSize))
	return b
}

// marshal encodes p as a new handshake message (length prefix included).
func (p *propose) marshal() []byte { return p.appendTo(nil) }

// parsePropose decodes a Propose body (without its length prefix) into p.
// The result aliases body.
func parsePropose(p *propose, body []byte) error {
	r := reader{b: body}
	if t := r.u8(); !r.bad && t != msgPropose {
		return fmt.Errorf("%w: message type 0x%02x, want Propose (0x%02x)", ErrInvalidMessage, t, msgPropose)
	}
	p.version = r.u16()
	copy(p.nonce[:], r.bytes(NonceSize))
	keyType := r.u8()
	keyLen := r.u16()
	if !r.bad && keyType != keyTypeEd25519 {
		return fmt.Errorf("%w: identity key type 0x%02x, want Ed25519 (0x%02x)", ErrInvalidMessage, keyType, keyTypeEd25519)
	}
	if !r.bad && keyLen != PublicKeySize {
		return fmt.Errorf("%w: Ed25519 key of %d bytes", ErrInvalidMessage, keyLen)
	}
	p.pubKey = r.bytes(int(keyLen))
	p.maxFrame = r.u32()
	nk := int(r.u8())
	if !r.bad && (nk == 0 || nk > maxListLen) {
		return fmt.Errorf("%w: %d key exchanges, want 1 to %d", ErrInvalidMessage, nk, maxListLen)
	}
	p.kexes = p.kexBuf[:0]
	for _, c := range r.bytes(nk) {
		p.kexes = append(p.kexes, KeyExchange(c))
	}
	nc := int(r.u8())
	if !r.bad && (nc == 0 || nc > maxListLen) {
		return fmt.Errorf("%w: %d ciphers, want 1 to %d", ErrInvalidMessage, nc, maxListLen)
	}
	p.ciphers = p.cipherBuf[:0]
	for _, c := range r.bytes(nc) {
		p.ciphers = append(p.ciphers, aead.Suite(c))
	}
	p.ext = r.bytes(int(r.u16()))
	if err := r.end("Propose"); err != nil {
		return err
	}
	if err := p.parseExtensions(); err != nil {
		return err
	}
	if p.maxFrame < MinFrameSize {
		return fmt.Errorf("%w: maximum frame size %d below %d", ErrInvalidMessage, p.maxFrame, MinFrameSize)
	}
	return nil
}

// proposeFixedLen is the length of a Propose body without its lists and
// extensions, for an Ed25519 key.
const proposeFixedLen = 1 + 2 + NonceSize + 1 + 2 + PublicKeySize + 4 + 1 + 1 + 2

// extKeyShare is the type of the key share extension: a key exchange code
// and an ephemeral public key for it, so that the Exchange flight can be
// skipped.
const extKeyShare = 0x0001

// extPadding is the padding extension (type 0xffff, one zero byte) used to
// make a Propose body's length odd. Its type is the highest, so it is
// always the last extension.
var extPadding = []byte{0xff, 0xff, 0x00, 0x01, 0x00}

// maxKeyShareExt is the length of the largest key share extension entry.
const maxKeyShareExt = 2 + 2 + 1 + maxPublicKeySize

// appendKeyShare appends a key share extension entry: type, length, then
// the key exchange code and the public key.
func appendKeyShare(b []byte, k KeyExchange, key []byte) []byte {
	b = binary.BigEndian.AppendUint16(b, extKeyShare)
	b = binary.BigEndian.AppendUint16(b, uint16(1+len(key)))
	b = append(b, uint8(k))
	return append(b, key...)
}

// parseExtensions validates the extension block of p: a sequence of
// (type u16, length u16, value) entries with strictly increasing types.
// It records a key share with a known code in p.shareKex and p.shareAt;
// a share with an unknown code is ignored, as are unknown extensions
// (both are still bound by the transcript). A share that is empty, or
// whose key has the wrong length for its known code, is an error; so is a
// second share (a repeated type).
func (p *propose) parseExtensions() error {
	p.shareKex, p.shareAt = 0, 0
	r := reader{b: p.ext}
	last := -1
	for len(r.b) > 0 && !r.bad {
		t := int(r.u16())
		v := r.bytes(int(r.u16()))
		if r.bad {
			break
		}
		switch {
		case t == last:
			return fmt.Errorf("%w: extension 0x%04x repeated", ErrInvalidMessage, t)
		case t < last:
			return fmt.Errorf("%w: extension 0x%04x out of order", ErrInvalidMessage, t)
		}
		last = t
		if t != extKeyShare {
			continue
		}
		if len(v) == 0 {
			return fmt.Errorf("%w: empty key share", ErrInvalidMessage)
		}
		k := KeyExchange(v[0])
		if !k.Valid() {
			continue // a code this side does not implement: never selected
		}
		if len(v)-1 != k.publicKeySize() {
			return fmt.Errorf("%w: %s key share of %d bytes, want %d", ErrInvalidMessage, k, len(v)-1, k.publicKeySize())
		}
		p.shareKex, p.shareAt = k, uint16(len(p.ext)-len(r.b)-len(v)+1)
	}
	return r.end("extensions")
}

// appendTo appends e as a handshake message (length prefix included).
func (e *exchange) appendTo(b []byte) []byte {
	b = binary.BigEndian.AppendUint32(b, uint32(4+len(e.key)))
	b = append(b, msgExchange, uint8(e.kex))
	b = binary.BigEndian.AppendUint16(b, uint16(len(e.key)))
	return append(b, e.key...)
}

// marshal encodes e as a new handshake message (length prefix included).
func (e *exchange) marshal() []byte { return e.appendTo(nil) }

// parseExchange decodes an Exchange body. The result aliases body.
func parseExchange(body []byte) (exchange, error) {
	r := reader{b: body}
	if t := r.u8(); !r.bad && t != msgExchange {
		return exchange{}, fmt.Errorf("%w: message type 0x%02x, want Exchange (0x%02x)", ErrInvalidMessage, t, msgExchange)
	}
	e := exchange{kex: KeyExchange(r.u8())}
	e.key = r.bytes(int(r.u16()))
	if err := r.end("Exchange"); err != nil {
		return exchange{}, err
	}
	return e, nil
}

// confirmSize is the plaintext size of a key-confirmation message.
const confirmSize = 1 + NonceSize + 2 + SignatureSize

// appendConfirm appends the plaintext of a key-confirmation message.
func appendConfirm(dst []byte, nonce [NonceSize]byte, sig []byte) []byte {
	dst = append(dst, msgConfirm)
	dst = append(dst, nonce[:]...)
	dst = binary.BigEndian.AppendUint16(dst, uint16(len(sig)))
	return append(dst, sig...)
}

// parseConfirm decodes a key-confirmation plaintext. The result aliases b.
func parseConfirm(b []byte) (confirm, error) {
	r := reader{b: b}
	if t := r.u8(); !r.bad && t != msgConfirm {
		return confirm{}, fmt.Errorf("%w: message type 0x%02x, want Confirm (0x%02x)", ErrInvalidMessage, t, msgConfirm)
	}
	var c confirm
	copy(c.nonce[:], r.bytes(NonceSize))
	c.sig = r.bytes(int(r.u16()))
	if err := r.end("Confirm"); err != nil {
		return confirm{}, err
	}
	return c, nil
}
