package secio

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"net"
	"os"
	"testing"
	"time"

	"github.com/tendril-p2p/tendril/cipher/aead"
	"github.com/tendril-p2p/tendril/cipher/tea"
	"github.com/tendril-p2p/tendril/internal/testutil"
)

var legacyKey = []byte("0123456789abcdef")

func legacyPair(t *testing.T, cfg *LegacyConfig) (*Conn, *Conn) {
	t.Helper()
	a, b := testutil.TCPPair(t)
	la, err := LegacyTEA(a, legacyKey, cfg)
	if err != nil {
		t.Fatal(err)
	}
	lb, err := LegacyTEA(b, legacyKey, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { la.Close(); lb.Close() })
	return la, lb
}

func TestLegacyRoundTrip(t *testing.T) {
	la, lb := legacyPair(t, &LegacyConfig{MaxFrameSize: 4096})
	if la.Secure() || !la.RemotePeer().IsZero() || la.Suite() != 0 || la.RemotePublicKey() != nil {
		t.Fatal("legacy Conn claims security or identity")
	}
	exchangeData(t, la, lb, []int{0, 1, 6, 7, 8, 9, 100, 4096, 4097, 100000})
}

type legacyVector struct {
	Comment   string `json:"comment"`
	Key       string `json:"key"`
	Plaintext string `json:"plaintext"`
	Filler    string `json:"filler"`
	Frame     string `json:"frame"`
}

const legacyVectorFile = "testdata/legacy_vector.json"

func TestLegacyVector(t *testing.T) {
	if *update {
		tc, _ := tea.NewCipher(legacyKey)
		pt := []byte("hello, legacy peer")
		body, err := tc.EncryptWithFill(nil, pt, bytes.NewReader(make([]byte, tea.FillSize)))
		if err != nil {
			t.Fatal(err)
		}
		frame := binary.BigEndian.AppendUint32(nil, uint32(len(body)))
		frame = append(frame, body...)
		v := legacyVector{
			Comment:   "TEA legacy frame: 4-byte big-endian length, then cipher/tea ciphertext (all-zero filler); see docs/secio.md",
			Key:       hex.EncodeToString(legacyKey),
			Plaintext: string(pt),
			Filler:    hex.EncodeToString(make([]byte, tea.FillSize)),
			Frame:     hex.EncodeToString(frame),
		}
		b, _ := json.MarshalIndent(v, "", "  ")
		os.WriteFile(legacyVectorFile, append(b, '\n'), 0o644)
	}
	var v legacyVector
	testutil.ReadJSON(t, legacyVectorFile, &v)
	key, _ := hex.DecodeString(v.Key)
	frame, _ := hex.DecodeString(v.Frame)
	// Known-answer check of the body against the shared TEA vectors' format:
	// the length prefix counts the ciphertext, which is
	// CiphertextLen(len(plaintext)) bytes.
	if int(binary.BigEndian.Uint32(frame)) != len(frame)-4 || len(frame)-4 != tea.CiphertextLen(len(v.Plaintext)) {
		t.Fatal("frame length prefix wrong")
	}
	tc, _ := tea.NewCipher(key)
	fill, _ := hex.DecodeString(v.Filler)
	body, _ := tc.EncryptWithFill(nil, []byte(v.Plaintext), bytes.NewReader(fill))
	if !bytes.Equal(body, frame[4:]) {
		t.Fatal("cipher/tea does not reproduce the vector body")
	}
	// A legacy Conn reads the vector frame.
	a, b := net.Pipe()
	defer a.Close()
	lb, err := LegacyTEA(b, key, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer lb.Close()
	go a.Write(frame)
	got, err := readN(lb, len(v.Plaintext))
	if err != nil || string(got) != v.Plaintext {
		t.Fatalf("read %q, %v", got, err)
	}
	// And its own frames decode with cipher/tea.
	go lb.Write([]byte(v.Plaintext))
	hdr, _ := readN(a, 4)
	n := binary.BigEndian.Uint32(hdr)
	ct, _ := readN(a, int(n))
	pt, err := tc.DecryptStrict(nil, ct)
	if err != nil || string(pt) != v.Plaintext {
		t.Fatalf("Conn frame decodes to %q, %v", pt, err)
	}
}

func TestLegacyErrors(t *testing.T) {
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	if _, err := LegacyTEA(a, legacyKey[:15], nil); !errors.Is(err, ErrInvalidKey) {
		t.Fatalf("short key: %v", err)
	}
	if _, err := LegacyTEA(a, legacyKey, &LegacyConfig{MaxFrameSize: 1}); !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("bad config: %v", err)
	}
	cases := map[string][]byte{
		"oversize":      {0x00, 0x10, 0x00, 0x20},
		"not 8-aligned": {0, 0, 0, 17},
		"too short":     {0, 0, 0, 8},
	}
	for name, data := range cases {
		x, y := net.Pipe()
		lx, _ := LegacyTEA(x, legacyKey, &LegacyConfig{MaxFrameSize: 4096})
		go func() {
			y.Write(data)
			y.Write(make([]byte, 64))
			y.Close()
		}()
		_, err := lx.Read(make([]byte, 100))
		if !errors.Is(err, ErrFrameTooLarge) && !errors.Is(err, ErrInvalidFrame) {
			t.Errorf("%s: %v", name, err)
		}
		lx.Close()
	}
}

// A secure node never speaks TEA, and the two modes fail cleanly against
// each other.
func TestModesDoNotMix(t *testing.T) {
	// A legacy peer dialling a secure node: its frame is no ClientHello.
	a, b := net.Pipe()
	lb, _ := LegacyTEA(b, legacyKey, nil)
	go func() {
		lb.Write([]byte("hello from the past"))
		io.Copy(io.Discard, lb)
	}()
	cfg := testConfig("a")
	cfg.HandshakeTimeout = time.Second
	_, err := Server(context.Background(), a, cfg)
	if !errors.Is(err, ErrInvalidMessage) {
		t.Fatalf("secure side: %v, want ErrInvalidMessage", err)
	}
	lb.Close()

	// A secure node's ClientHello reaching a legacy peer, for list lengths that
	// would make an even body.
	for _, ciphers := range [][]aead.Suite{{aead.AES128GCM}, {aead.AES128GCM, aead.AES256GCM}, nil} {
		cfg.Ciphers = ciphers
		modeMismatch(t, cfg)
	}
}

func modeMismatch(t *testing.T, cfg *Config) {
	x, y := net.Pipe()
	ly, _ := LegacyTEA(y, legacyKey, nil)
	done := make(chan error, 1)
	go func() {
		_, err := Client(context.Background(), x, cfg)
		done <- err
	}()
	_, err := ly.Read(make([]byte, 1000))
	if !errors.Is(err, ErrInvalidFrame) && !errors.Is(err, ErrFrameTooLarge) {
		t.Fatalf("legacy side: %v, want ErrInvalidFrame", err)
	}
	ly.Close()
	if err := <-done; err == nil {
		t.Fatal("secure side completed against a legacy peer")
	}
}
