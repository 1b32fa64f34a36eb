package secio

import (
	"bytes"
	"crypto/ecdh"
	"crypto/mlkem"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"os"
	"testing"

	"github.com/tendril-p2p/tendril/cipher/aead"
	"github.com/tendril-p2p/tendril/hash/blake3"
	"github.com/tendril-p2p/tendril/internal/testutil"
)

// handshakeVector is a complete handshake with its inputs, every message as
// sent, the intermediate values of the key schedule, and records after it.
type handshakeVector struct {
	Comment          string `json:"comment"`
	DialerSeed       string `json:"dialer_identity_seed"`
	ListenerSeed     string `json:"listener_identity_seed"`
	DialerRand       string `json:"dialer_rand"`   // nonce || [ML-KEM seed] || X25519 scalar
	ListenerRand     string `json:"listener_rand"` // X25519 scalar || [encapsulation randomness] || nonce
	KeyExchange      string `json:"key_exchange"`
	Suite            string `json:"suite"`
	DialerPeerID     string `json:"dialer_peer_id"`
	ListenerPeerID   string `json:"listener_peer_id"`
	ClientHello      string `json:"client_hello"`
	ServerHello      string `json:"server_hello"`
	ListenerAuth     string `json:"listener_auth_frame"`
	DialerAuth       string `json:"dialer_auth_frame"`
	SharedSecret     string `json:"shared_secret"`
	TranscriptSH     string `json:"transcript_server_hello"`
	TranscriptLA     string `json:"transcript_listener_auth"`
	TranscriptDA     string `json:"transcript_dialer_auth"`
	HandshakeKeyD2L  string `json:"handshake_key_dialer_to_listener"`
	HandshakeKeyL2D  string `json:"handshake_key_listener_to_dialer"`
	TrafficKeyD2L    string `json:"traffic_key_dialer_to_listener"`
	TrafficKeyL2D    string `json:"traffic_key_listener_to_dialer"`
	DialerData       string `json:"dialer_data_plaintext"`
	DialerDataFrame  string `json:"dialer_data_frame"`
	ListenerData     string `json:"listener_data_plaintext"`
	ListenerDataFrm  string `json:"listener_data_frame"`
	KeyUpdateFrame   string `json:"dialer_key_update_frame"`
	UpdatedKeyD2L    string `json:"updated_key_dialer_to_listener"`
	DataAfterUpdate  string `json:"dialer_data_frame_after_update"`
	DialerCloseFrame string `json:"dialer_close_frame"`
}

// The handshake vectors: the default hybrid exchange, the X25519 hybrid and a classical one.
var handshakeVectorFiles = []struct {
	file string
	kex  KeyExchange
}{
	{"testdata/handshake_vector_p256_hybrid.json", P256MLKEM768},
	{"testdata/handshake_vector_hybrid.json", X25519MLKEM768},
	{"testdata/handshake_vector_x25519.json", X25519},
}

func vectorInput(label string, n int) []byte {
	var out []byte
	for i := 0; len(out) < n; i++ {
		h := sha256.Sum256([]byte(label + string(rune('0'+i))))
		out = append(out, h[:]...)
	}
	return out[:n]
}

func TestHandshakeVector(t *testing.T) {
	for _, f := range handshakeVectorFiles {
		t.Run(f.kex.String(), func(t *testing.T) { testHandshakeVector(t, f.file, f.kex) })
	}
}

// runVector runs a handshake with the vector's inputs and fills the wire
// fields: the handshake messages, one data frame each way, then from the
// dialer a key update, a data frame under the next key and a close record.
func runVector(t *testing.T, v *handshakeVector, kex KeyExchange) {
	t.Helper()
	dec := func(s string) []byte { b, _ := hex.DecodeString(s); return b }
	ck, _ := UnmarshalPrivateKey(dec(v.DialerSeed))
	sk, _ := UnmarshalPrivateKey(dec(v.ListenerSeed))
	ciphers := []aead.Suite{aead.AES128GCM}
	kexes := []KeyExchange{kex}
	cc := &Config{PrivateKey: ck, Ciphers: ciphers, KeyExchanges: kexes, Rand: bytes.NewReader(dec(v.DialerRand))}
	sc := &Config{PrivateKey: sk, Ciphers: ciphers, KeyExchanges: kexes, Rand: bytes.NewReader(dec(v.ListenerRand))}
	ca, cb, rc, rs := recordedHandshake(t, cc, sc)
	defer cb.Close()
	go ca.Write([]byte(v.DialerData))
	if got, err := readN(cb, len(v.DialerData)); err != nil || string(got) != v.DialerData {
		t.Fatal(err)
	}
	go cb.Write([]byte(v.ListenerData))
	if got, err := readN(ca, len(v.ListenerData)); err != nil || string(got) != v.ListenerData {
		t.Fatal(err)
	}
	ca.out.updateAt = 1 // the next Write starts with a key update
	go func() {
		ca.Write([]byte(v.DialerData))
		ca.Close()
	}()
	if got, err := readN(cb, len(v.DialerData)); err != nil || string(got) != v.DialerData {
		t.Fatal(err)
	}
	if n, err := cb.Read(make([]byte, 1)); n != 0 || err == nil || err.Error() != "EOF" {
		t.Fatalf("after the close record: %d, %v", n, err)
	}
	w, l := rc.writes, rs.writes
	if len(w) != 6 || len(l) != 2 {
		t.Fatalf("%d dialer writes, %d listener writes", len(w), len(l))
	}
	enc := hex.EncodeToString
	shLen := 4 + int(binary.BigEndian.Uint32(l[0]))
	v.ClientHello, v.DialerAuth, v.DialerDataFrame = enc(w[0]), enc(w[1]), enc(w[2])
	v.KeyUpdateFrame, v.DataAfterUpdate, v.DialerCloseFrame = enc(w[3]), enc(w[4]), enc(w[5])
	v.ServerHello, v.ListenerAuth, v.ListenerDataFrm = enc(l[0][:shLen]), enc(l[0][shLen:]), enc(l[1])
}

func testHandshakeVector(t *testing.T, file string, kex KeyExchange) {
	var v handshakeVector
	if *update {
		randLen := NonceSize + 32
		if kex == X25519MLKEM768 || kex == P256MLKEM768 {
			randLen += 64
		}
		v = handshakeVector{
			Comment:      "generated by TestHandshakeVector; see docs/secio.md. One cipher and one key exchange on both sides.",
			DialerSeed:   hex.EncodeToString(vectorInput("dialer identity", 32)),
			ListenerSeed: hex.EncodeToString(vectorInput("listener identity", 32)),
			DialerRand:   hex.EncodeToString(vectorInput("dialer rand", randLen)),
			ListenerRand: hex.EncodeToString(vectorInput("listener rand", randLen)),
			DialerData:   "hello from the dialer",
			ListenerData: "hello from the listener",
		}
		runVector(t, &v, kex)
		deriveVector(t, &v, kex, true)
		b, _ := json.MarshalIndent(&v, "", "  ")
		if err := os.WriteFile(file, append(b, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	testutil.ReadJSON(t, file, &v)
	// 1. The implementation reproduces every byte.
	got := v
	runVector(t, &got, kex)
	for _, f := range [][3]string{
		{"client hello", got.ClientHello, v.ClientHello},
		{"server hello", got.ServerHello, v.ServerHello},
		{"listener auth", got.ListenerAuth, v.ListenerAuth},
		{"dialer auth", got.DialerAuth, v.DialerAuth},
		{"dialer data", got.DialerDataFrame, v.DialerDataFrame},
		{"listener data", got.ListenerDataFrm, v.ListenerDataFrm},
		{"key update", got.KeyUpdateFrame, v.KeyUpdateFrame},
		{"data after update", got.DataAfterUpdate, v.DataAfterUpdate},
		{"close", got.DialerCloseFrame, v.DialerCloseFrame},
	} {
		if f[1] != f[2] {
			t.Errorf("%s:\n got %s\nwant %s", f[0], f[1], f[2])
		}
	}
	// 2. The derivation written in docs/secio.md, redone here from the
	// recorded bytes and the inputs, gives the stored values, and they
	// open the recorded records.
	deriveVector(t, &v, kex, false)
}

// deriveVector recomputes the shared secret, transcript hashes and keys
// from the recorded messages and the random inputs, following
// docs/secio.md step by step, and either fills them in (fill) or checks
// them; then it opens every record and checks both signatures.
func deriveVector(t *testing.T, v *handshakeVector, kex KeyExchange, fill bool) {
	t.Helper()
	dec := func(s string) []byte {
		b, err := hex.DecodeString(s)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	ch, sh, la, da := dec(v.ClientHello), dec(v.ServerHello), dec(v.ListenerAuth), dec(v.DialerAuth)
	dr, lr := dec(v.DialerRand), dec(v.ListenerRand)
	// ClientHello: type, version, nonce, max frame, 1 kex, 1 cipher, then
	// the share's code and u16 length.
	body := ch[4:]
	shareAt := 1 + 2 + NonceSize + 4 + 2 + 2
	if KeyExchange(body[shareAt]) != kex {
		t.Fatalf("share code %d", body[shareAt])
	}
	dShare := body[shareAt+3 : shareAt+3+int(binary.BigEndian.Uint16(body[shareAt+1:]))]
	// ServerHello: type, version, nonce, max frame, kex, cipher, u16 length.
	sbody := sh[4:]
	sAt := 1 + 2 + NonceSize + 4
	suite := aead.Suite(sbody[sAt+1])
	lShare := sbody[sAt+4 : sAt+4+int(binary.BigEndian.Uint16(sbody[sAt+2:]))]
	// The shares' parts, in the layout of docs/secio.md 2.5.
	var dCurve, dKEM, lCurve, lKEM []byte
	curve := ecdh.X25519()
	switch kex {
	case X25519MLKEM768:
		dKEM, dCurve, lKEM, lCurve = dShare[:1184], dShare[1184:], lShare[:1088], lShare[1088:]
	case P256MLKEM768:
		dCurve, dKEM, lCurve, lKEM = dShare[:65], dShare[65:], lShare[:65], lShare[65:]
		curve = ecdh.P256()
	default:
		dCurve, lCurve = dShare, lShare
	}
	// The shared secret, from the dialer's random input.
	var ss []byte
	scalar := dr[NonceSize:]
	if dKEM != nil {
		dk, err := mlkem.NewDecapsulationKey768(dr[NonceSize : NonceSize+64])
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(dk.EncapsulationKey().Bytes(), dKEM) {
			t.Fatal("the ClientHello's encapsulation key is not the one from the seed")
		}
		if ss, err = dk.Decapsulate(lKEM); err != nil {
			t.Fatal(err)
		}
		scalar = dr[NonceSize+64:]
	}
	priv, err := curve.NewPrivateKey(scalar[:32])
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(priv.PublicKey().Bytes(), dCurve) {
		t.Fatal("the dialer's elliptic-curve share is not from its random input")
	}
	pub, err := curve.NewPublicKey(lCurve)
	if err != nil {
		t.Fatal(err)
	}
	ec, err := priv.ECDH(pub)
	if err != nil {
		t.Fatal(err)
	}
	secret := append(bytes.Clone(ss), ec...) // X25519MLKEM768: ML-KEM first
	if kex == P256MLKEM768 {
		secret = append(bytes.Clone(ec), ss...) // SecP256r1MLKEM768's order: ECDH first
	}
	// The listener's elliptic-curve key comes from its first 32 random bytes.
	lpriv, err := curve.NewPrivateKey(lr[:32])
	if err != nil || !bytes.Equal(lpriv.PublicKey().Bytes(), lCurve) {
		t.Fatal("the listener's elliptic-curve share is not from its random input")
	}
	// Transcript hashes and keys.
	th := func(msgs ...[]byte) []byte {
		h := blake3.NewDeriveKey("tendril 2026-12-01 secio v2 transcript")
		for _, m := range msgs {
			h.Write(m)
		}
		return h.Sum(nil)
	}
	tSH, tLA, tDA := th(ch, sh), th(ch, sh, la), th(ch, sh, la, da)
	key := func(context string, transcript []byte) []byte {
		k := make([]byte, suite.KeySize())
		blake3.DeriveKey(k, "tendril 2026-12-01 secio v2 "+context, append(bytes.Clone(transcript), secret...))
		return k
	}
	hD2L, hL2D := key("handshake key dialer-to-listener", tSH), key("handshake key listener-to-dialer", tSH)
	kD2L, kL2D := key("traffic key dialer-to-listener", tDA), key("traffic key listener-to-dialer", tDA)
	next := make([]byte, suite.KeySize())
	blake3.DeriveKey(next, "tendril 2026-12-01 secio v2 key update", kD2L)
	ck, _ := UnmarshalPrivateKey(dec(v.DialerSeed))
	sk, _ := UnmarshalPrivateKey(dec(v.ListenerSeed))
	got := map[string]string{
		"kex": kex.String(), "suite": suite.String(), "secret": hex.EncodeToString(secret),
		"tSH": hex.EncodeToString(tSH), "tLA": hex.EncodeToString(tLA), "tDA": hex.EncodeToString(tDA),
		"hD2L": hex.EncodeToString(hD2L), "hL2D": hex.EncodeToString(hL2D),
		"kD2L": hex.EncodeToString(kD2L), "kL2D": hex.EncodeToString(kL2D), "next": hex.EncodeToString(next),
		"did": ck.PeerID().String(), "lid": sk.PeerID().String(),
	}
	if fill {
		v.KeyExchange, v.Suite, v.SharedSecret = got["kex"], got["suite"], got["secret"]
		v.TranscriptSH, v.TranscriptLA, v.TranscriptDA = got["tSH"], got["tLA"], got["tDA"]
		v.HandshakeKeyD2L, v.HandshakeKeyL2D = got["hD2L"], got["hL2D"]
		v.TrafficKeyD2L, v.TrafficKeyL2D, v.UpdatedKeyD2L = got["kD2L"], got["kL2D"], got["next"]
		v.DialerPeerID, v.ListenerPeerID = got["did"], got["lid"]
	}
	want := map[string]string{
		"kex": v.KeyExchange, "suite": v.Suite, "secret": v.SharedSecret,
		"tSH": v.TranscriptSH, "tLA": v.TranscriptLA, "tDA": v.TranscriptDA,
		"hD2L": v.HandshakeKeyD2L, "hL2D": v.HandshakeKeyL2D,
		"kD2L": v.TrafficKeyD2L, "kL2D": v.TrafficKeyL2D, "next": v.UpdatedKeyD2L,
		"did": v.DialerPeerID, "lid": v.ListenerPeerID,
	}
	for k := range want {
		if got[k] != want[k] {
			t.Errorf("%s: derived %s, vector %s", k, got[k], want[k])
		}
	}
	// Open each record with its key and counter; the last plaintext byte
	// is the record type.
	open := func(key, frame []byte, ctr byte, typ byte) []byte {
		t.Helper()
		a, _ := aead.New(suite, key)
		if int(binary.BigEndian.Uint32(frame)) != len(frame)-4 {
			t.Fatal("frame length prefix wrong")
		}
		nonce := make([]byte, 12)
		nonce[11] = ctr
		pt, err := a.Open(nil, nonce, frame[4:], frame[:4])
		if err != nil {
			t.Fatalf("frame does not open: %v", err)
		}
		if pt[len(pt)-1] != typ {
			t.Fatalf("record type %d, want %d", pt[len(pt)-1], typ)
		}
		return pt[:len(pt)-1]
	}
	lauth := open(hL2D, la, 0, recordHandshake)
	dauth := open(hD2L, da, 0, recordHandshake)
	signed := func(role byte, transcript, pub []byte) []byte {
		m := append([]byte("tendril 2026-12-01 secio v2 signature\x00"), role)
		return append(append(m, transcript...), pub...)
	}
	if lauth[0] != msgListenerAuth || dauth[0] != msgDialerAuth || lauth[1] != 1 || dauth[1] != 1 {
		t.Fatal("Auth types")
	}
	if !bytes.Equal(lauth[2:34], sk.Public().Bytes()) || !bytes.Equal(dauth[2:34], ck.Public().Bytes()) {
		t.Fatal("Auth identities")
	}
	if !sk.Public().Verify(signed(roleListener, tSH, lauth[2:34]), lauth[34:]) ||
		!ck.Public().Verify(signed(roleDialer, tLA, dauth[2:34]), dauth[34:]) {
		t.Fatal("Auth signatures do not verify")
	}
	if string(open(kD2L, dec(v.DialerDataFrame), 0, recordData)) != v.DialerData ||
		string(open(kL2D, dec(v.ListenerDataFrm), 0, recordData)) != v.ListenerData {
		t.Fatal("data frames do not open to the vector's plaintext")
	}
	if len(open(kD2L, dec(v.KeyUpdateFrame), 1, recordKeyUpdate)) != 0 ||
		string(open(next, dec(v.DataAfterUpdate), 0, recordData)) != v.DialerData ||
		len(open(next, dec(v.DialerCloseFrame), 1, recordClose)) != 0 {
		t.Fatal("key update, data under the next key, close")
	}
}
