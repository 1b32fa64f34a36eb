package secio

import (
	"encoding/binary"
	"fmt"

	"github.com/tendril-p2p/tendril/cipher/aead"
)

// Handshake message types (the first byte of every message body). The
// clear messages are ClientHello, HelloRetryRequest and ServerHello; the
// two Auth messages travel encrypted, as handshake records.
const (
	msgClientHello  = 0x11
	msgHelloRetry   = 0x12
	msgServerHello  = 0x13
	msgListenerAuth = 0x14
	msgDialerAuth   = 0x15
)

// ProtocolVersion is the handshake version this package speaks, sent in
// every hello. Version 3 changed the record layer (per-key secret IVs,
// traffic secrets, limits on key updates and non-data records); versions 1
// and 2 are no longer spoken.
const ProtocolVersion = 3

// NonceSize is the length of the random nonce in each hello.
const NonceSize = 32

// Sizes of the handshake messages, length prefix excluded.
const (
	// clientHelloFixed is a ClientHello body without its lists, share and
	// padding: type, version, nonce, max frame, the two list lengths, the
	// share's code and length, and the padding length.
	clientHelloFixed = 1 + 2 + NonceSize + 4 + 1 + 1 + 1 + 2 + 1
	// maxClientHello is the largest ClientHello body: full lists, the
	// largest share, one padding byte.
	maxClientHello = clientHelloFixed + 2*maxListLen + maxShareSize + 1
	// serverHelloFixed is a ServerHello body without share and padding:
	// type, version, nonce, max frame, key exchange, cipher, share length,
	// padding length.
	serverHelloFixed = 1 + 2 + NonceSize + 4 + 1 + 1 + 2 + 1
	// maxServerHello is the largest ServerHello body.
	maxServerHello = serverHelloFixed + maxListenerShare + 1
	// helloRetryLen is a HelloRetryRequest body: type, version, key
	// exchange.
	helloRetryLen = 1 + 2 + 1
	// authLen is the plaintext of an Auth message: type, identity key
	// type, identity key, signature.
	authLen = 1 + 1 + PublicKeySize + SignatureSize
)

// MaxHandshakeMessage is the largest clear handshake message body (a
// ClientHello with full lists and a hybrid share). Every handshake message
// is read with a cap at its own largest size, which is at most this; a
// longer length prefix is refused before anything is allocated.
const MaxHandshakeMessage = maxClientHello

// clientHello is a decoded ClientHello.
type clientHello struct {
	version  uint16
	nonce    [NonceSize]byte
	maxFrame uint32
	kexes    []KeyExchange // as sent, may include codes unknown here
	ciphers  []aead.Suite  // as sent, may include codes unknown here
	shareKex KeyExchange   // may be a code unknown here
	share    []byte        // aliases the message

	kexBuf    [maxListLen]KeyExchange
	cipherBuf [maxListLen]aead.Suite
}

// serverHello is a decoded ServerHello.
type serverHello struct {
	version  uint16
	nonce    [NonceSize]byte
	maxFrame uint32
	kex      KeyExchange
	suite    aead.Suite
	share    []byte // aliases the message
}

// reader decodes a message body, reporting truncation.
type reader struct {
	b   []byte
	bad bool
}

func (r *reader) u8() uint8 {
	if b := r.bytes(1); b != nil {
		return b[0]
	}
	return 0
}

func (r *reader) u16() uint16 {
	if b := r.bytes(2); b != nil {
		return binary.BigEndian.Uint16(b)
	}
	return 0
}

func (r *reader) u32() uint32 {
	if b := r.bytes(4); b != nil {
		return binary.BigEndian.Uint32(b)
	}
	return 0
}

// bytes returns the next n bytes, aliasing the input. Fewer than n left marks
// the message bad and ends it, so that every later read fails too.
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

// padding reads the padding length and checks that the padding is zeros.
func (r *reader) padding(what string) error {
	for _, b := range r.bytes(int(r.u8())) {
		if b != 0 {
			return fmt.Errorf("%w: nonzero padding in %s", ErrInvalidMessage, what)
		}
	}
	return nil
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

// msgType checks the type byte of a body.
func (r *reader) msgType(want byte, what string) error {
	t := r.u8()
	if !r.bad && t != want {
		return fmt.Errorf("%w: message type 0x%02x, want %s (0x%02x)", ErrInvalidMessage, t, what, want)
	}
	return nil
}

// beginMessage appends a length prefix to be set by endMessage and returns
// where the message starts.
func beginMessage(b []byte) ([]byte, int) {
	return append(b, 0, 0, 0, 0), len(b)
}

// endMessage pads the body that started at start to an odd length, so that
// a legacy TEA peer (whose frames are multiples of 8 bytes) always rejects
// it as malformed instead of decrypting it to garbage, and sets its length
// prefix.
func endMessage(b []byte, start int) []byte {
	if (len(b)-start-frameHeaderSize+1)%2 == 0 {
		b = append(b, 1, 0)
	} else {
		b = append(b, 0)
	}
	binary.BigEndian.PutUint32(b[start:], uint32(len(b)-start-frameHeaderSize))
	return b
}

// appendClientHello appends a ClientHello message (length prefix
// included) carrying the share for the first key exchange of kexes.
func appendClientHello(b []byte, nonce *[NonceSize]byte, maxFrame int, kexes []KeyExchange, ciphers []aead.Suite, shareKex KeyExchange, share []byte) []byte {
	b, start := beginMessage(b)
	b = append(b, msgClientHello)
	b = binary.BigEndian.AppendUint16(b, ProtocolVersion)
	b = append(b, nonce[:]...)
	b = binary.BigEndian.AppendUint32(b, uint32(maxFrame))
	b = append(b, uint8(len(kexes)))
	for _, k := range kexes {
		b = append(b, uint8(k))
	}
	b = append(b, uint8(len(ciphers)))
	for _, s := range ciphers {
		b = append(b, uint8(s))
	}
	b = append(b, uint8(shareKex))
	b = binary.BigEndian.AppendUint16(b, uint16(len(share)))
	b = append(b, share...)
	return endMessage(b, start)
}

// parseClientHello decodes a ClientHello body into h. The result aliases
// body. A share for a known key exchange must have that exchange's size.
func parseClientHello(h *clientHello, body []byte) error {
	const what = "ClientHello"
	r := reader{b: body}
	if err := r.msgType(msgClientHello, what); err != nil {
		return err
	}
	h.version = r.u16()
	copy(h.nonce[:], r.bytes(NonceSize))
	h.maxFrame = r.u32()
	nk := int(r.u8())
	if !r.bad && (nk == 0 || nk > maxListLen) {
		return fmt.Errorf("%w: %d key exchanges, want 1 to %d", ErrInvalidMessage, nk, maxListLen)
	}
	h.kexes = h.kexBuf[:0]
	for _, c := range r.bytes(nk) {
		h.kexes = append(h.kexes, KeyExchange(c))
	}
	nc := int(r.u8())
	if !r.bad && (nc == 0 || nc > maxListLen) {
		return fmt.Errorf("%w: %d ciphers, want 1 to %d", ErrInvalidMessage, nc, maxListLen)
	}
	h.ciphers = h.cipherBuf[:0]
	for _, c := range r.bytes(nc) {
		h.ciphers = append(h.ciphers, aead.Suite(c))
	}
	h.shareKex = KeyExchange(r.u8())
	h.share = r.bytes(int(r.u16()))
	if err := r.padding(what); err != nil {
		return err
	}
	if err := r.end(what); err != nil {
		return err
	}
	if h.maxFrame < MinFrameSize {
		return fmt.Errorf("%w: maximum frame size %d below %d", ErrInvalidMessage, h.maxFrame, MinFrameSize)
	}
	if h.shareKex.Valid() && len(h.share) != h.shareKex.dialerShareSize() {
		return fmt.Errorf("%w: %s key share of %d bytes, want %d", ErrInvalidMessage, h.shareKex, len(h.share), h.shareKex.dialerShareSize())
	}
	return nil
}

// appendHelloRetry appends a HelloRetryRequest asking for a share of k.
func appendHelloRetry(b []byte, k KeyExchange) []byte {
	b, start := beginMessage(b)
	b = append(b, msgHelloRetry)
	b = binary.BigEndian.AppendUint16(b, ProtocolVersion)
	b = append(b, uint8(k))
	binary.BigEndian.PutUint32(b[start:], uint32(len(b)-start-frameHeaderSize))
	return b
}

// appendServerHello appends a ServerHello message (length prefix
// included).
func appendServerHello(b []byte, h *serverHello) []byte {
	b, start := beginMessage(b)
	b = append(b, msgServerHello)
	b = binary.BigEndian.AppendUint16(b, h.version)
	b = append(b, h.nonce[:]...)
	b = binary.BigEndian.AppendUint32(b, h.maxFrame)
	b = append(b, uint8(h.kex), uint8(h.suite))
	b = binary.BigEndian.AppendUint16(b, uint16(len(h.share)))
	b = append(b, h.share...)
	return endMessage(b, start)
}

// parseListenerReply decodes what a listener answers a ClientHello with: a
// ServerHello (into h, aliasing body) or a HelloRetryRequest (retry is
// then the key exchange asked for).
func parseListenerReply(h *serverHello, body []byte) (retry KeyExchange, err error) {
	if len(body) > 0 && body[0] == msgHelloRetry {
		r := reader{b: body[1:]}
		h.version = r.u16()
		retry = KeyExchange(r.u8())
		if err := r.end("HelloRetryRequest"); err != nil {
			return 0, err
		}
		if retry == 0 {
			return 0, fmt.Errorf("%w: HelloRetryRequest for key exchange 0", ErrInvalidMessage)
		}
		return retry, nil
	}
	const what = "ServerHello"
	r := reader{b: body}
	if err := r.msgType(msgServerHello, what); err != nil {
		return 0, err
	}
	h.version = r.u16()
	copy(h.nonce[:], r.bytes(NonceSize))
	h.maxFrame = r.u32()
	h.kex = KeyExchange(r.u8())
	h.suite = aead.Suite(r.u8())
	h.share = r.bytes(int(r.u16()))
	if err := r.padding(what); err != nil {
		return 0, err
	}
	if err := r.end(what); err != nil {
		return 0, err
	}
	if h.maxFrame < MinFrameSize {
		return 0, fmt.Errorf("%w: maximum frame size %d below %d", ErrInvalidMessage, h.maxFrame, MinFrameSize)
	}
	return 0, nil
}

// appendAuth appends the plaintext of an Auth message: its type, the
// identity key and the signature.
func appendAuth(b []byte, typ byte, pub []byte, sig []byte) []byte {
	b = append(b, typ, keyTypeEd25519)
	b = append(b, pub...)
	return append(b, sig...)
}

// parseAuth decodes an Auth plaintext of the given type; the results alias
// b.
func parseAuth(b []byte, typ byte) (pub, sig []byte, err error) {
	what := "ListenerAuth"
	if typ == msgDialerAuth {
		what = "DialerAuth"
	}
	r := reader{b: b}
	if err := r.msgType(typ, what); err != nil {
		return nil, nil, err
	}
	if kt := r.u8(); !r.bad && kt != keyTypeEd25519 {
		return nil, nil, fmt.Errorf("%w: identity key type 0x%02x, want Ed25519 (0x%02x)", ErrInvalidMessage, kt, keyTypeEd25519)
	}
	pub = r.bytes(PublicKeySize)
	sig = r.bytes(SignatureSize)
	if err := r.end(what); err != nil {
		return nil, nil, err
	}
	return pub, sig, nil
}
