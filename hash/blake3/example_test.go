package blake3_test

import (
	"fmt"
	"io"

	"github.com/tendril-p2p/tendril/hash/blake3"
)

func ExampleSum256() {
	fmt.Printf("%x\n", blake3.Sum256([]byte("abc")))
	// Output: 6437b3ac38465133ffb63b75273a8db548c558465d79db03fd359c6cd5bd9d85
}

func ExampleDeriveKey() {
	key := make([]byte, 32)
	blake3.DeriveKey(key, "tendril example 2026-11-30 derive key", []byte("input key material"))
	fmt.Println(len(key))
	// Output: 32
}

func ExampleHasher_XOF() {
	h := blake3.New()
	h.Write([]byte("abc"))
	r := h.XOF()
	r.Seek(16, io.SeekStart)
	out := make([]byte, 16)
	r.Read(out)
	fmt.Printf("%x\n", out)
	// Output: 48c558465d79db03fd359c6cd5bd9d85
}

func ExampleSum256Parallel() {
	data := make([]byte, 4<<20)
	fmt.Println(blake3.Sum256Parallel(data) == blake3.Sum256(data))
	// Output: true
}

func ExampleHasher_MarshalBinary() {
	h := blake3.New()
	h.Write([]byte("ab"))
	state, _ := h.MarshalBinary()

	resumed := blake3.New()
	if err := resumed.UnmarshalBinary(state); err != nil {
		panic(err)
	}
	resumed.Write([]byte("c"))
	fmt.Printf("%x\n", resumed.Sum(nil))
	// Output: 6437b3ac38465133ffb63b75273a8db548c558465d79db03fd359c6cd5bd9d85
}
