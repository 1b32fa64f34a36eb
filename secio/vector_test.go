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

// handshakeVector is a complete version-3 handshake with its inputs, every
// message as sent, the intermediate values of the key schedule, and records
// after it: one data record each way, then from the dialer the same data
// record until the traffic key has sealed keyUpdateMinRecords records (the
// vector keeps the first and the last), a key update, a data record under
// the next key and a close record.
type handshakeVector struct {
	Comment            string `json:"comment"`
	DialerSeed         string `json:"dialer_identity_seed"`
	ListenerSeed       string `json:"listener_identity_seed"`
	DialerRand         string `json:"dialer_rand"`   // nonce || [ML-KEM seed] || X25519 scalar
	ListenerRand       string `json:"listener_rand"` // X25519 scalar || [encapsulation randomness] || nonce
	KeyExchange        string `json:"key_exchange"`
	Suite              string `json:"suite"`
	DialerPeerID       string `json:"dialer_peer_id"`
	ListenerPeerID     string `json:"listener_peer_id"`
	ClientHello        string `json:"client_hello"`
	ServerHello        string `json:"server_hello"`
	ListenerAuth       string `json:"listener_auth_frame"`
	DialerAuth         string `json:"dialer_auth_frame"`
	SharedSecret       string `json:"shared_secret"`
	TranscriptSH       string `json:"transcript_server_hello"`
	TranscriptLA       string `json:"transcript_listener_auth"`
	TranscriptDA       string `json:"transcript_dialer_auth"`
	HandshakeSecretD2L string `json:"handshake_secret_dialer_to_listener"`
	HandshakeKeyD2L    string `json:"handshake_key_dialer_to_listener"`
	HandshakeIVD2L     string `json:"handshake_iv_dialer_to_listener"`
	HandshakeSecretL2D string `json:"handshake_secret_listener_to_dialer"`
	HandshakeKeyL2D    string `json:"handshake_key_listener_to_dialer"`
	HandshakeIVL2D     string `json:"handshake_iv_listener_to_dialer"`
	TrafficSecretD2L   string `json:"traffic_secret_dialer_to_listener"`
	TrafficKeyD2L      string `json:"traffic_key_dialer_to_listener"`
	TrafficIVD2L       string `json:"traffic_iv_dialer_to_listener"`
	TrafficSecretL2D   string `json:"traffic_secret_listener_to_dialer"`
	TrafficKeyL2D      string `json:"traffic_key_listener_to_dialer"`
	TrafficIVL2D       string `json:"traffic_iv_listener_to_dialer"`
	DialerData         string `json:"dialer_data_plaintext"`
	DialerDataFrame    string `json:"dialer_data_frame"`      // sequence number 0
	DialerDataLast     string `json:"dialer_data_frame_last"` // keyUpdateMinRecords - 1
	ListenerData       string `json:"listener_data_plaintext"`
	ListenerDataFrm    string `json:"listener_data_frame"`
	KeyUpdateFrame     string `json:"dialer_key_update_frame"` // keyUpdateMinRecords
	UpdatedSecretD2L   string `json:"updated_secret_dialer_to_listener"`
	UpdatedKeyD2L      string `json:"updated_key_dialer_to_listener"`
	UpdatedIVD2L       string `json:"updated_iv_dialer_to_listener"`
	DataAfterUpdate    string `json:"dialer_data_frame_after_update"`
	DialerCloseFrame   string `json:"dialer_close_frame"`
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
// dialer data frames up to the key update, a data frame under the next key
// and a close record.
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
	go func() {
		for range keyUpdateMinRecords - 1 {
			ca.Write([]byte(v.DialerData))
		}
	}()
	if _, err := readN(cb, (keyUpdateMinRecords-1)*len(v.DialerData)); err != nil {
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
	if len(w) != keyUpdateMinRecords+5 || len(l) != 2 {
		t.Fatalf("%d dialer writes, %d listener writes", len(w), len(l))
	}
	enc := hex.EncodeToString
	shLen := 4 + int(binary.BigEndian.Uint32(l[0]))
	last := 2 + keyUpdateMinRecords // the key update
	v.ClientHello, v.DialerAuth, v.DialerDataFrame, v.DialerDataLast = enc(w[0]), enc(w[1]), enc(w[2]), enc(w[last-1])
	v.KeyUpdateFrame, v.DataAfterUpdate, v.DialerCloseFrame = enc(w[last]), enc(w[last+1]), enc(w[last+2])
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
		{"dialer data, last before the update", got.DialerDataLast, v.DialerDataLast},
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

// vectorHex decodes a vector's hex field, failing the test on bad input.
func vectorHex(t *testing.T, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// vectorSharedSecret recomputes a vector's shared secret from its recorded
// hellos and the dialer's random input (docs/secio.md 2.5), checks that both
// shares come from the random inputs, and returns the secret and the cipher
// the ServerHello chose. The hello layout is the same in versions 2 and 3.
func vectorSharedSecret(t *testing.T, kex KeyExchange, ch, sh, dr, lr []byte) ([]byte, aead.Suite) {
	t.Helper()
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
	return secret, suite
}

// vectorTranscripts returns T_SH, T_LA and T_DA for a protocol version's
// transcript context.
func vectorTranscripts(context string, ch, sh, la, da []byte) (tSH, tLA, tDA []byte) {
	th := func(msgs ...[]byte) []byte {
		h := blake3.NewDeriveKey(context)
		for _, m := range msgs {
			h.Write(m)
		}
		return h.Sum(nil)
	}
	return th(ch, sh), th(ch, sh, la), th(ch, sh, la, da)
}

// vectorOpen opens a recorded frame with key and nonce and checks its length
// prefix and record type; it returns the content.
func vectorOpen(t *testing.T, suite aead.Suite, key, nonce, frame []byte, typ byte) []byte {
	t.Helper()
	a, _ := aead.New(suite, key)
	if int(binary.BigEndian.Uint32(frame)) != len(frame)-4 {
		t.Fatal("frame length prefix wrong")
	}
	pt, err := a.Open(nil, nonce, frame[4:], frame[:4])
	if err != nil {
		t.Fatalf("frame does not open: %v", err)
	}
	if pt[len(pt)-1] != typ {
		t.Fatalf("record type %d, want %d", pt[len(pt)-1], typ)
	}
	return pt[:len(pt)-1]
}

// vectorAuths checks the decrypted Auth messages: types, identities, and the
// signatures over prefix || role || transcript || identity key.
func vectorAuths(t *testing.T, prefix string, lauth, dauth, tSH, tLA []byte, sk, ck *PrivateKey) {
	t.Helper()
	signed := func(role byte, transcript, pub []byte) []byte {
		m := append([]byte(prefix), role)
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
}

// deriveVector recomputes the shared secret, transcript hashes, secrets,
// keys and IVs from the recorded messages and the random inputs, following
// docs/secio.md step by step, and either fills them in (fill) or checks
// them; then it opens every record with the nonce the document gives it
// and checks both signatures.
func deriveVector(t *testing.T, v *handshakeVector, kex KeyExchange, fill bool) {
	t.Helper()
	dec := func(s string) []byte { return vectorHex(t, s) }
	ch, sh, la, da := dec(v.ClientHello), dec(v.ServerHello), dec(v.ListenerAuth), dec(v.DialerAuth)
	secret, suite := vectorSharedSecret(t, kex, ch, sh, dec(v.DialerRand), dec(v.ListenerRand))
	const prefix = "tendril 2026-12-01 secio v3 "
	tSH, tLA, tDA := vectorTranscripts(prefix+"transcript", ch, sh, la, da)
	// DK(context, material), n bytes.
	dk := func(context string, material []byte, n int) []byte {
		out := make([]byte, n)
		blake3.DeriveKey(out, prefix+context, material)
		return out
	}
	// A direction's secret from a transcript hash and the shared secret;
	// a record key and IV from a secret.
	sec := func(context string, transcript []byte) []byte {
		return dk(context, append(bytes.Clone(transcript), secret...), 32)
	}
	key := func(s []byte) []byte { return dk("record key", s, suite.KeySize()) }
	iv := func(s []byte) []byte { return dk("record iv", s, 12) }
	hsD2L, hsL2D := sec("handshake secret dialer-to-listener", tSH), sec("handshake secret listener-to-dialer", tSH)
	tsD2L, tsL2D := sec("traffic secret dialer-to-listener", tDA), sec("traffic secret listener-to-dialer", tDA)
	next := dk("traffic secret update", tsD2L, 32)
	ck, _ := UnmarshalPrivateKey(dec(v.DialerSeed))
	sk, _ := UnmarshalPrivateKey(dec(v.ListenerSeed))
	enc := hex.EncodeToString
	fields := []struct {
		name string
		got  string
		v    *string
	}{
		{"key exchange", kex.String(), &v.KeyExchange},
		{"suite", suite.String(), &v.Suite},
		{"shared secret", enc(secret), &v.SharedSecret},
		{"T_SH", enc(tSH), &v.TranscriptSH},
		{"T_LA", enc(tLA), &v.TranscriptLA},
		{"T_DA", enc(tDA), &v.TranscriptDA},
		{"handshake secret d->l", enc(hsD2L), &v.HandshakeSecretD2L},
		{"handshake key d->l", enc(key(hsD2L)), &v.HandshakeKeyD2L},
		{"handshake IV d->l", enc(iv(hsD2L)), &v.HandshakeIVD2L},
		{"handshake secret l->d", enc(hsL2D), &v.HandshakeSecretL2D},
		{"handshake key l->d", enc(key(hsL2D)), &v.HandshakeKeyL2D},
		{"handshake IV l->d", enc(iv(hsL2D)), &v.HandshakeIVL2D},
		{"traffic secret d->l", enc(tsD2L), &v.TrafficSecretD2L},
		{"traffic key d->l", enc(key(tsD2L)), &v.TrafficKeyD2L},
		{"traffic IV d->l", enc(iv(tsD2L)), &v.TrafficIVD2L},
		{"traffic secret l->d", enc(tsL2D), &v.TrafficSecretL2D},
		{"traffic key l->d", enc(key(tsL2D)), &v.TrafficKeyL2D},
		{"traffic IV l->d", enc(iv(tsL2D)), &v.TrafficIVL2D},
		{"updated secret d->l", enc(next), &v.UpdatedSecretD2L},
		{"updated key d->l", enc(key(next)), &v.UpdatedKeyD2L},
		{"updated IV d->l", enc(iv(next)), &v.UpdatedIVD2L},
		{"dialer peer ID", ck.PeerID().String(), &v.DialerPeerID},
		{"listener peer ID", sk.PeerID().String(), &v.ListenerPeerID},
	}
	for _, f := range fields {
		if fill {
			*f.v = f.got
		} else if f.got != *f.v {
			t.Errorf("%s: derived %s, vector %s", f.name, f.got, *f.v)
		}
	}
	// Each record opens with its key and the nonce IV XOR sequence number;
	// the last plaintext byte is the record type.
	open := func(s, frame []byte, seq uint64, typ byte) []byte {
		t.Helper()
		nonce := iv(s)
		for i := range 8 {
			nonce[4+i] ^= byte(seq >> (56 - 8*i))
		}
		return vectorOpen(t, suite, key(s), nonce, frame, typ)
	}
	lauth := open(hsL2D, la, 0, recordHandshake)
	dauth := open(hsD2L, da, 0, recordHandshake)
	vectorAuths(t, prefix+"signature\x00", lauth, dauth, tSH, tLA, sk, ck)
	if string(open(tsD2L, dec(v.DialerDataFrame), 0, recordData)) != v.DialerData ||
		string(open(tsD2L, dec(v.DialerDataLast), keyUpdateMinRecords-1, recordData)) != v.DialerData ||
		string(open(tsL2D, dec(v.ListenerDataFrm), 0, recordData)) != v.ListenerData {
		t.Fatal("data frames do not open to the vector's plaintext")
	}
	if len(open(tsD2L, dec(v.KeyUpdateFrame), keyUpdateMinRecords, recordKeyUpdate)) != 0 ||
		string(open(next, dec(v.DataAfterUpdate), 0, recordData)) != v.DialerData ||
		len(open(next, dec(v.DialerCloseFrame), 1, recordClose)) != 0 {
		t.Fatal("key update, data under the next key, close")
	}
}

// handshakeVectorV2 is a version-2 handshake vector, kept as a record of
// that version (testdata/v2, docs/secio.md section 5.2): the code no longer
// speaks it, but TestHandshakeVectorV2 still checks it against the
// version-2 key schedule written out below.
type handshakeVectorV2 struct {
	DialerSeed       string `json:"dialer_identity_seed"`
	ListenerSeed     string `json:"listener_identity_seed"`
	DialerRand       string `json:"dialer_rand"`
	ListenerRand     string `json:"listener_rand"`
	KeyExchange      string `json:"key_exchange"`
	Suite            string `json:"suite"`
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

// TestHandshakeVectorV2 checks the version-2 vectors, kept in testdata/v2 as
// a record of that version, against the version-2 key schedule: keys straight
// from the transcript and the shared secret, the next key from the key
// itself, the bare record counter as the nonce.
func TestHandshakeVectorV2(t *testing.T) {
	for _, f := range []struct {
		file string
		kex  KeyExchange
	}{
		{"testdata/v2/handshake_vector_p256_hybrid.json", P256MLKEM768},
		{"testdata/v2/handshake_vector_hybrid.json", X25519MLKEM768},
		{"testdata/v2/handshake_vector_x25519.json", X25519},
	} {
		t.Run(f.kex.String(), func(t *testing.T) {
			var v handshakeVectorV2
			testutil.ReadJSON(t, f.file, &v)
			dec := func(s string) []byte { return vectorHex(t, s) }
			ch, sh, la, da := dec(v.ClientHello), dec(v.ServerHello), dec(v.ListenerAuth), dec(v.DialerAuth)
			secret, suite := vectorSharedSecret(t, f.kex, ch, sh, dec(v.DialerRand), dec(v.ListenerRand))
			const prefix = "tendril 2026-12-01 secio v2 "
			tSH, tLA, tDA := vectorTranscripts(prefix+"transcript", ch, sh, la, da)
			key := func(context string, transcript []byte) []byte {
				k := make([]byte, suite.KeySize())
				blake3.DeriveKey(k, prefix+context, append(bytes.Clone(transcript), secret...))
				return k
			}
			hD2L, hL2D := key("handshake key dialer-to-listener", tSH), key("handshake key listener-to-dialer", tSH)
			kD2L, kL2D := key("traffic key dialer-to-listener", tDA), key("traffic key listener-to-dialer", tDA)
			next := make([]byte, suite.KeySize())
			blake3.DeriveKey(next, prefix+"key update", kD2L)
			enc := hex.EncodeToString
			for _, c := range [][3]string{
				{"suite", suite.String(), v.Suite},
				{"shared secret", enc(secret), v.SharedSecret},
				{"T_SH", enc(tSH), v.TranscriptSH},
				{"T_LA", enc(tLA), v.TranscriptLA},
				{"T_DA", enc(tDA), v.TranscriptDA},
				{"handshake key d->l", enc(hD2L), v.HandshakeKeyD2L},
				{"handshake key l->d", enc(hL2D), v.HandshakeKeyL2D},
				{"traffic key d->l", enc(kD2L), v.TrafficKeyD2L},
				{"traffic key l->d", enc(kL2D), v.TrafficKeyL2D},
				{"updated key d->l", enc(next), v.UpdatedKeyD2L},
			} {
				if c[1] != c[2] {
					t.Errorf("%s: derived %s, vector %s", c[0], c[1], c[2])
				}
			}
			open := func(key, frame []byte, ctr byte, typ byte) []byte {
				t.Helper()
				nonce := make([]byte, 12)
				nonce[11] = ctr
				return vectorOpen(t, suite, key, nonce, frame, typ)
			}
			ck, _ := UnmarshalPrivateKey(dec(v.DialerSeed))
			sk, _ := UnmarshalPrivateKey(dec(v.ListenerSeed))
			vectorAuths(t, prefix+"signature\x00", open(hL2D, la, 0, recordHandshake), open(hD2L, da, 0, recordHandshake), tSH, tLA, sk, ck)
			if string(open(kD2L, dec(v.DialerDataFrame), 0, recordData)) != v.DialerData ||
				string(open(kL2D, dec(v.ListenerDataFrm), 0, recordData)) != v.ListenerData ||
				len(open(kD2L, dec(v.KeyUpdateFrame), 1, recordKeyUpdate)) != 0 ||
				string(open(next, dec(v.DataAfterUpdate), 0, recordData)) != v.DialerData ||
				len(open(next, dec(v.DialerCloseFrame), 1, recordClose)) != 0 {
				t.Fatal("the records do not open to the vector's plaintexts")
			}
		})
	}
}
