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

// WycheproofAEAD is the layout of a Project Wycheproof AEAD test file
// (aead_test_schema_v1.json), the fields the tests use.
type WycheproofAEAD struct {
	Algorithm  string `json:"algorithm"`
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
