package secio

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tendril-p2p/tendril/cipher/aead"
)

// handshakeLens returns the byte lengths of the handshake messages that a
// side with config ca sends to a peer with config cb: Propose and Confirm
// when the key shares are used, Propose, Exchange and Confirm otherwise.
func handshakeLens(t *testing.T, ca, cb *Config) []int {
	t.Helper()
	var rec recorder
	a, b := net.Pipe()
	ra := &recordConn{Conn: a, rec: &rec}
	sa, sb, errA, errB := handshakePair(ra, b, ca, cb)
	if errA != nil || errB != nil {
		t.Fatal(errA, errB)
	}
	sa.Close()
	sb.Close()
	var lens []int
	for _, w := range rec.writes {
		lens = append(lens, len(w))
	}
	return lens
}

// noShare returns cfg set up as a peer that sends no key share.
func noShare(cfg *Config) *Config {
	cfg.noKeyShare = true
	return cfg
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

// TestFlippedBitInHandshake flips one bit of each byte of the handshake in
// turn, in each direction, for the two-flight handshake (Propose and
// Confirm) and the three-flight one (both sides without a key share). A
// change in a clear message fails both sides; a change in the Confirm
// fails its receiver with ErrAuthFailed.
func TestFlippedBitInHandshake(t *testing.T) {
	for _, mode := range []struct {
		name string
		cfg  func(string) *Config
		n    int // handshake messages per side
	}{
		{"key shares", testConfig, 2},
		{"exchange", func(l string) *Config { return noShare(testConfig(l)) }, 3},
	} {
		t.Run(mode.name, func(t *testing.T) {
			// Flips of a length prefix wait for the handshake timeout:
			// run both modes at once.
			t.Parallel()
			lens := handshakeLens(t, mode.cfg("a"), mode.cfg("b"))
			if len(lens) != mode.n {
				t.Fatalf("%d handshake messages, want %d", len(lens), mode.n)
			}
			inClear, total := 0, 0
			for i, n := range lens {
				if i < len(lens)-1 {
					inClear += n
				}
				total += n
			}
			flipEach(t, mode.cfg, inClear, total)
		})
	}
}

func flipEach(t *testing.T, cfg func(string) *Config, inClear, total int) {
	for _, dir := range []string{"a->b", "b->a"} {
		for off := range total {
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
			// A length prefix made larger leaves both sides waiting for
			// bytes that never come: the handshake timeout ends it.
			ca, cb := cfg("a"), cfg("b")
			ca.HandshakeTimeout, cb.HandshakeTimeout = time.Second, time.Second
			_, _, errA, errB := mitmHandshake(t, ca, cb, editAB, editBA)
			recvErr, sendErr := errB, errA
			if dir == "b->a" {
				recvErr, sendErr = errA, errB
			}
			if recvErr == nil {
				t.Fatalf("%s offset %d: receiver accepted a modified handshake", dir, off)
			}
			if off < inClear && sendErr == nil {
				t.Fatalf("%s offset %d: sender completed the handshake (receiver: %v)", dir, off, recvErr)
			}
			if off >= inClear+4 && !errors.Is(recvErr, ErrAuthFailed) {
				t.Fatalf("%s offset %d (confirm): %v, want ErrAuthFailed", dir, off, recvErr)
			}
		}
	}
}

func TestTruncatedHandshake(t *testing.T) {
	for _, share := range []bool{true, false} {
		cfg := func(l string) *Config {
			c := testConfig(l)
			c.noKeyShare = !share
			return c
		}
		lens := handshakeLens(t, cfg("a"), cfg("b"))
		inClear, total := 0, 0
		for i, n := range lens {
			if i < len(lens)-1 {
				inClear += n
			}
			total += n
		}
		for off := 0; off < total; off++ {
			cut := func(o int, b byte) int {
				if o == off {
					return -1
				}
				return int(b)
			}
			_, _, errA, errB := mitmHandshake(t, cfg("a"), cfg("b"), cut, noEdit)
			if !errors.Is(errB, io.ErrUnexpectedEOF) {
				t.Fatalf("shares %v, cut at %d: server error %v, want io.ErrUnexpectedEOF", share, off, errB)
			}
			if off < inClear && errA == nil {
				t.Fatalf("shares %v, cut at %d: client completed", share, off)
			}
			var he *HandshakeError
			if !errors.As(errB, &he) || he.Step == "" {
				t.Fatalf("shares %v, cut at %d: %v has no step", share, off, errB)
			}
		}
	}
}

// replayed records the server's handshake messages in one session, then
// runs a second one in which the proxy substitutes the recorded message
// number msg for the fresh one (same length), and requires both sides to
// fail, at least one of them with ErrAuthFailed.
func replayed(t *testing.T, cfg func(string) *Config, msg int) {
	t.Helper()
	var rec recorder
	a, b := net.Pipe()
	rb := &recordConn{Conn: b, rec: &rec}
	sa, sb, errA, errB := handshakePair(a, rb, cfg("a"), cfg("b"))
	if errA != nil || errB != nil {
		t.Fatal(errA, errB)
	}
	sa.Close()
	sb.Close()
	start := 0
	for _, w := range rec.writes[:msg] {
		start += len(w)
	}
	old := rec.writes[msg]
	replay := func(o int, c byte) int {
		if o >= start && o < start+len(old) {
			return int(old[o-start])
		}
		return int(c)
	}
	_, _, errA, errB = mitmHandshake(t, cfg("a"), cfg("b"), noEdit, replay)
	if errA == nil || errB == nil {
		t.Fatalf("replayed message accepted: client %v, server %v", errA, errB)
	}
	// Whichever side reads the other's Confirm first fails to open it; the
	// other may see the connection close first.
	if !errors.Is(errA, ErrAuthFailed) && !errors.Is(errB, ErrAuthFailed) {
		t.Fatalf("client %v, server %v: neither is ErrAuthFailed", errA, errB)
	}
}

// A Propose replayed from an earlier session carries that session's nonce
// and key share, whose private key the replayer does not hold; the fresh
// local nonce changes T anyway.
func TestReplayedPropose(t *testing.T) {
	replayed(t, testConfig, 0)
}

// The same for an Exchange, in the three-flight handshake.
func TestReplayedExchange(t *testing.T) {
	replayed(t, func(l string) *Config { return noShare(testConfig(l)) }, 1)
}

func TestHandshakeNegotiation(t *testing.T) {
	cases := []struct {
		name       string
		a, b       []aead.Suite
		ka, kb     []KeyExchange
		wantErr    error
		wantSuites []aead.Suite // acceptable results
	}{
		{"no common cipher", []aead.Suite{aead.AES128GCM}, []aead.Suite{aead.ChaCha20Poly1305}, nil, nil, ErrNoCommonSuite, nil},
		{"no common kex", nil, nil, []KeyExchange{X25519}, []KeyExchange{P256}, ErrNoCommonSuite, nil},
		{"one common", []aead.Suite{aead.AES128GCM, aead.AES256GCM}, []aead.Suite{aead.ChaCha20Poly1305, aead.AES256GCM}, nil, nil, nil, []aead.Suite{aead.AES256GCM}},
		{"opposite orders", []aead.Suite{aead.AES128GCM, aead.ChaCha20Poly1305}, []aead.Suite{aead.ChaCha20Poly1305, aead.AES128GCM}, nil, nil, nil, []aead.Suite{aead.AES128GCM, aead.ChaCha20Poly1305}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ca, cb := testConfig("a"), testConfig("b")
			ca.Ciphers, cb.Ciphers = tc.a, tc.b
			ca.KeyExchanges, cb.KeyExchanges = tc.ka, tc.kb
			a, b := net.Pipe()
			sa, sb, errA, errB := handshakePair(a, b, ca, cb)
			if tc.wantErr != nil {
				if !errors.Is(errA, tc.wantErr) || !errors.Is(errB, tc.wantErr) {
					t.Fatalf("errors %v / %v, want %v", errA, errB, tc.wantErr)
				}
				var nc *NoCommonSuiteError
				if !errors.As(errA, &nc) || len(nc.Local) == 0 || len(nc.Remote) == 0 {
					t.Fatalf("error %v does not name both lists", errA)
				}
				if !strings.Contains(errA.Error(), "local [") || !strings.Contains(errA.Error(), "remote [") {
					t.Fatalf("message %q", errA)
				}
				return
			}
			if errA != nil || errB != nil {
				t.Fatal(errA, errB)
			}
			defer sa.Close()
			defer sb.Close()
			if sa.Suite() != sb.Suite() {
				t.Fatalf("sides disagree: %s vs %s", sa.Suite(), sb.Suite())
			}
			found := false
			for _, s := range tc.wantSuites {
				found = found || s == sa.Suite()
			}
			if !found {
				t.Fatalf("suite %s", sa.Suite())
			}
		})
	}
}

// The winner's preference order is the one used, consistently with the
// order hashes.
func TestPreferenceOrder(t *testing.T) {
	wins := map[bool]int{}
	for i := range 20 {
		ca, cb := testConfig("a"), testConfig("b")
		ca.Ciphers = []aead.Suite{aead.AES128GCM, aead.ChaCha20Poly1305}
		cb.Ciphers = []aead.Suite{aead.ChaCha20Poly1305, aead.AES128GCM}
		ca.Rand = newDetRand("order a " + string(rune('a'+i)))
		cb.Rand = newDetRand("order b " + string(rune('a'+i)))
		// Predict from the nonces the Rand will produce.
		var na, nb [NonceSize]byte
		newDetRand("order a " + string(rune('a'+i))).Read(na[:])
		newDetRand("order b " + string(rune('a'+i))).Read(nb[:])
		h1 := orderHash(cb.PrivateKey.pub.key, na[:])
		h2 := orderHash(ca.PrivateKey.pub.key, nb[:])
		aWins := bytes.Compare(h1[:], h2[:]) > 0
		wins[aWins]++
		a, b := net.Pipe()
		sa, sb, errA, errB := handshakePair(a, b, ca, cb)
		if errA != nil || errB != nil {
			t.Fatal(errA, errB)
		}
		want := aead.ChaCha20Poly1305
		if aWins {
			want = aead.AES128GCM
		}
		if sa.Suite() != want || sb.Suite() != want {
			t.Fatalf("run %d: suite %s, want %s", i, sa.Suite(), want)
		}
		sa.Close()
		sb.Close()
	}
	if wins[true] == 0 || wins[false] == 0 {
		t.Fatalf("20 runs did not exercise both orders: %v", wins)
	}
}

// countingRand counts bytes read.
type countingRand struct {
	mu sync.Mutex
	n  int
}

func (r *countingRand) Read(p []byte) (int, error) {
	r.mu.Lock()
	r.n += len(p)
	r.mu.Unlock()
	return rand.Read(p)
}

func TestExpectedPeer(t *testing.T) {
	ca, cb := testConfig("a"), testConfig("b")
	cr := &countingRand{}
	ca.Rand = cr
	ca.ExpectedPeer = testKey("c").PeerID()
	a, b := net.Pipe()
	_, _, errA, errB := handshakePair(a, b, ca, cb)
	if !errors.Is(errA, ErrPeerIDMismatch) {
		t.Fatalf("client: %v, want ErrPeerIDMismatch", errA)
	}
	if errB == nil {
		t.Fatal("server completed")
	}
	// Only the Propose nonce and the key share's scalar were drawn, before
	// sending: no other ephemeral key was made.
	if cr.n != NonceSize+32 {
		t.Fatalf("client read %d random bytes, want %d (nonce and key share)", cr.n, NonceSize+32)
	}
	if !strings.Contains(errA.Error(), testKey("b").PeerID().String()) {
		t.Fatalf("error %q does not name the peer", errA)
	}
	ca.ExpectedPeer = testKey("b").PeerID()
	ca.Rand = nil
	sa, sb := securePair(t, transports[0], ca, cb)
	if sa.RemotePeer() != ca.ExpectedPeer {
		t.Fatal("wrong peer")
	}
	_ = sb
}

func TestSelfDial(t *testing.T) {
	a, b := net.Pipe()
	_, _, errA, errB := handshakePair(a, b, testConfig("a"), testConfig("a"))
	if !errors.Is(errA, ErrSelfDial) || !errors.Is(errB, ErrSelfDial) {
		t.Fatalf("errors %v / %v, want ErrSelfDial", errA, errB)
	}
	// A Propose reflected back to its sender.
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
	if !errors.Is(err, ErrSelfDial) {
		t.Fatalf("reflected: %v, want ErrSelfDial", err)
	}
	y.Close()
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

// rawPeer sends raw bytes as the remote side and returns the local error.
func rawPeer(t *testing.T, data []byte) error {
	t.Helper()
	a, b := net.Pipe()
	defer b.Close()
	go func() {
		b.Write(data)
		io.Copy(io.Discard, b)
	}()
	cfg := testConfig("a")
	cfg.HandshakeTimeout = time.Second
	_, err := Client(context.Background(), a, cfg)
	if err == nil {
		t.Fatal("handshake succeeded")
	}
	return err
}

func TestMalformedPropose(t *testing.T) {
	valid := (&propose{version: 1, pubKey: testKey("b").pub.key, maxFrame: 1 << 20,
		kexes: []KeyExchange{X25519}, ciphers: []aead.Suite{aead.AES128GCM}}).marshal()
	mod := func(f func(b []byte) []byte) []byte { return f(bytes.Clone(valid)) }
	cases := map[string]struct {
		data []byte
		want error
	}{
		"oversize length": {[]byte{0, 0, 0x10, 0x01}, ErrInvalidMessage},
		"huge length":     {[]byte{0xff, 0xff, 0xff, 0xff}, ErrInvalidMessage},
		"zero length":     {[]byte{0, 0, 0, 0}, ErrInvalidMessage},
		"http":            {[]byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n"), ErrInvalidMessage},
		"wrong type":      {mod(func(b []byte) []byte { b[4] = msgExchange; return b }), ErrInvalidMessage},
		"version 0":       {mod(func(b []byte) []byte { b[5], b[6] = 0, 0; return b }), ErrUnsupportedVersion},
		"key type":        {mod(func(b []byte) []byte { b[23] = 2; return b }), ErrInvalidMessage},
		"key length":      {mod(func(b []byte) []byte { b[25] = 31; return b }), ErrInvalidMessage},
		"trailing":        {mod(func(b []byte) []byte { b[3]++; return append(b, 0) }), ErrInvalidMessage},
		"no ciphers": {mod(func(b []byte) []byte {
			// drop the cipher list (count 1, one code) and fix the length.
			n := len(b)
			b = append(b[:n-4], 0, 0, 0)
			b[3] -= 1
			return b
		}), ErrInvalidMessage},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			err := rawPeer(t, tc.data)
			if !errors.Is(err, tc.want) {
				t.Fatalf("%v, want %v", err, tc.want)
			}
			if !strings.HasPrefix(err.Error(), "secio: handshake: ") {
				t.Fatalf("message %q", err)
			}
		})
	}
	// Random garbage.
	for range 50 {
		g := make([]byte, 300)
		rand.Read(g)
		g[0] = 0
		g[1] = 0
		g[2] = 0
		err := rawPeer(t, g)
		if !errors.Is(err, ErrInvalidMessage) && !errors.Is(err, ErrUnsupportedVersion) {
			t.Fatalf("garbage: %v", err)
		}
	}
}

// evilPeer runs the handshake steps by hand so that the Confirm can be
// tampered with while being correctly encrypted.
func evilPeer(t *testing.T, conn net.Conn, tamper func(hs *handshakeState, nonce *[NonceSize]byte, sig []byte) []byte) {
	t.Helper()
	hs, err := newHandshakeState(conn, testConfig("b"))
	if err != nil {
		t.Error(err)
		return
	}
	defer hs.stopWriter()
	if err := hs.establishKeys(); err != nil {
		t.Error(err)
		return
	}
	local, _ := hs.roles()
	nonce := hs.remote.nonce
	m := signedMessage(local, hs.transcript)
	sig := hs.cfg.key.Sign(m[:])
	sig = tamper(hs, &nonce, sig)
	msg := appendConfirm(nil, nonce, sig)
	hs.c.out.writeFrame(conn, msg)
	io.Copy(io.Discard, conn)
}

func TestConfirmChecks(t *testing.T) {
	cases := map[string]struct {
		tamper func(hs *handshakeState, nonce *[NonceSize]byte, sig []byte) []byte
		want   error
	}{
		"wrong nonce": {func(hs *handshakeState, n *[NonceSize]byte, sig []byte) []byte { n[3] ^= 1; return sig }, ErrNonceMismatch},
		"bad signature": {func(hs *handshakeState, n *[NonceSize]byte, sig []byte) []byte {
			sig[10] ^= 1
			return sig
		}, ErrInvalidSignature},
		"wrong role": {func(hs *handshakeState, n *[NonceSize]byte, sig []byte) []byte {
			_, remote := hs.roles()
			m := signedMessage(remote, hs.transcript)
			return hs.cfg.key.Sign(m[:])
		}, ErrInvalidSignature},
		"short signature": {func(hs *handshakeState, n *[NonceSize]byte, sig []byte) []byte { return sig[:63] }, ErrInvalidSignature},
		"no signature":    {func(hs *handshakeState, n *[NonceSize]byte, sig []byte) []byte { return nil }, ErrInvalidSignature},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			a, b := net.Pipe()
			done := make(chan struct{})
			go func() {
				defer close(done)
				evilPeer(t, b, tc.tamper)
			}()
			_, err := Client(context.Background(), a, testConfig("a"))
			b.Close()
			<-done
			if !errors.Is(err, tc.want) {
				t.Fatalf("%v, want %v", err, tc.want)
			}
		})
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
		{PrivateKey: k, KeyExchanges: []KeyExchange{3}},
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
	data, err := os.ReadFile("testdata/x25519_test.json")
	if err != nil {
		t.Fatal(err)
	}
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
	if err := json.Unmarshal(data, &f); err != nil {
		t.Fatal(err)
	}
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
			got, err := sharedSecret(X25519, sk, pub)
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

// Every Propose body has an odd length, with and without a key share, for
// every list length and for either key exchange first; the share is the
// first extension, for the most preferred key exchange, and the padding
// (when present) the last.
func TestProposeLengthOdd(t *testing.T) {
	kexLists := [][]KeyExchange{{X25519}, {P256}, {X25519, P256}, {P256, X25519}}
	padded := map[bool]int{}
	for _, share := range []bool{true, false} {
		for _, kexes := range kexLists {
			for nc := 1; nc <= 3; nc++ {
				cfg := testConfig("a")
				cfg.KeyExchanges = kexes
				cfg.Ciphers = aead.Preferred()[:nc]
				cfg.noKeyShare = !share
				hs, err := newHandshakeState(nil, cfg)
				if err != nil {
					t.Fatal(err)
				}
				if err := hs.makePropose(); err != nil {
					t.Fatal(err)
				}
				body := hs.localPropose[4:]
				if len(body)%2 != 1 {
					t.Fatalf("share %v, %v, %d ciphers: body of %d bytes", share, kexes, nc, len(body))
				}
				var p propose
				err = parsePropose(&p, body)
				if err != nil || len(p.kexes) != len(kexes) || len(p.ciphers) != nc {
					t.Fatalf("round trip: %v", err)
				}
				pad := bytes.HasSuffix(p.ext, extPadding)
				padded[pad]++
				ext := p.ext
				if pad {
					ext = ext[:len(ext)-len(extPadding)]
				}
				if !share {
					if p.shareKex != 0 || len(ext) != 0 {
						t.Fatalf("%v: unexpected extensions %x", kexes, p.ext)
					}
					continue
				}
				want := appendKeyShare(nil, kexes[0], hs.eph.PublicKey().Bytes())
				if p.shareKex != kexes[0] || !bytes.Equal(ext, want) {
					t.Fatalf("%v: extensions %x, want the share %x then padding", kexes, p.ext, want)
				}
			}
		}
	}
	if padded[true] == 0 || padded[false] == 0 {
		t.Fatalf("padding not exercised both ways: %v", padded)
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
	handshakePair(a, b, ca, testConfig("a"))
	if !strings.Contains(buf.String(), "secio handshake failed") {
		t.Fatalf("failure not logged: %s", buf.String())
	}
}
