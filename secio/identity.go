package secio

import (
	"crypto/ecdh"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/rsa"
	"crypto/subtle"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
)

// Sizes of identity key encodings.
const (
	// PrivateKeySize is the length of a marshalled private key: the 32-byte
	// Ed25519 seed of RFC 8032.
	PrivateKeySize = ed25519.SeedSize
	// PublicKeySize is the length of a public key's canonical encoding: the
	// 32-byte Ed25519 public key of RFC 8032.
	PublicKeySize = ed25519.PublicKeySize
	// SignatureSize is the length of an identity signature.
	SignatureSize = ed25519.SignatureSize
)

// keyTypeEd25519 is the identity key type code in an Auth message.
const keyTypeEd25519 = 0x01

// pemType is the PEM block type of a marshalled private key (PKCS #8).
const pemType = "PRIVATE KEY"

// PrivateKey is a node's Ed25519 identity key ([RFC 8032]). Its zero value
// is not usable; make one with GenerateKey or UnmarshalPrivateKey.
//
// [RFC 8032]: https://www.rfc-editor.org/rfc/rfc8032
type PrivateKey struct {
	key ed25519.PrivateKey
	pub *PublicKey
}

// PublicKey is an Ed25519 identity public key.
type PublicKey struct {
	key ed25519.PublicKey // raw[:] for keys made by UnmarshalPublicKey
	id  PeerID
	raw [PublicKeySize]byte
}

// GenerateKey returns a new identity key drawn from crypto/rand.
func GenerateKey() (*PrivateKey, error) {
	return GenerateKeyFrom(rand.Reader)
}

// GenerateKeyFrom returns an identity key whose 32-byte seed is read from r.
// It exists for tests and reproducible vectors; use GenerateKey otherwise.
func GenerateKeyFrom(r io.Reader) (*PrivateKey, error) {
	var seed [PrivateKeySize]byte
	if _, err := io.ReadFull(r, seed[:]); err != nil {
		return nil, fmt.Errorf("secio: generate key: %w", err)
	}
	return newPrivateKey(seed[:]), nil
}

func newPrivateKey(seed []byte) *PrivateKey {
	k := ed25519.NewKeyFromSeed(seed)
	pub := newPublicKey(k.Public().(ed25519.PublicKey))
	return &PrivateKey{key: k, pub: pub}
}

func newPublicKey(k ed25519.PublicKey) *PublicKey {
	p := &PublicKey{key: k}
	p.id = peerIDFromEncoding(k)
	return p
}

// UnmarshalPrivateKey parses the output of MarshalBinary: the 32-byte
// Ed25519 seed. Any other length yields an error wrapping ErrInvalidKey.
func UnmarshalPrivateKey(b []byte) (*PrivateKey, error) {
	if len(b) != PrivateKeySize {
		return nil, fmt.Errorf("%w: private key is %d bytes, want %d", ErrInvalidKey, len(b), PrivateKeySize)
	}
	return newPrivateKey(b), nil
}

// Public returns the public half of k.
func (k *PrivateKey) Public() *PublicKey { return k.pub }

// PeerID returns the peer ID of k's public key.
func (k *PrivateKey) PeerID() PeerID { return k.pub.id }

// Sign returns the Ed25519 signature of msg.
func (k *PrivateKey) Sign(msg []byte) []byte { return ed25519.Sign(k.key, msg) }

// MarshalBinary returns the 32-byte Ed25519 seed, from which the whole key
// is derived. The result is secret.
func (k *PrivateKey) MarshalBinary() ([]byte, error) {
	return k.key.Seed(), nil
}

// Equal reports whether k and other are the same key, in constant time.
func (k *PrivateKey) Equal(other *PrivateKey) bool {
	if k == nil || other == nil {
		return k == other
	}
	return subtle.ConstantTimeCompare(k.key, other.key) == 1
}

// MarshalPEM encodes k as a PEM block of type "PRIVATE KEY" holding PKCS #8
// ([RFC 8410] for Ed25519), readable by OpenSSL.
//
// [RFC 8410]: https://www.rfc-editor.org/rfc/rfc8410
func (k *PrivateKey) MarshalPEM() ([]byte, error) {
	der, err := x509.MarshalPKCS8PrivateKey(k.key)
	if err != nil {
		return nil, fmt.Errorf("secio: marshal key: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: pemType, Bytes: der}), nil
}

// ParsePrivateKeyPEM parses the first PEM block of data, which must be a
// "PRIVATE KEY" block holding a PKCS #8 Ed25519 key. Errors wrap
// ErrInvalidKey.
func ParsePrivateKeyPEM(data []byte) (*PrivateKey, error) {
	k, reason := parsePrivateKeyPEM(data)
	if k == nil {
		return nil, fmt.Errorf("%w: %s", ErrInvalidKey, reason)
	}
	return k, nil
}

// parsePrivateKeyPEM returns the key, or nil and why not in words a user can act on: the
// ASN.1 parser's own messages name Go types and tags, which mean nothing to someone whose
// key file was truncated or pasted wrongly.
func parsePrivateKeyPEM(data []byte) (*PrivateKey, string) {
	block, _ := pem.Decode(data)
	if block == nil {
		return nil, "no PEM block (want a \"-----BEGIN " + pemType + "-----\" block, as tendril keygen writes)"
	}
	if block.Type != pemType {
		return nil, fmt.Sprintf("PEM block type %q, want %q", block.Type, pemType)
	}
	parsed, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	if err != nil {
		return nil, "the PEM block is not a valid PKCS #8 private key (damaged or truncated?)"
	}
	ek, ok := parsed.(ed25519.PrivateKey)
	if !ok {
		return nil, fmt.Sprintf("the key is %s, want Ed25519", keyKind(parsed))
	}
	return newPrivateKey(ek.Seed()), ""
}

// keyKind names a parsed PKCS #8 key's algorithm for an error message.
func keyKind(k any) string {
	switch k.(type) {
	case *rsa.PrivateKey:
		return "RSA"
	case *ecdsa.PrivateKey:
		return "ECDSA"
	case *ecdh.PrivateKey:
		return "X25519 (ECDH)"
	}
	return "not Ed25519"
}

// LoadOrCreateKeyFile reads the PEM private key at path; if the file does
// not exist it generates a key and writes it there with mode 0600, reporting
// created = true. An existing file readable by group or others is refused,
// as OpenSSH does, since the key is the node's identity.
func LoadOrCreateKeyFile(path string) (key *PrivateKey, created bool, err error) {
	key, err = loadKeyFile(path)
	if err == nil {
		return key, false, nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return nil, false, err
	}
	key, err = GenerateKey()
	if err != nil {
		return nil, false, err
	}
	if err := SaveKeyFile(path, key, false); err != nil {
		if errors.Is(err, fs.ErrExist) {
			// Lost a race with another process creating it: use theirs.
			key, err = loadKeyFile(path)
			return key, false, err
		}
		return nil, false, err
	}
	return key, true, nil
}

// LoadKeyFile reads the PEM private key at path. Like LoadOrCreateKeyFile it refuses a file
// readable by group or others (ErrKeyFilePermissions); a missing file is an error wrapping
// fs.ErrNotExist, a malformed one wraps ErrInvalidKey. Every error names the file once.
func LoadKeyFile(path string) (*PrivateKey, error) { return loadKeyFile(path) }

// KeyFileError is a key file that cannot be used: which file, and why.
type KeyFileError struct {
	Path   string
	Reason string // what is wrong, in words, with the remedy when there is one
	Err    error  // ErrInvalidKey, ErrKeyFilePermissions or an fs error
}

// Error names the file once: "secio: key file PATH: REASON".
func (e *KeyFileError) Error() string { return "secio: key file " + e.Path + ": " + e.Reason }

// Unwrap returns the sentinel or fs error behind e.
func (e *KeyFileError) Unwrap() error { return e.Err }

func loadKeyFile(path string) (*PrivateKey, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, keyFileErr(path, err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, keyFileErr(path, err)
	}
	if !st.Mode().IsRegular() {
		return nil, &KeyFileError{path, "not a regular file", ErrInvalidKey}
	}
	if st.Mode().Perm()&0o077 != 0 {
		return nil, &KeyFileError{path, fmt.Sprintf("mode %#o lets others read this identity, want 0600 (run: chmod 600 %s)",
			st.Mode().Perm(), path), ErrKeyFilePermissions}
	}
	const maxKeyFile = 64 << 10
	data, err := io.ReadAll(io.LimitReader(f, maxKeyFile+1))
	if err != nil {
		return nil, keyFileErr(path, err)
	}
	if len(data) > maxKeyFile {
		return nil, &KeyFileError{path, fmt.Sprintf("larger than %d bytes, not a key file", maxKeyFile), ErrInvalidKey}
	}
	k, reason := parsePrivateKeyPEM(data)
	if k == nil {
		return nil, &KeyFileError{path, reason, ErrInvalidKey}
	}
	return k, nil
}

// keyFileErr states an fs error without repeating the path the *fs.PathError already holds.
func keyFileErr(path string, err error) error {
	reason := err.Error()
	if pe, ok := err.(*fs.PathError); ok {
		reason = pe.Err.Error()
		if errors.Is(err, fs.ErrNotExist) {
			reason = "does not exist"
		}
	}
	return &KeyFileError{path, reason, err}
}

// SaveKeyFile writes key to path as PEM with mode 0600. If overwrite is
// false and path exists, it fails with an error wrapping fs.ErrExist; if
// overwrite is true, an existing file is replaced atomically (write to a
// temporary file in the same directory, then rename).
func SaveKeyFile(path string, key *PrivateKey, overwrite bool) error {
	if key == nil {
		return fmt.Errorf("%w: nil key", ErrInvalidKey)
	}
	data, err := key.MarshalPEM()
	if err != nil {
		return err
	}
	if !overwrite {
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if err != nil {
			return fmt.Errorf("secio: save key: %w", err)
		}
		if err := writeSync(f, data); err != nil {
			os.Remove(path)
			return fmt.Errorf("secio: save key: %w", err)
		}
		return nil
	}
	f, err := os.CreateTemp(filepath.Dir(path), ".tendril-key-*")
	if err != nil {
		return fmt.Errorf("secio: save key: %w", err)
	}
	tmp := f.Name()
	if err := f.Chmod(0o600); err != nil {
		f.Close()
		os.Remove(tmp)
		return fmt.Errorf("secio: save key: %w", err)
	}
	if err := writeSync(f, data); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("secio: save key: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("secio: save key: %w", err)
	}
	return nil
}

// writeSync writes data to f, syncs and closes it.
func writeSync(f *os.File, data []byte) error {
	_, err := f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// UnmarshalPublicKey parses a public key's canonical encoding (the 32-byte
// Ed25519 public key). Errors wrap ErrInvalidKey.
func UnmarshalPublicKey(b []byte) (*PublicKey, error) {
	if len(b) != PublicKeySize {
		return nil, fmt.Errorf("%w: public key is %d bytes, want %d", ErrInvalidKey, len(b), PublicKeySize)
	}
	p := &PublicKey{}
	copy(p.raw[:], b)
	p.key = p.raw[:]
	p.id = peerIDFromEncoding(p.key)
	return p, nil
}

// Bytes returns the canonical encoding of k: the 32-byte Ed25519 public
// key. The caller may modify the result.
func (k *PublicKey) Bytes() []byte { return append([]byte(nil), k.key...) }

// Verify reports whether sig is a valid Ed25519 signature of msg by k
// (RFC 8032 verification as implemented by crypto/ed25519).
func (k *PublicKey) Verify(msg, sig []byte) bool {
	if len(sig) != SignatureSize {
		return false
	}
	return ed25519.Verify(k.key, msg, sig)
}

// Equal reports whether k and other encode the same key.
func (k *PublicKey) Equal(other *PublicKey) bool {
	if k == nil || other == nil {
		return k == other
	}
	return k.key.Equal(other.key)
}

// PeerID returns the peer ID of k.
func (k *PublicKey) PeerID() PeerID { return k.id }

// String returns the peer ID of k in base58btc.
func (k *PublicKey) String() string { return k.id.String() }

// smallOrderKeys are the encodings of the Ed25519 points of small order
// (1, 2, 4 and 8), with the sign bit cleared, including the non-canonical
// encodings of y = 0 and y = 1 (as p and p+1). A signature by such a key
// can verify for many messages without any private key, so that anyone
// could claim the peer ID it maps to. The list is libsodium's
// (crypto_sign_ed25519 has_small_order), checked in identity_test.go.
var smallOrderKeys = [...][PublicKeySize]byte{
	// 0 (order 4)
	{},
	// 1 (order 1)
	{0x01},
	// order 8
	{0x26, 0xe8, 0x95, 0x8f, 0xc2, 0xb2, 0x27, 0xb0, 0x45, 0xc3, 0xf4, 0x89, 0xf2, 0xef, 0x98, 0xf0,
		0xd5, 0xdf, 0xac, 0x05, 0xd3, 0xc6, 0x33, 0x39, 0xb1, 0x38, 0x02, 0x88, 0x6d, 0x53, 0xfc, 0x05},
	// order 8
	{0xc7, 0x17, 0x6a, 0x70, 0x3d, 0x4d, 0xd8, 0x4f, 0xba, 0x3c, 0x0b, 0x76, 0x0d, 0x10, 0x67, 0x0f,
		0x2a, 0x20, 0x53, 0xfa, 0x2c, 0x39, 0xcc, 0xc6, 0x4e, 0xc7, 0xfd, 0x77, 0x92, 0xac, 0x03, 0x7a},
	// p-1 (order 2)
	{0xec, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
		0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f},
	// p, a non-canonical 0 (order 4)
	{0xed, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
		0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f},
	// p+1, a non-canonical 1 (order 1)
	{0xee, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
		0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f},
}

// smallOrder reports whether pub (32 bytes) encodes a point of small
// order, in either sign, comparing with every listed encoding in constant
// time.
func smallOrder(pub []byte) bool {
	var k [PublicKeySize]byte
	copy(k[:], pub)
	k[PublicKeySize-1] &= 0x7f
	found := 0
	for i := range smallOrderKeys {
		found |= subtle.ConstantTimeCompare(k[:], smallOrderKeys[i][:])
	}
	return found == 1
}
