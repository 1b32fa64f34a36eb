package tea_test

import (
	"bytes"
	"fmt"

	"github.com/tendril-p2p/tendril/cipher/tea"
)

func Example() {
	c, err := tea.NewCipher([]byte("0123456789ABCDEF"))
	if err != nil {
		panic(err)
	}
	ct := c.Encrypt(nil, []byte("hello, QQ"))
	fmt.Println(len(ct) == tea.CiphertextLen(9))
	pt, err := c.Decrypt(nil, ct)
	fmt.Printf("%s %v\n", pt, err)
	// Output:
	// true
	// hello, QQ <nil>
}

func ExampleCipher_EncryptBatch() {
	c, err := tea.NewCipher([]byte("0123456789ABCDEF"))
	if err != nil {
		panic(err)
	}
	msgs := [][]byte{[]byte("one"), []byte("two, longer"), {}}
	cts := make([][]byte, len(msgs))
	c.EncryptBatch(cts, msgs)
	pts := make([][]byte, len(cts))
	if err := c.DecryptBatch(pts, cts); err != nil {
		panic(err)
	}
	for i := range pts {
		fmt.Printf("%q %v\n", pts[i], bytes.Equal(pts[i], msgs[i]))
	}
	// Output:
	// "one" true
	// "two, longer" true
	// "" true
}
