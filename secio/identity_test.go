package secio

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"io/fs"
	"log/slog"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/multiformats/go-multihash"

	"github.com/tendril-p2p/tendril/internal/testutil"
)

// testKey returns a fixed identity key derived from label.
func testKey(label string) *PrivateKey {
	seed := sha256.Sum256([]byte("secio test key " + label))
	k, err := UnmarshalPrivateKey(seed[:])
	if err != nil {
		panic(err)
	}
	return k
}

var update = flag.Bool("update", false, "rewrite generated test vectors in testdata")

type peerIDVector struct {
	Seed      string `json:"seed"`
	PublicKey string `json:"public_key"`
	PeerID    string `json:"peer_id"`
	PeerIDHex string `json:"peer_id_hex"`
}

const peerIDVectorsFile = "testdata/peer_id_vectors.json"

func makePeerIDVectors() []peerIDVector {
	var out []peerIDVector
	seeds := [][]byte{make([]byte, 32), bytes.Repeat([]byte{0xff}, 32)}
	seq := make([]byte, 32)
	for i := range seq {
		seq[i] = byte(i)
	}
	seeds = append(seeds, seq)
	for _, l := range []string{"a", "b", "c"} {
		s, _ := testKey(l).MarshalBinary()
		seeds = append(seeds, s)
	}
	for _, s := range seeds {
		k, err := UnmarshalPrivateKey(s)
		if err != nil {
			panic(err)
		}
		out = append(out, peerIDVector{
			Seed:      hex.EncodeToString(s),
			PublicKey: hex.EncodeToString(k.Public().Bytes()),
			PeerID:    k.PeerID().String(),
			PeerIDHex: hex.EncodeToString(k.PeerID().Bytes()),
		})
	}
	return out
}

func TestPeerIDVectors(t *testing.T) {
	if *update {
		b, _ := json.MarshalIndent(makePeerIDVectors(), "", "  ")
		if err := os.WriteFile(peerIDVectorsFile, append(b, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var vs []peerIDVector
	testutil.ReadJSON(t, peerIDVectorsFile, &vs)
	if len(vs) < 6 {
		t.Fatalf("only %d vectors", len(vs))
	}
	for _, v := range vs {
		seed, _ := hex.DecodeString(v.Seed)
		k, err := UnmarshalPrivateKey(seed)
		if err != nil {
			t.Fatal(err)
		}
		if got := hex.EncodeToString(k.Public().Bytes()); got != v.PublicKey {
			t.Errorf("seed %s: public key %s, want %s", v.Seed, got, v.PublicKey)
		}
		pub, _ := hex.DecodeString(v.PublicKey)
		pk, err := UnmarshalPublicKey(pub)
		if err != nil {
			t.Fatal(err)
		}
		id := PeerIDFromPublicKey(pk)
		if id.String() != v.PeerID || hex.EncodeToString(id.Bytes()) != v.PeerIDHex {
			t.Errorf("key %s: peer ID %s, want %s", v.PublicKey, id, v.PeerID)
		}
		// Independent check with go-multihash (which uses
		// lukechampine.com/blake3 for code 0x1e).
		mh, err := multihash.Sum(pub, multihash.BLAKE3, 32)
		if err != nil {
			t.Fatal(err)
		}
		if mh.B58String() != v.PeerID {
			t.Errorf("go-multihash gives %s, vector %s", mh.B58String(), v.PeerID)
		}
		parsed, err := ParsePeerID(v.PeerID)
		if err != nil || parsed != id || !parsed.Matches(pk) {
			t.Errorf("ParsePeerID(%s) = %v, %v", v.PeerID, parsed, err)
		}
	}
}

func TestPeerIDParseErrors(t *testing.T) {
	id := testKey("a").PeerID()
	good := id.Bytes()
	bad := map[string][]byte{
		"empty":      nil,
		"short":      good[:33],
		"long":       append(bytes.Clone(good), 0),
		"sha256":     append([]byte{0x12, 0x20}, good[2:]...),
		"length 31":  append([]byte{0x1e, 0x1f}, good[2:33]...),
		"wrong len":  append([]byte{0x1e, 0x21}, good[2:]...),
		"zero":       append([]byte{0x1e, 0x20}, make([]byte, 32)...),
		"identity":   append([]byte{0x00, 0x20}, good[2:]...),
		"blake3-512": append([]byte{0x1e, 0x40}, good[2:]...),
	}
	for name, b := range bad {
		if _, err := PeerIDFromBytes(b); !errors.Is(err, ErrInvalidPeerID) {
			t.Errorf("%s: PeerIDFromBytes error %v", name, err)
		}
	}
	sha, _ := multihash.Sum([]byte("x"), multihash.SHA2_256, 32)
	for _, s := range []string{"", "0OIl", sha.B58String(), strings.Repeat("z", 60), id.String()[:20]} {
		if _, err := ParsePeerID(s); !errors.Is(err, ErrInvalidPeerID) {
			t.Errorf("ParsePeerID(%q) error %v", s, err)
		}
	}
	back, err := PeerIDFromBytes(good)
	if err != nil || back != id {
		t.Fatal("round trip through bytes failed")
	}
}

func TestPeerIDZeroAndText(t *testing.T) {
	var z PeerID
	if !z.IsZero() || z.String() != "" || z.Bytes() != nil || z.Matches(testKey("a").Public()) {
		t.Fatal("zero PeerID misbehaves")
	}
	id := testKey("a").PeerID()
	if id.IsZero() || id.Matches(testKey("b").Public()) || !id.Matches(testKey("a").Public()) {
		t.Fatal("Matches wrong")
	}
	type doc struct {
		Peer PeerID `json:"peer"`
		None PeerID `json:"none"`
	}
	b, err := json.Marshal(doc{Peer: id})
	if err != nil {
		t.Fatal(err)
	}
	var back doc
	if err := json.Unmarshal(b, &back); err != nil || back.Peer != id || !back.None.IsZero() {
		t.Fatalf("JSON round trip: %s -> %+v, %v", b, back, err)
	}
	m := map[PeerID]int{id: 1}
	if m[testKey("a").Public().PeerID()] != 1 {
		t.Fatal("PeerID not usable as a map key")
	}
	if err := back.Peer.UnmarshalText([]byte("not base58 0")); err == nil {
		t.Fatal("UnmarshalText accepted garbage")
	}
}

func TestKeyMarshal(t *testing.T) {
	k, err := GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	b, _ := k.MarshalBinary()
	k2, err := UnmarshalPrivateKey(b)
	if err != nil || !k2.Equal(k) || !k2.Public().Equal(k.Public()) {
		t.Fatal("binary round trip failed")
	}
	if _, err := UnmarshalPrivateKey(b[:31]); !errors.Is(err, ErrInvalidKey) {
		t.Fatalf("short key: %v", err)
	}
	p, err := k.MarshalPEM()
	if err != nil || !bytes.HasPrefix(p, []byte("-----BEGIN PRIVATE KEY-----")) {
		t.Fatalf("PEM: %s %v", p, err)
	}
	k3, err := ParsePrivateKeyPEM(p)
	if err != nil || !k3.Equal(k) {
		t.Fatalf("PEM round trip: %v", err)
	}
	for _, bad := range []string{"", "garbage", strings.Replace(string(p), "PRIVATE KEY", "PUBLIC KEY", 2),
		"-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n"} {
		if _, err := ParsePrivateKeyPEM([]byte(bad)); !errors.Is(err, ErrInvalidKey) {
			t.Errorf("ParsePrivateKeyPEM(%q): %v", bad, err)
		}
	}
	msg := []byte("message")
	sig := k.Sign(msg)
	if !k.Public().Verify(msg, sig) || k.Public().Verify([]byte("other"), sig) || k.Public().Verify(msg, sig[:63]) {
		t.Fatal("Sign/Verify wrong")
	}
	pub, err := UnmarshalPublicKey(k.Public().Bytes())
	if err != nil || !pub.Equal(k.Public()) || pub.PeerID() != k.PeerID() {
		t.Fatal("public key round trip failed")
	}
	if _, err := UnmarshalPublicKey(make([]byte, 33)); !errors.Is(err, ErrInvalidKey) {
		t.Fatal("UnmarshalPublicKey accepted 33 bytes")
	}
}

func TestKeyFiles(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "node.key")
	k, created, err := LoadOrCreateKeyFile(path)
	if err != nil || !created {
		t.Fatalf("create: %v %v", created, err)
	}
	st, _ := os.Stat(path)
	if st.Mode().Perm() != 0o600 {
		t.Fatalf("mode %v", st.Mode().Perm())
	}
	k2, created, err := LoadOrCreateKeyFile(path)
	if err != nil || created || !k2.Equal(k) {
		t.Fatalf("load: %v %v", created, err)
	}
	other := testKey("x")
	if err := SaveKeyFile(path, other, false); !errors.Is(err, fs.ErrExist) {
		t.Fatalf("SaveKeyFile without overwrite: %v", err)
	}
	if err := SaveKeyFile(path, other, true); err != nil {
		t.Fatal(err)
	}
	k3, _, err := LoadOrCreateKeyFile(path)
	if err != nil || !k3.Equal(other) {
		t.Fatalf("after overwrite: %v", err)
	}
	st, _ = os.Stat(path)
	if st.Mode().Perm() != 0o600 {
		t.Fatalf("mode after overwrite %v", st.Mode().Perm())
	}
	os.Chmod(path, 0o644)
	if _, _, err := LoadOrCreateKeyFile(path); err == nil {
		t.Fatal("loaded a world-readable key file")
	}
	bad := filepath.Join(dir, "bad.key")
	os.WriteFile(bad, []byte("not a key"), 0o600)
	if _, _, err := LoadOrCreateKeyFile(bad); !errors.Is(err, ErrInvalidKey) {
		t.Fatalf("bad file: %v", err)
	}
}

// Wycheproof Ed25519 verification vectors (testdata/ed25519_test.json).
func TestWycheproofEd25519(t *testing.T) {
	var f struct {
		TestGroups []struct {
			PublicKey struct {
				PK string `json:"pk"`
			} `json:"publicKey"`
			Tests []struct {
				TcID   int    `json:"tcId"`
				Msg    string `json:"msg"`
				Sig    string `json:"sig"`
				Result string `json:"result"`
			} `json:"tests"`
		} `json:"testGroups"`
	}
	testutil.ReadJSON(t, "testdata/ed25519_test.json", &f)
	n := 0
	for _, g := range f.TestGroups {
		pkb, _ := hex.DecodeString(g.PublicKey.PK)
		pk, err := UnmarshalPublicKey(pkb)
		if err != nil {
			t.Fatal(err)
		}
		for _, tc := range g.Tests {
			msg, _ := hex.DecodeString(tc.Msg)
			sig, _ := hex.DecodeString(tc.Sig)
			got := pk.Verify(msg, sig)
			if want := tc.Result == "valid"; got != want {
				t.Errorf("tcId %d: Verify = %v, want %v (%s)", tc.TcID, got, want, tc.Result)
			}
			n++
		}
	}
	if n != 151 {
		t.Fatalf("ran %d vectors, want 151", n)
	}
}

func TestPeerIDStringShape(t *testing.T) {
	for range 200 {
		k, _ := GenerateKey()
		s := k.PeerID().String()
		if len(s) != 46 || (!strings.HasPrefix(s, "gV") && !strings.HasPrefix(s, "gW")) {
			t.Fatalf("peer ID %q", s)
		}
	}
}

// TestPeerIDLogValue: slog prints a peer ID as its string with any handler.
func TestPeerIDLogValue(t *testing.T) {
	k, err := GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	slog.New(slog.NewJSONHandler(&buf, nil)).Info("x", "peer", k.PeerID())
	if want := `"peer":"` + k.PeerID().String() + `"`; !strings.Contains(buf.String(), want) {
		t.Errorf("logged %s, want it to contain %s", buf.String(), want)
	}
}

// TestSmallOrderKeys recomputes the points of smallOrderKeys on the Ed25519
// curve (math/big, affine coordinates): each listed encoding, with either
// sign bit, that decodes to a point has order dividing 8, together they
// reach all eight points of small order, and smallOrder refuses every
// listed encoding and no real key.
func TestSmallOrderKeys(t *testing.T) {
	p := new(big.Int).Sub(new(big.Int).Lsh(big.NewInt(1), 255), big.NewInt(19))
	mod := func(x *big.Int) *big.Int { return x.Mod(x, p) }
	inv := func(x *big.Int) *big.Int { return new(big.Int).ModInverse(x, p) }
	mul := func(a, b *big.Int) *big.Int { return mod(new(big.Int).Mul(a, b)) }
	// d = -121665 / 121666
	d := mul(big.NewInt(-121665+0), inv(big.NewInt(121666)))
	d = mod(d)
	sqrtM1 := new(big.Int).Exp(big.NewInt(2), new(big.Int).Div(new(big.Int).Sub(p, big.NewInt(1)), big.NewInt(4)), p)
	type point struct{ x, y *big.Int }
	add := func(a, b point) point {
		t := mul(mul(d, mul(a.x, b.x)), mul(a.y, b.y))
		x := mul(mod(new(big.Int).Add(mul(a.x, b.y), mul(a.y, b.x))), inv(mod(new(big.Int).Add(big.NewInt(1), t))))
		y := mul(mod(new(big.Int).Add(mul(a.y, b.y), mul(a.x, b.x))), inv(mod(new(big.Int).Sub(big.NewInt(1), t))))
		return point{x, y}
	}
	decode := func(enc [32]byte) (point, bool) {
		sign := enc[31] >> 7
		enc[31] &= 0x7f
		le := make([]byte, 32)
		for i := range le {
			le[i] = enc[31-i]
		}
		y := mod(new(big.Int).SetBytes(le))
		y2 := mul(y, y)
		u := mod(new(big.Int).Sub(y2, big.NewInt(1)))
		v := mod(new(big.Int).Add(mul(d, y2), big.NewInt(1)))
		x2 := mul(u, inv(v))
		x := new(big.Int).Exp(x2, new(big.Int).Div(new(big.Int).Add(p, big.NewInt(3)), big.NewInt(8)), p)
		if mul(x, x).Cmp(x2) != 0 {
			x = mul(x, sqrtM1)
		}
		if mul(x, x).Cmp(x2) != 0 {
			return point{}, false
		}
		if x.Sign() == 0 && sign == 1 {
			return point{x, y}, true // "negative zero": the same point
		}
		if byte(x.Bit(0)) != sign {
			x = mod(new(big.Int).Sub(p, x))
		}
		return point{x, y}, true
	}
	seen := map[string]bool{}
	for i, enc := range smallOrderKeys {
		for _, sign := range []byte{0, 0x80} {
			e := enc
			e[31] |= sign
			if !smallOrder(e[:]) {
				t.Fatalf("key %d (sign %x) not refused", i, sign)
			}
			pt, ok := decode(e)
			if !ok {
				t.Fatalf("key %d (sign %x) is not on the curve", i, sign)
			}
			q := pt
			for range 3 {
				q = add(q, q)
			}
			if q.x.Sign() != 0 || q.y.Cmp(big.NewInt(1)) != 0 {
				t.Fatalf("key %d (sign %x): 8P is not the identity", i, sign)
			}
			seen[pt.x.String()+","+pt.y.String()] = true
		}
	}
	if len(seen) != 8 {
		t.Fatalf("the list reaches %d points of small order, want 8", len(seen))
	}
	for _, l := range []string{"a", "b", "c", "small"} {
		if smallOrder(testKey(l).pub.key) {
			t.Fatalf("a real key (%s) refused", l)
		}
	}
}

// TestPeerIDCompare: Compare is the order of the binary forms, the same from both ends.
func TestPeerIDCompare(t *testing.T) {
	ka, err := GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	kb, err := GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	a, b := ka.PeerID(), kb.PeerID()
	if a.Compare(a) != 0 || a.Compare(b) != -b.Compare(a) || a.Compare(b) == 0 {
		t.Fatalf("Compare: a.a %d a.b %d b.a %d", a.Compare(a), a.Compare(b), b.Compare(a))
	}
	if want := bytes.Compare(a.Bytes(), b.Bytes()); a.Compare(b) != want {
		t.Fatalf("Compare %d, bytes.Compare %d", a.Compare(b), want)
	}
}

// TestKeyFileMessages: a user with a broken key file is told which file, what is wrong and what
// to do, once, without the ASN.1 parser's internals or a repeated "secio:" prefix.
func TestKeyFileMessages(t *testing.T) {
	dir := t.TempDir()
	good, err := testKey("m").MarshalPEM()
	if err != nil {
		t.Fatal(err)
	}
	mangled := strings.Replace(string(good), "\n", "\nAAAA", 1)
	cases := []struct {
		name, data string
		mode       os.FileMode
		sentinel   error
		want       string
	}{
		{"empty.key", "", 0o600, ErrInvalidKey, "no PEM block"},
		{"mangled.key", mangled, 0o600, ErrInvalidKey, "not a valid PKCS #8 private key"},
		{"open.key", string(good), 0o644, ErrKeyFilePermissions, "chmod 600"},
		{"missing.key", "", 0, fs.ErrNotExist, "does not exist"},
	}
	for _, c := range cases {
		path := filepath.Join(dir, c.name)
		if c.mode != 0 {
			if err := os.WriteFile(path, []byte(c.data), c.mode); err != nil {
				t.Fatal(err)
			}
			os.Chmod(path, c.mode) // umask may have narrowed it
		}
		_, err := LoadKeyFile(path)
		if !errors.Is(err, c.sentinel) {
			t.Errorf("%s: %v, want %v", c.name, err, c.sentinel)
			continue
		}
		msg := err.Error()
		if !strings.Contains(msg, c.want) || !strings.HasPrefix(msg, "secio: key file "+path+": ") ||
			strings.Count(msg, "secio:") != 1 || strings.Contains(msg, "asn1") || strings.Contains(msg, "x509") {
			t.Errorf("%s: message %q", c.name, msg)
		}
	}
	// LoadOrCreateKeyFile says the same.
	if _, _, err := LoadOrCreateKeyFile(filepath.Join(dir, "open.key")); !errors.Is(err, ErrKeyFilePermissions) {
		t.Errorf("LoadOrCreateKeyFile of a 0644 key: %v", err)
	}
}
