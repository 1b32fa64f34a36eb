package aesgcm_test

import (
	"fmt"

	"github.com/tendril-p2p/tendril/cipher/aesgcm"
)

// Seal and Open a message in place: the ciphertext and tag overwrite the
// plaintext's buffer, which needs room for the 16-byte tag.
func Example() {
	key := make([]byte, 16) // AES-128; use a 32-byte key for AES-256
	a, err := aesgcm.New(key)
	if err != nil {
		panic(err)
	}
	nonce := make([]byte, aesgcm.NonceSize) // never reuse a nonce with the same key
	header := []byte("frame 1")             // authenticated, not encrypted

	buf := make([]byte, 0, 64)
	buf = append(buf, "hello, peer"...)
	sealed := a.Seal(buf[:0], nonce, buf, header)
	fmt.Println(len(sealed) - a.Overhead())

	opened, err := a.Open(sealed[:0], nonce, sealed, header)
	fmt.Printf("%s %v\n", opened, err)

	sealed[0] ^= 1
	_, err = a.Open(nil, nonce, sealed, header)
	fmt.Println(err != nil)
	// Output:
	// 11
	// hello, peer <nil>
	// true
}
