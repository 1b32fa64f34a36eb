package blake3

import (
	"encoding/binary"
	"fmt"
)

const (
	marshalMagic = "tendril/blake3\x01"
	// magic, key, flags, chunk cv, chunk counter, buf, bufLen,
	// blocksCompressed, stackLen; then stackLen CVs.
	marshalFixed = len(marshalMagic) + 32 + 4 + 32 + 8 + 64 + 3
)

// MarshalBinary encodes the Hasher's state so that UnmarshalBinary can
// resume it later. The state holds the key of a keyed Hasher: treat it as
// secret.
func (h *Hasher) MarshalBinary() ([]byte, error) {
	return h.AppendBinary(make([]byte, 0, marshalFixed+int(h.stackLen)*outLen))
}

// AppendBinary appends the encoding of MarshalBinary to b.
func (h *Hasher) AppendBinary(b []byte) ([]byte, error) {
	b = append(b, marshalMagic...)
	for _, w := range h.key {
		b = binary.LittleEndian.AppendUint32(b, w)
	}
	b = binary.LittleEndian.AppendUint32(b, h.flags)
	for _, w := range h.chunk.cv {
		b = binary.LittleEndian.AppendUint32(b, w)
	}
	b = binary.LittleEndian.AppendUint64(b, h.chunk.counter)
	b = append(b, h.chunk.buf[:]...)
	b = append(b, h.chunk.bufLen, h.chunk.blocksCompressed, h.stackLen)
	for i := 0; i < int(h.stackLen); i++ {
		for _, w := range h.stack[i] {
			b = binary.LittleEndian.AppendUint32(b, w)
		}
	}
	return b, nil
}

// UnmarshalBinary restores a state written by MarshalBinary. Malformed
// input is rejected with an error wrapping ErrInvalidState and leaves h
// unchanged.
func (h *Hasher) UnmarshalBinary(b []byte) error {
	if len(b) < marshalFixed || string(b[:len(marshalMagic)]) != marshalMagic {
		return fmt.Errorf("%w: bad length or magic", ErrInvalidState)
	}
	var s Hasher
	p := b[len(marshalMagic):]
	for i := range s.key {
		s.key[i] = binary.LittleEndian.Uint32(p[4*i:])
	}
	p = p[32:]
	s.flags = binary.LittleEndian.Uint32(p)
	p = p[4:]
	for i := range s.chunk.cv {
		s.chunk.cv[i] = binary.LittleEndian.Uint32(p[4*i:])
	}
	p = p[32:]
	s.chunk.counter = binary.LittleEndian.Uint64(p)
	p = p[8:]
	copy(s.chunk.buf[:], p[:64])
	p = p[64:]
	s.chunk.bufLen, s.chunk.blocksCompressed, s.stackLen = p[0], p[1], p[2]
	p = p[3:]
	s.chunk.flags = s.flags
	switch s.flags {
	case 0, flagKeyedHash, flagDeriveKeyMaterial:
	default:
		return fmt.Errorf("%w: flags %#x", ErrInvalidState, s.flags)
	}
	if s.flags == 0 && s.key != iv {
		return fmt.Errorf("%w: unkeyed state with a key", ErrInvalidState)
	}
	if s.chunk.bufLen > BlockSize || s.chunk.blocksCompressed > chunkLen/BlockSize-1 ||
		(s.chunk.blocksCompressed > 0 && s.chunk.bufLen == 0) {
		return fmt.Errorf("%w: bad chunk length", ErrInvalidState)
	}
	for _, c := range s.chunk.buf[s.chunk.bufLen:] {
		if c != 0 {
			return fmt.Errorf("%w: bad chunk buffer", ErrInvalidState)
		}
	}
	// The counter is below 2^54 for any input of fewer than 2^64 bytes.
	if s.chunk.counter >= 1<<maxDepth || s.stackLen > maxDepth {
		return fmt.Errorf("%w: bad tree position", ErrInvalidState)
	}
	if s.chunk.len() == 0 && s.stackLen == 1 {
		return fmt.Errorf("%w: bad tree position", ErrInvalidState)
	}
	if len(p) != int(s.stackLen)*outLen {
		return fmt.Errorf("%w: bad length", ErrInvalidState)
	}
	for i := 0; i < int(s.stackLen); i++ {
		for j := range s.stack[i] {
			s.stack[i][j] = binary.LittleEndian.Uint32(p[4*j:])
		}
		p = p[outLen:]
	}
	*h = s
	return nil
}
