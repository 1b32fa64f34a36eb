package testutil

import (
	"encoding/hex"
	"encoding/json"
	"os"
	"testing"
)

// ReadJSON decodes the JSON file at path (a test-vector file under testdata/, usually) into
// v, and fails the test if it cannot be read or decoded.
func ReadJSON(t testing.TB, path string, v any) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, v); err != nil {
		t.Fatal(err)
	}
}

// Unhex decodes the hex string s (a test vector's field), and fails the test if it is not hex.
func Unhex(t testing.TB, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
