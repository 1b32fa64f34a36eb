package blake3

import (
	"fmt"
	"io"
	"math"
)

// OutputReader reads BLAKE3's extended output: a stream of 2^64 bytes whose
// first Size bytes are the hash. It implements io.Reader and io.Seeker.
// Seek positions are limited to what an int64 can express.
type OutputReader struct {
	out output
	pos uint64
	blk [BlockSize]byte
	// blkCounter+1 is the output block held in blk; 0 means none.
	blkCounter uint64
}

// Read fills p with the output stream from the current position. It
// returns io.EOF only at the end of the 2^64-byte stream.
func (r *OutputReader) Read(p []byte) (int, error) {
	if r.pos == math.MaxUint64 {
		return 0, io.EOF
	}
	if rem := math.MaxUint64 - r.pos; uint64(len(p)) > rem {
		p = p[:rem]
	}
	n := len(p)
	// Finish a partly read block from the cache.
	if off := r.pos % BlockSize; off != 0 && len(p) > 0 {
		c := r.pos / BlockSize
		if r.blkCounter != c+1 {
			compressFull(&r.blk, &r.out.cv, &r.out.block, c, r.out.blockLen, r.out.flags|flagRoot)
			r.blkCounter = c + 1
		}
		k := copy(p, r.blk[off:])
		p = p[k:]
		r.pos += uint64(k)
	}
	full := len(p) &^ (BlockSize - 1)
	if full > 0 {
		r.out.rootBytes(p[:full], r.pos)
		p = p[full:]
		r.pos += uint64(full)
	}
	if len(p) > 0 {
		c := r.pos / BlockSize
		compressFull(&r.blk, &r.out.cv, &r.out.block, c, r.out.blockLen, r.out.flags|flagRoot)
		r.blkCounter = c + 1
		k := copy(p, r.blk[:])
		r.pos += uint64(k)
	}
	return n, nil
}

// Seek sets the position for the next Read. whence must be io.SeekStart or
// io.SeekCurrent; the stream's end is beyond int64's range, so io.SeekEnd is
// refused with ErrSeek, as is a negative position.
func (r *OutputReader) Seek(offset int64, whence int) (int64, error) {
	var base int64
	switch whence {
	case io.SeekStart:
	case io.SeekCurrent:
		if r.pos > math.MaxInt64 {
			return 0, fmt.Errorf("%w: position beyond int64", ErrSeek)
		}
		base = int64(r.pos)
	default:
		return 0, fmt.Errorf("%w: whence %d", ErrSeek, whence)
	}
	if (offset > 0 && base > math.MaxInt64-offset) || base+offset < 0 {
		return 0, fmt.Errorf("%w: position out of range", ErrSeek)
	}
	r.pos = uint64(base + offset)
	return int64(r.pos), nil
}
