package aesgcm

import (
	"bytes"
	"errors"
	"testing"

	"github.com/tendril-p2p/tendril/internal/testutil"
)

func panics(f func()) (did bool) {
	defer func() { did = recover() != nil }()
	f()
	return false
}

func TestWycheproof(t *testing.T) {
	var f testutil.WycheproofAEAD
	testutil.ReadJSON(t, "testdata/aes_gcm_test.json", &f)
	forEachImpl(t, func(t *testing.T) {
		var valid, invalid, otherKey, otherNonce int
		for _, g := range f.TestGroups {
			for _, tc := range g.Tests {
				key, nonce, aad, msg := testutil.Unhex(t, tc.Key), testutil.Unhex(t, tc.Iv), testutil.Unhex(t, tc.Aad), testutil.Unhex(t, tc.Msg)
				sealed := append(testutil.Unhex(t, tc.Ct), testutil.Unhex(t, tc.Tag)...)
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
