package aead_test

import (
	"fmt"

	"github.com/tendril-p2p/tendril/cipher/aead"
)

func ExampleParseSuite() {
	s, err := aead.ParseSuite("CHACHA20-POLY1305")
	if err != nil {
		panic(err)
	}
	fmt.Println(s, s.KeySize(), s.NonceSize(), s.Overhead())
	// Output: CHACHA20-POLY1305 32 12 16
}

func ExampleNew() {
	key := make([]byte, aead.AES128GCM.KeySize()) // use a derived secret key
	a, err := aead.New(aead.AES128GCM, key)
	if err != nil {
		panic(err)
	}
	nonce := make([]byte, a.NonceSize()) // a counter, never reused with this key
	sealed := a.Seal(nil, nonce, []byte("hello"), nil)
	opened, err := a.Open(nil, nonce, sealed, nil)
	fmt.Println(len(sealed), string(opened), err)
	// Output: 21 hello <nil>
}

func ExamplePreferred() {
	// The first suite depends on the CPU; all three are always offered.
	fmt.Println(len(aead.Preferred()))
	// Output: 3
}
