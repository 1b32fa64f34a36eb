package secio

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"

	"github.com/tendril-p2p/tendril/cipher/aead"
)

// proposeWithExt is a valid Propose from identity "b" offering kexes, with
// the extension block ext.
func proposeWithExt(kexes []KeyExchange, ext []byte) []byte {
	return (&propose{version: 1, pubKey: testKey("b").pub.key, maxFrame: 1 << 20,
		kexes: kexes, ciphers: []aead.Suite{aead.AES128GCM}, ext: ext}).marshal()
}

// share returns a key share extension entry with code k and key.
func share(k KeyExchange, key []byte) []byte { return appendKeyShare(nil, k, key) }

// x25519Point is a valid X25519 public key (the base point, u = 9).
var x25519Point = append([]byte{9}, make([]byte, 31)...)

// A malformed key share fails the Propose with ErrInvalidMessage, while it
// is read; a share with an unknown code is not an error.
func TestMalformedKeyShare(t *testing.T) {
	p256Point := testP256Key(t)
	both := []KeyExchange{X25519, P256}
	cases := map[string][]byte{
		"X25519 share of 31 bytes": share(X25519, make([]byte, 31)),
		"X25519 share of 33 bytes": share(X25519, make([]byte, 33)),
		"X25519 share of 65 bytes": share(X25519, p256Point),
		"P-256 share of 32 bytes":  share(P256, x25519Point),
		"P-256 share of 64 bytes":  share(P256, p256Point[:64]),
		"empty share":              {0x00, 0x01, 0x00, 0x00},
		"two shares":               append(share(X25519, x25519Point), share(P256, p256Point)...),
		"same share twice":         append(share(X25519, x25519Point), share(X25519, x25519Point)...),
		"two unknown shares":       append(share(3, []byte{1}), share(3, []byte{1})...),
		"share after padding":      append(bytes.Clone(extPadding), share(X25519, x25519Point)...),
		"share cut short":          share(X25519, x25519Point)[:20],
	}
	for name, ext := range cases {
		t.Run(name, func(t *testing.T) {
			err := rawPeer(t, proposeWithExt(both, ext))
			if !errors.Is(err, ErrInvalidMessage) {
				t.Fatalf("%v, want ErrInvalidMessage", err)
			}
			var he *HandshakeError
			if !errors.As(err, &he) || he.Step != "read propose" {
				t.Fatalf("%v: not refused while reading the Propose", err)
			}
		})
	}
}

// testP256Key returns a valid uncompressed P-256 public key.
func testP256Key(t *testing.T) []byte {
	t.Helper()
	var scalar [32]byte
	k, err := generateEphemeral(P256, newDetRand("p256 share"), &scalar)
	if err != nil {
		t.Fatal(err)
	}
	return k.PublicKey().Bytes()
}

// A share whose key is not a usable point fails the key agreement with
// ErrInvalidKeyExchange, after the checks of the Propose: a peer whose ID
// is not the expected one is refused for that first.
func TestInvalidKeyShare(t *testing.T) {
	bad := append([]byte{4}, make([]byte, 64)...) // not on the curve
	cases := []struct {
		name string
		kex  KeyExchange
		key  []byte
	}{
		{"X25519 zero", X25519, make([]byte, 32)},
		{"X25519 one", X25519, append([]byte{1}, make([]byte, 31)...)},
		// A point of order 8 (one of the low-order points libsodium refuses).
		{"X25519 order 8", X25519, mustHex("e0eb7a7c3b41b8ae1656e3faf19fc46ada098deb9c32b1fd866205165f49b800")},
		{"P-256 off the curve", P256, bad},
		{"P-256 compressed form", P256, append([]byte{2}, make([]byte, 64)...)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			msg := proposeWithExt([]KeyExchange{tc.kex}, share(tc.kex, tc.key))
			err := rawPeerWith(t, msg, func(c *Config) { c.KeyExchanges = []KeyExchange{tc.kex} })
			if !errors.Is(err, ErrInvalidKeyExchange) {
				t.Fatalf("%v, want ErrInvalidKeyExchange", err)
			}
			var he *HandshakeError
			if !errors.As(err, &he) || he.Step != "key share" {
				t.Fatalf("%v: step is not the key share", err)
			}
			err = rawPeerWith(t, msg, func(c *Config) {
				c.KeyExchanges = []KeyExchange{tc.kex}
				c.ExpectedPeer = testKey("c").PeerID()
			})
			if !errors.Is(err, ErrPeerIDMismatch) {
				t.Fatalf("unexpected peer: %v, want ErrPeerIDMismatch before any ECDH", err)
			}
		})
	}
}

// rawPeerWith is rawPeer with the local config changed by edit.
func rawPeerWith(t *testing.T, data []byte, edit func(*Config)) error {
	t.Helper()
	a, b := net.Pipe()
	defer b.Close()
	go func() {
		b.Write(data)
		buf := make([]byte, 4096)
		for {
			if _, err := b.Read(buf); err != nil {
				return
			}
		}
	}()
	cfg := testConfig("a")
	edit(cfg)
	_, err := Client(context.Background(), a, cfg)
	if err == nil {
		t.Fatal("handshake succeeded")
	}
	return err
}

func mustHex(s string) []byte {
	b, err := hex.DecodeString(s)
	if err != nil {
		panic(err)
	}
	return b
}

func newDebugLogger(w io.Writer) *slog.Logger {
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// editedServer runs the server side of a handshake whose Propose
// extensions are replaced by edit's result; edit also returns the key
// exchange of the share it left in them (0 for none usable), which is what
// the side then believes it sent.
func editedServer(conn net.Conn, cfg *Config, edit func(hs *handshakeState) ([]byte, KeyExchange)) (*Conn, error) {
	hs, err := newHandshakeState(conn, cfg)
	if err != nil {
		return nil, err
	}
	defer hs.stopWriter()
	err = hs.makePropose()
	var p propose
	if err == nil {
		err = parsePropose(&p, hs.localPropose[frameHeaderSize:])
	}
	if err == nil {
		p.ext, hs.shareKex = edit(hs)
		hs.localPropose = p.marshal()
		err = hs.agreeKeys()
	}
	if err == nil {
		var frame *[]byte
		if frame, err = hs.sealConfirm(); err == nil {
			err = hs.flight("confirm", *frame, hs.readConfirm)
			putBuffer(frame)
		}
	}
	if err != nil {
		conn.Close()
		return nil, err
	}
	return hs.c, nil
}

// Extensions a side does not know are ignored and bound by the transcript:
// a share with an unknown code (here 32 + 1184 bytes under the reserved
// hybrid code 0x03) leaves the handshake to the Exchange flight; an
// unknown extension type next to a usable share does not stop the shares
// from being used. Both handshakes complete.
func TestUnknownKeyShareIgnored(t *testing.T) {
	cases := []struct {
		name   string
		edit   func(hs *handshakeState) ([]byte, KeyExchange)
		writes int // handshake messages each side sends
	}{
		{"unknown code", func(hs *handshakeState) ([]byte, KeyExchange) {
			return share(3, make([]byte, 32+1184)), 0
		}, 3},
		{"unknown code, one byte", func(hs *handshakeState) ([]byte, KeyExchange) {
			return append(share(0x7f, nil), extPadding...), 0
		}, 3},
		{"unknown extension after the share", func(hs *handshakeState) ([]byte, KeyExchange) {
			ext := share(hs.shareKex, hs.eph.PublicKey().Bytes())
			return append(ext, 0x00, 0x02, 0x00, 0x03, 'x', 'y', 'z'), hs.shareKex
		}, 2},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var rec recorder
			a, b := net.Pipe()
			var wg sync.WaitGroup
			var sb *Conn
			var errB error
			wg.Add(1)
			go func() {
				defer wg.Done()
				sb, errB = editedServer(b, testConfig("b"), tc.edit)
			}()
			sa, errA := Client(context.Background(), &recordConn{Conn: a, rec: &rec}, testConfig("a"))
			wg.Wait()
			if errA != nil || errB != nil {
				t.Fatal(errA, errB)
			}
			defer sa.Close()
			defer sb.Close()
			if n := len(rec.writes); n != tc.writes {
				t.Fatalf("client sent %d handshake messages, want %d", n, tc.writes)
			}
			go sa.Write([]byte("over the shares"))
			if got, err := readN(sb, 15); err != nil || string(got) != "over the shares" {
				t.Fatal(string(got), err)
			}
		})
	}
}

// A side whose key share was for the negotiated key exchange sends the
// same key in its Exchange and draws no second one; a side whose share was
// for another exchange draws a new key.
func TestExchangeReusesShare(t *testing.T) {
	cases := []struct {
		name   string
		ca, cb func(*Config)
	}{
		{"server without share", func(*Config) {}, func(c *Config) { noShare(c) }},
		{"preference mismatch", func(c *Config) { c.KeyExchanges = []KeyExchange{P256, X25519} },
			func(c *Config) { c.KeyExchanges = []KeyExchange{X25519, P256} }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ca, cb := testConfig("a"), testConfig("b")
			tc.ca(ca)
			tc.cb(cb)
			ra, rb := &countingRand{}, &countingRand{}
			ca.Rand, cb.Rand = ra, rb
			sa, sb, wa, wb := recordedHandshake(t, ca, cb)
			sa.Close()
			sb.Close()
			k := sa.KeyExchange()
			for _, side := range []struct {
				name string
				cfg  *Config
				w    [][]byte
				n    int
			}{{"client", ca, wa.writes, ra.n}, {"server", cb, wb.writes, rb.n}} {
				if len(side.w) != 3 {
					t.Fatalf("%s: %d handshake messages, want 3", side.name, len(side.w))
				}
				var p propose
				if err := parsePropose(&p, side.w[0][4:]); err != nil {
					t.Fatal(err)
				}
				e, err := parseExchange(side.w[1][4:])
				if err != nil {
					t.Fatal(err)
				}
				want := NonceSize + 32 // nonce and one ephemeral scalar
				if side.cfg.noKeyShare {
					if p.shareKex != 0 {
						t.Fatalf("%s: sent a share", side.name)
					}
				} else if p.shareKex != k {
					want += 32 // the share's scalar, unused
				} else if !bytes.Equal(e.key, p.shareKey()) {
					t.Fatalf("%s: Exchange key differs from its %s share", side.name, k)
				}
				if e.kex != k || side.n != want {
					t.Fatalf("%s: Exchange for %s after %d random bytes, want %s after %d", side.name, e.kex, side.n, k, want)
				}
			}
		})
	}
}

// The debug record of a completed handshake says whether the key shares
// were used.
func TestKeyShareLogged(t *testing.T) {
	var buf strings.Builder
	ca := testConfig("a")
	ca.Logger = newDebugLogger(&buf)
	securePair(t, transports[0], ca, testConfig("b"))
	if !strings.Contains(buf.String(), "key_shares_used=true") {
		t.Fatalf("log: %s", buf.String())
	}
	buf.Reset()
	securePair(t, transports[0], ca, noShare(testConfig("b")))
	if !strings.Contains(buf.String(), "key_shares_used=false") {
		t.Fatalf("log: %s", buf.String())
	}
}
