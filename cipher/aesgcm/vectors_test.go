package aesgcm

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"testing"
)

// wpFile is the Wycheproof AEAD file layout (aead_test_schema_v1.json),
// only what is used.
type wpFile struct {
	TestGroups []struct {
		KeySize int `json:"keySize"`
		IvSize  int `json:"ivSize"`
		TagSize int `json:"tagSize"`
		Tests   []struct {
			TcID    int      `json:"tcId"`
			Comment string   `json:"comment"`
			Key     string   `json:"key"`
			Iv      string   `json:"iv"`
			Aad     string   `json:"aad"`
			Msg     string   `json:"msg"`
			Ct      string   `json:"ct"`
			Tag     string   `json:"tag"`
			Result  string   `json:"result"`
			Flags   []string `json:"flags"`
		} `json:"tests"`
	} `json:"testGroups"`
}

func unhex(t *testing.T, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func panics(f func()) (did bool) {
	defer func() { did = recover() != nil }()
	f()
	return false
}

func TestWycheproof(t *testing.T) {
	data, err := os.ReadFile("testdata/aes_gcm_test.json")
	if err != nil {
		t.Fatal(err)
	}
	var f wpFile
	if err := json.Unmarshal(data, &f); err != nil {
		t.Fatal(err)
	}
	forEachImpl(t, func(t *testing.T) {
		var valid, invalid, otherKey, otherNonce int
		for _, g := range f.TestGroups {
			for _, tc := range g.Tests {
				key, nonce, aad, msg := unhex(t, tc.Key), unhex(t, tc.Iv), unhex(t, tc.Aad), unhex(t, tc.Msg)
				sealed := append(unhex(t, tc.Ct), unhex(t, tc.Tag)...)
				a, err := New(key)
				if g.KeySize != 128 && g.KeySize != 256 {
					otherKey++
					if !errors.Is(err, ErrKeySize) {
						t.Errorf("tc%d: New with a %d-bit key: %v, want ErrKeySize", tc.TcID, g.KeySize, err)
					}
					continue
				}
				if err != nil {
					t.Fatalf("tc%d: New: %v", tc.TcID, err)
				}
				if g.TagSize != 128 {
					t.Fatalf("tc%d: unexpected tag size %d", tc.TcID, g.TagSize)
				}
				if g.IvSize != 96 {
					otherNonce++
					if !panics(func() { a.Seal(nil, nonce, msg, aad) }) ||
						!panics(func() { _, _ = a.Open(nil, nonce, sealed, aad) }) {
						t.Errorf("tc%d: a %d-bit nonce was accepted", tc.TcID, g.IvSize)
					}
					continue
				}
				opened, openErr := a.Open(nil, nonce, sealed, aad)
				switch tc.Result {
				case "valid":
					valid++
					if got := a.Seal(nil, nonce, msg, aad); !bytes.Equal(got, sealed) {
						t.Errorf("tc%d (%s): Seal = %x, want %x", tc.TcID, tc.Comment, got, sealed)
					}
					if openErr != nil || !bytes.Equal(opened, msg) {
						t.Errorf("tc%d (%s): Open = %x, %v; want %x", tc.TcID, tc.Comment, opened, openErr, msg)
					}
				case "invalid":
					invalid++
					if openErr == nil {
						t.Errorf("tc%d (%s, %v): Open of an invalid case succeeded", tc.TcID, tc.Comment, tc.Flags)
					}
				default:
					t.Errorf("tc%d: unexpected result %q", tc.TcID, tc.Result)
				}
			}
		}
		t.Logf("%d valid and %d invalid cases run; %d with a 192-bit key rejected, %d with another nonce size refused",
			valid, invalid, otherKey, otherNonce)
		if valid == 0 || invalid == 0 {
			t.Fatal("vector file yielded no usable cases")
		}
	})
}
