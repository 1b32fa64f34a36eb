package blake3

import "errors"

var (
	// ErrKeySize is returned by NewKeyed when the key is not KeySize bytes.
	ErrKeySize = errors.New("blake3: key must be 32 bytes")
	// ErrInvalidState is returned by UnmarshalBinary for data that is not a
	// state written by MarshalBinary.
	ErrInvalidState = errors.New("blake3: invalid hash state")
	// ErrSeek is returned by OutputReader.Seek for an unsupported whence or a
	// position outside the output stream.
	ErrSeek = errors.New("blake3: invalid seek")
)
