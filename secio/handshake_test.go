package secio

import (
	"bytes"
	"context"
	"crypto/ecdh"
	"crypto/mlkem"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tendril-p2p/tendril/cipher/aead"
	"github.com/tendril-p2p/tendril/internal/testutil"
)

// classical returns cfg restricted to X25519.
func classical(cfg *Config) *Config {
	cfg.KeyExchanges = []KeyExchange{X25519}
	return cfg
}

// handshakeModes are the key exchanges every handshake-level test runs
// with: the default hybrid and a classical one. X25519MLKEM768 shares their
// code but for the order of its parts, which its vector, TestHandshakeFlights
// and TestHandshakeNegotiation check.
var handshakeModes = []struct {
	name string
	cfg  func(string) *Config
	kex  KeyExchange
}{
	{"hybrid", testConfig, P256MLKEM768},
	{"classical", func(l string) *Config { return classical(testConfig(l)) }, X25519},
}

// streamLens returns how many handshake bytes the client and the server
// write with these configs.
func streamLens(t *testing.T, ca, cb *Config) (client, server int) {
	t.Helper()
	sa, sb, wa, wb := recordedHandshake(t, ca, cb)
	sa.Close()
	sb.Close()
	for _, w := range wa.writes[:2] { // ClientHello, DialerAuth
		client += len(w)
	}
	server = len(wb.writes[0]) // ServerHello and ListenerAuth
	return client, server
}

// TestFlippedBitInHandshake flips one bit of each handshake byte in turn,
// in each direction. The receiver of the changed byte always fails; a
// change before the dialer's last flight fails both sides; a change in
// the dialer's Auth record fails the listener, and the dialer (which
// returned at once) then finds its Conn ended.
func TestFlippedBitInHandshake(t *testing.T) {
	for _, mode := range handshakeModes {
		for _, dir := range []string{"a->b", "b->a"} {
			t.Run(mode.name+" "+dir, func(t *testing.T) {
				// Flips of a length prefix wait for the handshake timeout.
				t.Parallel()
				nc, ns := streamLens(t, mode.cfg("a"), mode.cfg("b"))
				total, lastFlight := ns, ns
				if dir == "a->b" {
					total, lastFlight = nc, nc-(frameHeaderSize+authLen+recordTypeSize+16)
				}
				for off := range total {
					flipAt(t, mode.cfg, dir, off, off >= lastFlight)
				}
			})
		}
	}
}

func flipAt(t *testing.T, cfg func(string) *Config, dir string, off int, inDialerAuth bool) {
	bit := byte(1) << (off % 8)
	flip := func(o int, b byte) int {
		if o == off {
			return int(b ^ bit)
		}
		return int(b)
	}
	editAB, editBA := flip, noEdit
	if dir == "b->a" {
		editAB, editBA = noEdit, flip
	}
	ca, cb := cfg("a"), cfg("b")
	ca.HandshakeTimeout, cb.HandshakeTimeout = time.Second, time.Second
	sa, _, errA, errB := mitmHandshake(t, ca, cb, editAB, editBA)
	recvErr, sendErr := errB, errA
	if dir == "b->a" {
		recvErr, sendErr = errA, errB
	}
	if recvErr == nil {
		t.Fatalf("%s offset %d: receiver accepted a modified handshake", dir, off)
	}
	if !inDialerAuth && sendErr == nil {
		t.Fatalf("%s offset %d: sender completed the handshake (receiver: %v)", dir, off, recvErr)
	}
	if inDialerAuth {
		// The body fails to open; a changed length prefix is too long
		// for an Auth record, or too short to open.
		if !errors.Is(errB, ErrAuthFailed) && !errors.Is(errB, ErrInvalidMessage) {
			t.Fatalf("offset %d (dialer auth): %v", off, errB)
		}
		if errA == nil {
			if _, err := sa.Read(make([]byte, 1)); err == nil {
				t.Fatalf("offset %d: the dialer's Conn still reads after the listener refused it", off)
			}
		}
	}
}

// TestTruncatedHandshake cuts each direction's handshake bytes at every
// offset: the side waiting for the rest fails with io.ErrUnexpectedEOF and
// a named step.
func TestTruncatedHandshake(t *testing.T) {
	for _, mode := range handshakeModes {
		t.Run(mode.name, func(t *testing.T) {
			t.Parallel()
			nc, ns := streamLens(t, mode.cfg("a"), mode.cfg("b"))
			for _, dir := range []string{"a->b", "b->a"} {
				total := nc
				if dir == "b->a" {
					total = ns
				}
				for off := range total {
					cut := func(o int, b byte) int {
						if o == off {
							return -1
						}
						return int(b)
					}
					editAB, editBA := cut, noEdit
					if dir == "b->a" {
						editAB, editBA = noEdit, cut
					}
					_, _, errA, errB := mitmHandshake(t, mode.cfg("a"), mode.cfg("b"), editAB, editBA)
					recv := errB
					if dir == "b->a" {
						recv = errA
					}
					if !errors.Is(recv, io.ErrUnexpectedEOF) {
						t.Fatalf("%s cut at %d: receiver error %v, want io.ErrUnexpectedEOF", dir, off, recv)
					}
					var he *HandshakeError
					if !errors.As(recv, &he) || he.Step == "" {
						t.Fatalf("%s cut at %d: %v has no step", dir, off, recv)
					}
				}
			}
		})
	}
}

// Two dialers spliced together each read a ClientHello where a ServerHello
// is due: both fail at once (over TCP: over net.Pipe both would block in
// their first write). Two listeners both wait for a ClientHello and time
// out.
func TestSplicedRoles(t *testing.T) {
	for _, mode := range handshakeModes {
		a, b := testutil.TCPPair(t)
		var wg sync.WaitGroup
		var errA, errB error
		wg.Add(2)
		go func() { defer wg.Done(); _, errA = Client(context.Background(), a, mode.cfg("a")) }()
		go func() { defer wg.Done(); _, errB = Client(context.Background(), b, mode.cfg("b")) }()
		wg.Wait()
		for _, err := range []error{errA, errB} {
			if !errors.Is(err, ErrInvalidMessage) {
				t.Fatalf("%s: spliced clients: %v, want ErrInvalidMessage", mode.name, err)
			}
		}
	}
	a, b := net.Pipe()
	ca, cb := testConfig("a"), testConfig("b")
	ca.HelloTimeout, cb.HelloTimeout = 100*time.Millisecond, 100*time.Millisecond
	var wg sync.WaitGroup
	var errA, errB error
	wg.Add(2)
	go func() { defer wg.Done(); _, errA = Server(context.Background(), a, ca) }()
	go func() { defer wg.Done(); _, errB = Server(context.Background(), b, cb) }()
	wg.Wait()
	// Both time out; on a loaded machine one timer may fire well before the other, and
	// the later server then sees the pipe closed by the earlier one instead.
	timedOut := func(err error) bool { return errors.Is(err, ErrHandshakeTimeout) }
	closedByPeer := func(err error) bool { return errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) }
	if !(timedOut(errA) && (timedOut(errB) || closedByPeer(errB)) || timedOut(errB) && closedByPeer(errA)) {
		t.Fatalf("spliced servers: %v / %v, want ErrHandshakeTimeout (or, after the other's, the pipe closed)", errA, errB)
	}
}

// A ClientHello reflected back to its sender is not a ServerHello.
func TestReflectedHello(t *testing.T) {
	x, y := net.Pipe()
	go func() {
		buf := make([]byte, 4096)
		for {
			n, err := y.Read(buf)
			if err != nil {
				return
			}
			if _, err := y.Write(buf[:n]); err != nil {
				return
			}
		}
	}()
	_, err := Client(context.Background(), x, testConfig("a"))
	if !errors.Is(err, ErrInvalidMessage) {
		t.Fatalf("reflected: %v, want ErrInvalidMessage", err)
	}
	y.Close()
}

func TestHandshakeNegotiation(t *testing.T) {
	cases := []struct {
		name      string
		a, b      []aead.Suite
		ka, kb    []KeyExchange
		wantErr   error
		wantSuite aead.Suite
		wantKex   KeyExchange
	}{
		{"no common cipher", []aead.Suite{aead.AES128GCM}, []aead.Suite{aead.ChaCha20Poly1305}, nil, nil, ErrNoCommonSuite, 0, 0},
		{"no common kex", nil, nil, []KeyExchange{X25519}, []KeyExchange{P256}, ErrNoCommonSuite, 0, 0},
		{"one common", []aead.Suite{aead.AES128GCM, aead.AES256GCM}, []aead.Suite{aead.ChaCha20Poly1305, aead.AES256GCM}, nil, nil, nil, aead.AES256GCM, P256MLKEM768},
		// The listener's order decides the cipher.
		{"opposite orders", []aead.Suite{aead.AES128GCM, aead.ChaCha20Poly1305}, []aead.Suite{aead.ChaCha20Poly1305, aead.AES128GCM}, nil, nil, nil, aead.ChaCha20Poly1305, P256MLKEM768},
		// The dialer's share is used when the listener accepts its exchange.
		{"dialer prefers classical", nil, nil, []KeyExchange{P256, X25519MLKEM768}, nil, nil, 0, P256},
		// Otherwise the listener asks for its favourite (one retry).
		{"retry to hybrid", nil, nil, []KeyExchange{X25519, X25519MLKEM768}, []KeyExchange{X25519MLKEM768}, nil, 0, X25519MLKEM768},
		{"retry to classical", nil, nil, nil, []KeyExchange{P256}, nil, 0, P256},
		// A listener that takes only TLS's default hybrid gets it after one retry.
		{"retry to X25519 hybrid", nil, nil, nil, []KeyExchange{X25519MLKEM768}, nil, 0, X25519MLKEM768},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ca, cb := testConfig("a"), testConfig("b")
			ca.Ciphers, cb.Ciphers = tc.a, tc.b
			ca.KeyExchanges, cb.KeyExchanges = tc.ka, tc.kb
			a, b := net.Pipe()
			sa, sb, errA, errB := handshakePair(a, b, ca, cb)
			if tc.wantErr != nil {
				if !errors.Is(errA, tc.wantErr) && !errors.Is(errB, tc.wantErr) {
					t.Fatalf("errors %v / %v, want %v", errA, errB, tc.wantErr)
				}
				if errA == nil || errB == nil {
					t.Fatalf("errors %v / %v: a side completed", errA, errB)
				}
				var nc *NoCommonSuiteError
				err := errB
				if !errors.As(err, &nc) {
					err = errA
				}
				if !errors.As(err, &nc) || len(nc.Local) == 0 || len(nc.Remote) == 0 ||
					!strings.Contains(err.Error(), "local [") || !strings.Contains(err.Error(), "remote [") {
					t.Fatalf("error %v does not name both lists", err)
				}
				return
			}
			if errA != nil || errB != nil {
				t.Fatal(errA, errB)
			}
			defer sa.Close()
			defer sb.Close()
			if sa.Suite() != sb.Suite() || sa.KeyExchange() != sb.KeyExchange() {
				t.Fatalf("sides disagree: %s/%s vs %s/%s", sa.Suite(), sa.KeyExchange(), sb.Suite(), sb.KeyExchange())
			}
			if tc.wantSuite != 0 && sa.Suite() != tc.wantSuite {
				t.Fatalf("suite %s, want %s", sa.Suite(), tc.wantSuite)
			}
			if sa.KeyExchange() != tc.wantKex {
				t.Fatalf("key exchange %s, want %s", sa.KeyExchange(), tc.wantKex)
			}
			exchangeData(t, sa, sb, []int{1, 1000})
		})
	}
}

// fakeListener answers a ClientHello with the given raw replies (then
// waits), and returns the Client's error.
func fakeListener(t *testing.T, cfg *Config, replies ...[]byte) error {
	t.Helper()
	a, b := net.Pipe()
	defer b.Close()
	go func() {
		for _, r := range replies {
			var hdr [4]byte
			if _, err := io.ReadFull(b, hdr[:]); err != nil {
				return
			}
			if _, err := io.CopyN(io.Discard, b, int64(binary.BigEndian.Uint32(hdr[:]))); err != nil {
				return
			}
			if _, err := b.Write(r); err != nil {
				return
			}
		}
		io.Copy(io.Discard, b)
	}()
	return failedHandshake(t, Client, a, cfg)
}

// failedHandshake runs one side of a handshake (Client or Server) on conn, whose other end
// a scripted peer drives, and returns its error; a handshake that succeeds fails the test.
func failedHandshake(t *testing.T, side func(context.Context, net.Conn, *Config) (*Conn, error), conn net.Conn, cfg *Config) error {
	t.Helper()
	cfg.HandshakeTimeout = time.Second
	_, err := side(context.Background(), conn, cfg)
	if err == nil {
		t.Fatal("handshake succeeded")
	}
	return err
}

// A HelloRetryRequest must ask for an exchange the dialer offered and did
// not already send, and comes at most once.
func TestHelloRetryChecks(t *testing.T) {
	hrr := func(k KeyExchange) []byte { return appendHelloRetry(nil, k) }
	for name, replies := range map[string][][]byte{
		"not offered":  {hrr(P256)},
		"same as sent": {hrr(X25519MLKEM768)},
		"unknown":      {hrr(9)},
		"twice":        {hrr(X25519), hrr(X25519MLKEM768)},
		"zero":         {hrr(0)},
	} {
		cfg := testConfig("a")
		cfg.KeyExchanges = []KeyExchange{X25519MLKEM768, X25519}
		if err := fakeListener(t, cfg, replies...); !errors.Is(err, ErrInvalidMessage) {
			t.Errorf("%s: %v, want ErrInvalidMessage", name, err)
		}
	}
	// A retried ClientHello must carry the share asked for.
	a, b := net.Pipe()
	defer a.Close()
	go func() {
		cfg := testConfig("a")
		cfg.KeyExchanges = []KeyExchange{X25519}
		cfg.Rand = newDetRand("retry")
		var nonce [NonceSize]byte
		msg := appendClientHello(nil, &nonce, 1<<20, []KeyExchange{X25519, P256}, aead.Preferred(), X25519, make([]byte, 32))
		a.Write(msg)
		var hrr [frameHeaderSize + helloRetryLen]byte
		io.ReadFull(a, hrr[:])
		a.Write(msg) // the same X25519 share again
		io.Copy(io.Discard, a)
	}()
	cb := testConfig("b")
	cb.KeyExchanges = []KeyExchange{P256}
	if _, err := Server(context.Background(), b, cb); !errors.Is(err, ErrInvalidMessage) {
		t.Fatalf("retried ClientHello with the old share: %v, want ErrInvalidMessage", err)
	}
}

// ExpectedPeer is checked on the listener's decrypted identity, before the
// dialer reveals its own: the listener never receives a DialerAuth.
func TestExpectedPeer(t *testing.T) {
	for _, mode := range handshakeModes {
		ca, cb := mode.cfg("a"), mode.cfg("b")
		ca.ExpectedPeer = testKey("c").PeerID()
		x, y := net.Pipe()
		var rec recorder
		_, _, errA, errB := handshakePair(&recordConn{Conn: x, rec: &rec}, y, ca, cb)
		if !errors.Is(errA, ErrPeerIDMismatch) {
			t.Fatalf("client: %v, want ErrPeerIDMismatch", errA)
		}
		if !strings.Contains(errA.Error(), testKey("b").PeerID().String()) {
			t.Fatalf("error %q does not name the peer", errA)
		}
		var he *HandshakeError
		if !errors.Is(errB, io.ErrUnexpectedEOF) || !errors.As(errB, &he) || he.Step != "read dialer auth" {
			t.Fatalf("server: %v, want io.ErrUnexpectedEOF reading the dialer's auth", errB)
		}
		if len(rec.writes) != 1 {
			t.Fatalf("the client wrote %d messages, want only its ClientHello", len(rec.writes))
		}
		ca.ExpectedPeer = testKey("b").PeerID()
		sa, _ := securePair(t, transports[0], ca, cb)
		if sa.RemotePeer() != ca.ExpectedPeer {
			t.Fatal("wrong peer")
		}
	}
}

func TestSelfDial(t *testing.T) {
	a, b := net.Pipe()
	_, _, errA, errB := handshakePair(a, b, testConfig("a"), testConfig("a"))
	if !errors.Is(errA, ErrSelfDial) || errB == nil {
		t.Fatalf("errors %v / %v, want ErrSelfDial for the dialer and a failure for the listener", errA, errB)
	}
	// A dialer holding the listener's key reaches the listener's check too.
	a, b = net.Pipe()
	cfg := testConfig("a")
	evil := testConfig("b")
	evil.PrivateKey = cfg.PrivateKey
	go func() { defer a.Close(); dialerWith(a, evil, nil) }()
	if _, err := Server(context.Background(), b, cfg); !errors.Is(err, ErrSelfDial) {
		t.Fatalf("listener: %v, want ErrSelfDial", err)
	}
}

// smallOrderKey returns a PrivateKey whose public half claims a small-order
// encoding (its signatures are made with another key and do not verify:
// the check must come first).
func smallOrderKey(i int, sign bool) *PrivateKey {
	k := testKey("small")
	enc := smallOrderKeys[i]
	if sign {
		enc[PublicKeySize-1] |= 0x80
	}
	pub := &PublicKey{raw: enc}
	pub.key = pub.raw[:]
	pub.id = peerIDFromEncoding(pub.key)
	return &PrivateKey{key: k.key, pub: pub}
}

// Small-order identity keys are refused by both roles, whatever their
// sign bit, before their signature is looked at.
func TestSmallOrderIdentity(t *testing.T) {
	for i := range smallOrderKeys {
		for _, sign := range []bool{false, true} {
			evil := testConfig("b")
			evil.PrivateKey = smallOrderKey(i, sign)
			a, b := net.Pipe()
			_, _, errA, _ := handshakePair(a, b, testConfig("a"), evil)
			if !errors.Is(errA, ErrInvalidKey) {
				t.Fatalf("listener key %d (sign %v): dialer error %v, want ErrInvalidKey", i, sign, errA)
			}
			a, b = net.Pipe()
			go func() { defer a.Close(); dialerWith(a, evil, nil) }()
			if _, err := Server(context.Background(), b, testConfig("a")); !errors.Is(err, ErrInvalidKey) {
				t.Fatalf("dialer key %d (sign %v): listener error %v, want ErrInvalidKey", i, sign, err)
			}
		}
	}
}

// rawDialer sends raw bytes to a Server and returns its error.
func rawDialer(t *testing.T, data []byte) error {
	t.Helper()
	a, b := net.Pipe()
	defer a.Close()
	go func() {
		a.Write(data)
		io.Copy(io.Discard, a)
	}()
	return failedHandshake(t, Server, b, testConfig("b"))
}

func TestMalformedClientHello(t *testing.T) {
	var nonce [NonceSize]byte
	valid := appendClientHello(nil, &nonce, 1<<20, []KeyExchange{X25519}, []aead.Suite{aead.AES128GCM}, X25519, make([]byte, 32))
	mod := func(f func(b []byte) []byte) []byte { return f(bytes.Clone(valid)) }
	body := 4
	cases := map[string]struct {
		data []byte
		want error
	}{
		"oversize length":  {binary.BigEndian.AppendUint32(nil, MaxHandshakeMessage+1), ErrInvalidMessage},
		"huge length":      {[]byte{0xff, 0xff, 0xff, 0xff}, ErrInvalidMessage},
		"zero length":      {[]byte{0, 0, 0, 0}, ErrInvalidMessage},
		"http":             {[]byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n"), ErrInvalidMessage},
		"wrong type":       {mod(func(b []byte) []byte { b[body] = msgServerHello; return b }), ErrInvalidMessage},
		"version 1":        {mod(func(b []byte) []byte { b[body+2] = 1; return b }), ErrUnsupportedVersion},
		"version 2":        {mod(func(b []byte) []byte { b[body+2] = 2; return b }), ErrUnsupportedVersion},
		"frame size 1000":  {mod(func(b []byte) []byte { binary.BigEndian.PutUint32(b[body+3+NonceSize:], 1000); return b }), ErrInvalidMessage},
		"no kexes":         {mod(func(b []byte) []byte { b[body+7+NonceSize] = 0; return b }), ErrInvalidMessage},
		"17 kexes":         {mod(func(b []byte) []byte { b[body+7+NonceSize] = 17; return b }), ErrInvalidMessage},
		"short share":      {mod(func(b []byte) []byte { b[body+13+NonceSize] = 31; return b }), ErrInvalidMessage},
		"nonzero padding":  {mod(func(b []byte) []byte { b[3]++; b[len(b)-1] = 1; return append(b, 1) }), ErrInvalidMessage},
		"trailing byte":    {mod(func(b []byte) []byte { b[3]++; return append(b, 0) }), ErrInvalidMessage},
		"truncated":        {mod(func(b []byte) []byte { b[3] -= 2; return b[:len(b)-2] }), ErrInvalidMessage},
		"low-order X25519": {mod(func(b []byte) []byte { return b }), ErrInvalidKeyExchange},
		"no common cipher": {appendClientHello(nil, &nonce, 1<<20, []KeyExchange{X25519}, []aead.Suite{9}, X25519, x25519Point), ErrNoCommonSuite},
		"unknown kex only": {appendClientHello(nil, &nonce, 1<<20, []KeyExchange{9}, []aead.Suite{aead.AES128GCM}, 9, []byte{1}), ErrNoCommonSuite},
		"bad ML-KEM key":   {appendClientHello(nil, &nonce, 1<<20, []KeyExchange{X25519MLKEM768}, aead.Preferred(), X25519MLKEM768, bytes.Repeat([]byte{0xff}, X25519MLKEM768.dialerShareSize())), ErrInvalidKeyExchange},
		"short hybrid":     {appendClientHello(nil, &nonce, 1<<20, []KeyExchange{X25519MLKEM768}, aead.Preferred(), X25519MLKEM768, make([]byte, 32)), ErrInvalidMessage},
		"bad ML-KEM key, P-256 hybrid": {appendClientHello(nil, &nonce, 1<<20, []KeyExchange{P256MLKEM768}, aead.Preferred(), P256MLKEM768,
			append(p256Point(t), bytes.Repeat([]byte{0xff}, 1184)...)), ErrInvalidKeyExchange},
		"bad P-256 key, P-256 hybrid": {appendClientHello(nil, &nonce, 1<<20, []KeyExchange{P256MLKEM768}, aead.Preferred(), P256MLKEM768,
			append(make([]byte, 65), encapsulationKey(t)...)), ErrInvalidKeyExchange},
	}
	for name, tc := range cases {
		if err := rawDialer(t, tc.data); !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", name, err, tc.want)
		}
	}
}

// p256Point returns a valid P-256 public key, uncompressed.
func p256Point(t *testing.T) []byte {
	k, err := ecdh.P256().GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k.PublicKey().Bytes()
}

// encapsulationKey returns a valid ML-KEM-768 encapsulation key.
func encapsulationKey(t *testing.T) []byte {
	dk, err := mlkem.GenerateKey768()
	if err != nil {
		t.Fatal(err)
	}
	return dk.EncapsulationKey().Bytes()
}

// x25519Point is a valid X25519 public key (the base point, u = 9).
var x25519Point = append([]byte{9}, make([]byte, 31)...)

// Every hello body has an odd length (a legacy TEA peer, whose frames are
// multiples of 8 bytes, rejects it), for every list length and exchange.
func TestHelloLengthOdd(t *testing.T) {
	var nonce [NonceSize]byte
	for _, k := range []KeyExchange{X25519, P256, X25519MLKEM768, P256MLKEM768} {
		for nk := 1; nk <= 3; nk++ {
			for nc := 1; nc <= 3; nc++ {
				kexes := []KeyExchange{k, 9, 10}[:nk]
				msg := appendClientHello(nil, &nonce, 1<<20, kexes, aead.Preferred()[:nc], k, make([]byte, k.dialerShareSize()))
				if len(msg[4:])%2 != 1 {
					t.Fatalf("ClientHello body of %d bytes", len(msg[4:]))
				}
				var h clientHello
				if err := parseClientHello(&h, msg[4:]); err != nil || len(h.kexes) != nk || len(h.ciphers) != nc {
					t.Fatalf("round trip: %v", err)
				}
			}
		}
		sh := serverHello{version: ProtocolVersion, maxFrame: 1 << 20, kex: k, suite: aead.AES128GCM, share: make([]byte, k.listenerShareSize())}
		if msg := appendServerHello(nil, &sh); len(msg[4:])%2 != 1 || len(msg[4:]) > maxServerHello {
			t.Fatalf("ServerHello body of %d bytes", len(msg[4:]))
		}
	}
}

// TestIdentitiesHidden records a default handshake and some data both ways:
// neither identity key nor peer ID appears in any encoding, and the first
// message each way carries the ML-KEM-768 encapsulation key and ciphertext.
func TestIdentitiesHidden(t *testing.T) {
	ca, cb := testConfig("a"), testConfig("b")
	ca.Rand, cb.Rand = newDetRand("hidden a"), newDetRand("hidden b")
	sa, sb, wa, wb := recordedHandshake(t, ca, cb)
	exchangeData(t, sa, sb, []int{100, 5000})
	sa.Close()
	sb.Close()
	var wire []byte
	for _, w := range append(wa.writes, wb.writes...) {
		wire = append(wire, w...)
	}
	for _, k := range []*PrivateKey{ca.PrivateKey, cb.PrivateKey} {
		pub := k.Public().Bytes()
		id := k.PeerID()
		forms := map[string][]byte{
			"public key":        pub,
			"public key hex":    []byte(hex.EncodeToString(pub)),
			"peer ID bytes":     id.Bytes(),
			"peer ID digest":    id.Bytes()[2:],
			"peer ID base58":    []byte(id.String()),
			"peer ID hex":       []byte(hex.EncodeToString(id.Bytes())),
			"public key prefix": pub[:8],
			"digest prefix":     id.Bytes()[2:10],
		}
		for name, f := range forms {
			if bytes.Contains(wire, f) {
				t.Fatalf("the capture contains the %s of %s", name, id)
			}
		}
	}
	// The dialer's first message carries its ML-KEM-768 encapsulation key,
	// which comes from the 64 random bytes after its nonce.
	r := newDetRand("hidden a")
	var seed [NonceSize + mlkemSeedSize]byte
	r.Read(seed[:])
	e, err := generateEphemeral(P256MLKEM768, bytes.NewReader(append(seed[NonceSize:], bytes.Repeat([]byte{1}, 32)...)), true)
	if err != nil {
		t.Fatal(err)
	}
	ek := e.kem.EncapsulationKey().Bytes()
	if !bytes.Contains(wa.writes[0], ek) {
		t.Fatal("the ClientHello does not carry the ML-KEM-768 encapsulation key")
	}
	// The listener's first message carries a ciphertext for that key.
	var sh serverHello
	first := wb.writes[0]
	n := binary.BigEndian.Uint32(first)
	if _, err := parseListenerReply(&sh, first[4:4+n]); err != nil || sh.kex != P256MLKEM768 || len(sh.share) != 65+1088 {
		t.Fatalf("ServerHello: %v, %s share of %d bytes", err, sh.kex, len(sh.share))
	}
	if _, err := e.kem.Decapsulate(sh.share[65:]); err != nil {
		t.Fatal(err)
	}
}

func TestHelloTimeout(t *testing.T) {
	x, y := testutil.TCPPair(t)
	defer y.Close()
	cfg := testConfig("b")
	cfg.HelloTimeout = 100 * time.Millisecond
	start := time.Now()
	_, err := Server(context.Background(), x, cfg)
	if !errors.Is(err, ErrHandshakeTimeout) {
		t.Fatalf("%v, want ErrHandshakeTimeout", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("took %v", d)
	}
	// A ClientHello in time extends the deadline to HandshakeTimeout: a
	// slow listener reply does not end the handshake.
	x, y = testutil.TCPPair(t)
	ca := testConfig("a")
	go func() {
		time.Sleep(20 * time.Millisecond)
		Client(context.Background(), y, ca)
	}()
	sb, err := Server(context.Background(), x, cfg)
	if err != nil {
		t.Fatal(err)
	}
	sb.Close()
}

type recorder struct {
	mu     sync.Mutex
	writes [][]byte
}

// recordConn records every Write.
type recordConn struct {
	net.Conn
	rec *recorder
}

func (c *recordConn) Write(p []byte) (int, error) {
	c.rec.mu.Lock()
	c.rec.writes = append(c.rec.writes, bytes.Clone(p))
	c.rec.mu.Unlock()
	return c.Conn.Write(p)
}

// recordedHandshake runs a handshake over net.Pipe, recording what each
// side writes; it fails the test if either side fails.
func recordedHandshake(t *testing.T, ca, cb *Config) (sa, sb *Conn, wa, wb *recorder) {
	t.Helper()
	wa, wb = &recorder{}, &recorder{}
	x, y := net.Pipe()
	sa, sb, errA, errB := handshakePair(&recordConn{Conn: x, rec: wa}, &recordConn{Conn: y, rec: wb}, ca, cb)
	if errA != nil || errB != nil {
		t.Fatal(errA, errB)
	}
	return sa, sb, wa, wb
}

func TestHandshakeTimeout(t *testing.T) {
	a, b := net.Pipe()
	defer b.Close()
	go io.Copy(io.Discard, b) // a silent peer
	cfg := testConfig("a")
	cfg.HandshakeTimeout = 100 * time.Millisecond
	start := time.Now()
	_, err := Client(context.Background(), a, cfg)
	if !errors.Is(err, ErrHandshakeTimeout) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("%v, want ErrHandshakeTimeout", err)
	}
	var to interface{ Timeout() bool }
	if !errors.As(err, &to) || !to.Timeout() {
		t.Fatalf("%v: Timeout() not true", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("took %v", d)
	}
	// The connection was closed.
	if _, err := a.Write([]byte{1}); err == nil {
		t.Fatal("conn still open")
	}
}

func TestHandshakeContextCancel(t *testing.T) {
	a, b := net.Pipe()
	defer b.Close()
	go io.Copy(io.Discard, b)
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(50*time.Millisecond, cancel)
	_, err := Server(ctx, a, testConfig("a"))
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("%v, want context.Canceled", err)
	}
	if errors.Is(err, ErrHandshakeTimeout) {
		t.Fatal("cancellation reported as timeout")
	}
	// Already cancelled.
	c, d := net.Pipe()
	defer d.Close()
	if _, err := Client(ctx, c, testConfig("a")); !errors.Is(err, context.Canceled) {
		t.Fatalf("%v, want context.Canceled", err)
	}
}

func TestConfigValidate(t *testing.T) {
	k := testKey("a")
	bad := []*Config{
		nil,
		{},
		{PrivateKey: k, Ciphers: []aead.Suite{}},
		{PrivateKey: k, Ciphers: []aead.Suite{0}},
		{PrivateKey: k, Ciphers: []aead.Suite{aead.AES128GCM, aead.AES128GCM}},
		{PrivateKey: k, KeyExchanges: []KeyExchange{9}},
		{PrivateKey: k, HelloTimeout: -1},
		{PrivateKey: k, KeyExchanges: []KeyExchange{X25519, X25519}},
		{PrivateKey: k, HandshakeTimeout: -1},
		{PrivateKey: k, MaxFrameSize: 100},
		{PrivateKey: k, MaxFrameSize: MaxFrameSizeLimit + 1},
	}
	for i, c := range bad {
		if err := c.Validate(); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("case %d: Validate = %v", i, err)
		}
	}
	d := DefaultConfig()
	d.PrivateKey = k
	if err := d.Validate(); err != nil {
		t.Fatal(err)
	}
	if err := (&Config{PrivateKey: k}).Validate(); err != nil {
		t.Fatal(err)
	}
	// An invalid config fails before any I/O and closes the conn.
	a, b := net.Pipe()
	defer b.Close()
	if _, err := Client(context.Background(), a, nil); !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("nil config: %v", err)
	}
	if (&LegacyConfig{MaxFrameSize: 5}).Validate() == nil || (*LegacyConfig)(nil).Validate() != nil {
		t.Fatal("LegacyConfig.Validate wrong")
	}
}

// Wycheproof X25519 vectors through the key-exchange code path.
func TestWycheproofX25519(t *testing.T) {
	var f struct {
		TestGroups []struct {
			Tests []struct {
				TcID    int      `json:"tcId"`
				Public  string   `json:"public"`
				Private string   `json:"private"`
				Shared  string   `json:"shared"`
				Result  string   `json:"result"`
				Flags   []string `json:"flags"`
			} `json:"tests"`
		} `json:"testGroups"`
	}
	testutil.ReadJSON(t, "testdata/x25519_test.json", &f)
	n, refused := 0, 0
	for _, g := range f.TestGroups {
		for _, tc := range g.Tests {
			n++
			priv, _ := hex.DecodeString(tc.Private)
			pub, _ := hex.DecodeString(tc.Public)
			want, _ := hex.DecodeString(tc.Shared)
			sk, err := X25519.curve().NewPrivateKey(priv)
			if err != nil {
				t.Fatalf("tcId %d: private key: %v", tc.TcID, err)
			}
			got, err := (&ephemeral{kex: X25519, ec: sk}).ecdh(nil, pub)
			zero := bytes.Equal(want, make([]byte, 32))
			switch {
			case tc.Result == "invalid":
				if err == nil {
					t.Errorf("tcId %d: accepted an invalid case", tc.TcID)
				}
			case zero:
				// Low-order points: refused, since an all-zero secret
				// would give keys known to anyone.
				if !errors.Is(err, ErrInvalidKeyExchange) {
					t.Errorf("tcId %d: all-zero shared secret not refused: %v", tc.TcID, err)
				}
				refused++
			default: // valid, or acceptable with a non-zero secret
				if err != nil || !bytes.Equal(got, want) {
					t.Errorf("tcId %d (%s %v): got %x, %v; want %x", tc.TcID, tc.Result, tc.Flags, got, err, want)
				}
			}
		}
	}
	if n != 518 || refused == 0 {
		t.Fatalf("ran %d vectors (%d refused)", n, refused)
	}
}

func TestHandshakeLogging(t *testing.T) {
	var buf bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	ca, cb := testConfig("a"), testConfig("b")
	ca.Logger = logger
	securePair(t, transports[0], ca, cb)
	out := buf.String()
	if !strings.Contains(out, "secio handshake complete") || !strings.Contains(out, cb.PrivateKey.PeerID().String()) {
		t.Fatalf("log: %s", out)
	}
	seed, _ := ca.PrivateKey.MarshalBinary()
	if strings.Contains(out, hex.EncodeToString(seed)) {
		t.Fatal("private key logged")
	}
	buf.Reset()
	a, b := net.Pipe()
	handshakePair(a, b, ca, testConfig("a")) // a self-dial
	if !strings.Contains(buf.String(), "secio handshake failed") {
		t.Fatalf("failure not logged: %s", buf.String())
	}
}

// A ServerHello of another version is refused.
func TestServerHelloVersion(t *testing.T) {
	cfg := testConfig("a")
	cfg.KeyExchanges = []KeyExchange{X25519}
	sh := serverHello{version: ProtocolVersion + 1, maxFrame: 1 << 20, kex: X25519, suite: aead.Preferred()[0], share: x25519Point}
	if err := fakeListener(t, cfg, appendServerHello(nil, &sh)); !errors.Is(err, ErrUnsupportedVersion) {
		t.Fatalf("%v, want ErrUnsupportedVersion", err)
	}
}
