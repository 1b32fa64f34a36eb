package secio

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"github.com/tendril-p2p/tendril/cipher/aead"
)

func FuzzHandshakeMessages(f *testing.F) {
	p := (&propose{version: 1, pubKey: testKey("a").pub.key, maxFrame: 1 << 20,
		kexes: []KeyExchange{X25519, P256}, ciphers: aead.Preferred(), ext: extPadding}).marshal()
	f.Add(p[4:])
	// Proposes with a key share: X25519 (then padding), P-256, an unknown
	// code, and an unknown extension after the share.
	for _, ext := range [][]byte{
		append(appendKeyShare(nil, X25519, x25519Point), extPadding...),
		appendKeyShare(nil, P256, append([]byte{4}, make([]byte, 64)...)),
		appendKeyShare(nil, 3, make([]byte, 40)),
		append(appendKeyShare(nil, X25519, x25519Point), 0, 2, 0, 1, 0),
	} {
		ps := (&propose{version: 1, pubKey: testKey("a").pub.key, maxFrame: 1 << 20,
			kexes: []KeyExchange{X25519, P256}, ciphers: aead.Preferred(), ext: ext}).marshal()
		f.Add(ps[4:])
	}
	f.Add((&exchange{kex: X25519, key: make([]byte, 32)}).marshal()[4:])
	f.Add(appendConfirm(nil, [NonceSize]byte{1}, make([]byte, 64)))
	f.Add([]byte{msgPropose, 0, 1})
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, body []byte) {
		if len(body) > MaxHandshakeMessage {
			return
		}
		var pr propose
		if err := parsePropose(&pr, body); err == nil {
			// What parses re-encodes to the same bytes.
			if got := pr.marshal(); !bytes.Equal(got[4:], body) {
				t.Fatalf("Propose round trip:\n in %x\nout %x", body, got[4:])
			}
			if len(pr.pubKey) != PublicKeySize || len(pr.kexes) == 0 || len(pr.ciphers) == 0 || pr.maxFrame < MinFrameSize {
				t.Fatal("parsePropose accepted an invalid Propose")
			}
			// A recorded share has a known code and the right key length,
			// and is inside the extensions.
			if pr.shareKex != 0 && (!pr.shareKex.Valid() || len(pr.shareKey()) != pr.shareKex.publicKeySize() ||
				!bytes.Contains(pr.ext, appendKeyShare(nil, pr.shareKex, pr.shareKey()))) {
				t.Fatalf("parsePropose recorded share %s %x", pr.shareKex, pr.shareKey())
			}
		} else if !errors.Is(err, ErrInvalidMessage) {
			t.Fatalf("untyped error %v", err)
		}
		if e, err := parseExchange(body); err == nil {
			if got := e.marshal(); !bytes.Equal(got[4:], body) {
				t.Fatal("Exchange round trip")
			}
		}
		if c, err := parseConfirm(body); err == nil {
			if got := appendConfirm(nil, c.nonce, c.sig); !bytes.Equal(got, body) {
				t.Fatal("Confirm round trip")
			}
		}
	})
}

// fuzzConn reads from a fixed input and discards writes. maxRead records
// the longest buffer a Read was given.
type fuzzConn struct {
	r       *bytes.Reader
	maxRead int
}

func (c *fuzzConn) Read(p []byte) (int, error) {
	c.maxRead = max(c.maxRead, len(p))
	return c.r.Read(p)
}
func (c *fuzzConn) Write(p []byte) (int, error)        { return len(p), nil }
func (c *fuzzConn) Close() error                       { return nil }
func (c *fuzzConn) LocalAddr() net.Addr                { return &net.UnixAddr{Name: "fuzz", Net: "fuzz"} }
func (c *fuzzConn) RemoteAddr() net.Addr               { return &net.UnixAddr{Name: "fuzz", Net: "fuzz"} }
func (c *fuzzConn) SetDeadline(t time.Time) error      { return nil }
func (c *fuzzConn) SetReadDeadline(t time.Time) error  { return nil }
func (c *fuzzConn) SetWriteDeadline(t time.Time) error { return nil }

func FuzzFrameReader(f *testing.F) {
	// Seeds: valid frames from a sender with the fixed keys of rawPair.
	x, y := newBufPair()
	sa, _ := rawPair(f, x, y, aead.AES128GCM)
	for _, m := range []string{"", "a", "hello, world"} {
		sa.Write([]byte(m))
	}
	sa.Write(make([]byte, 3000))
	var seed bytes.Buffer
	io.Copy(&seed, io.LimitReader(&bufConnReader{y}, int64(len(y.in.buf))))
	f.Add(seed.Bytes(), false, uint16(100))
	f.Add(seed.Bytes(), false, uint16(4096))
	f.Add(seed.Bytes(), false, uint16(1))
	f.Add([]byte{0, 0, 0, 16}, false, uint16(100))
	f.Add([]byte{0xff, 0xff, 0xff, 0xff}, true, uint16(100))
	f.Add([]byte{0, 0, 0, 0x20, 1, 2, 3}, true, uint16(7))
	f.Fuzz(func(t *testing.T, data []byte, legacy bool, readSize uint16) {
		var c *Conn
		fc := &fuzzConn{r: bytes.NewReader(data)}
		const maxFrame = 4096
		if legacy {
			c, _ = LegacyTEA(fc, legacyKey, &LegacyConfig{MaxFrameSize: maxFrame})
		} else {
			_, c = rawPair(t, fc, fc, aead.AES128GCM)
			c.in.maxLen = maxFrame + 16
		}
		// Reads of every size: into the caller's buffer when a frame fits,
		// through the Conn's buffer otherwise.
		buf := make([]byte, 1+int(readSize)%8192)
		total := 0
		for {
			n, err := c.Read(buf)
			total += n
			if err != nil {
				break
			}
		}
		if total > len(data) {
			t.Fatal("read more plaintext than input")
		}
		// Never read into more than a buffer for one maximum frame,
		// whatever the input; after the final error nothing is held.
		if limit := max(classSize(bufferClass(maxFrame+16+frameHeaderSize)), greedyBuffer); fc.maxRead > limit {
			t.Fatalf("read into a %d-byte buffer, limit %d", fc.maxRead, limit)
		}
		if c.in.pooled != nil || len(c.in.buf) != smallRead {
			t.Fatalf("a failed Conn still holds a %d-byte buffer", len(c.in.buf))
		}
	})
}

type bufConnReader struct{ c *bufConn }

func (r *bufConnReader) Read(p []byte) (int, error) { return r.c.Read(p) }

func FuzzHandshakeInput(f *testing.F) {
	p := (&propose{version: 1, pubKey: testKey("b").pub.key, maxFrame: 1 << 20,
		kexes: []KeyExchange{X25519}, ciphers: []aead.Suite{aead.AES128GCM}, ext: extPadding}).marshal()
	ex := (&exchange{kex: X25519, key: testKey("b").pub.key}).marshal()
	f.Add(append(bytes.Clone(p), ex...))
	f.Add(p)
	// A Propose with an X25519 share (the local side's first choice, so
	// no Exchange follows), then a frame in place of the Confirm.
	ps := (&propose{version: 1, pubKey: testKey("b").pub.key, maxFrame: 1 << 20,
		kexes: []KeyExchange{X25519}, ciphers: []aead.Suite{aead.AES128GCM},
		ext: appendKeyShare(nil, X25519, x25519Point)}).marshal()
	f.Add(append(bytes.Clone(ps), 0, 0, 0, 0x63))
	f.Add(append(bytes.Clone(ps), append([]byte{0, 0, 0, 0x63}, make([]byte, 0x63)...)...))
	f.Add(binary.BigEndian.AppendUint32(nil, 5000))
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg := testConfig("a")
		cfg.Rand = newDetRand("fuzz")
		_, err := Server(context.Background(), &fuzzConn{r: bytes.NewReader(data)}, cfg)
		// Without the peer's keys no input can complete the handshake.
		if err == nil {
			t.Fatal("handshake completed on fuzz input")
		}
	})
}
