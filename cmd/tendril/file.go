package main

import (
	"fmt"
	"io"
	"os"
)

// maxKeyFile bounds what is read as a key file: a PEM Ed25519 key is far smaller.
const maxKeyFile = 64 << 10

func readFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxKeyFile+1))
	if err != nil {
		return nil, err
	}
	if len(b) > maxKeyFile {
		return nil, fmt.Errorf("%s: too large for a key file", path)
	}
	return b, nil
}
