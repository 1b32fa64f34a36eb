//go:build !js

package ws

import "encoding/binary"

// frameCursor follows a stream of WebSocket frames (RFC 6455, section 5.2) byte by byte,
// without keeping any of it but the header being read: it knows whether the bytes seen so
// far end exactly where a frame ends. That is the one place a read may stop on a deadline
// without losing the stream, since coder/websocket keeps no partial frame header and no
// partial payload across a failed read.
type frameCursor struct {
	left uint64   // payload bytes of the current frame not yet seen
	hdr  [14]byte // the next frame's header, as far as seen
	have uint8    // bytes of hdr seen
}

// atBoundary reports whether the bytes seen end a frame (or none were seen).
func (f *frameCursor) atBoundary() bool { return f.have == 0 && f.left == 0 }

// advance moves the cursor over b, the next bytes of the stream.
func (f *frameCursor) advance(b []byte) {
	for len(b) > 0 {
		if f.left > 0 {
			if uint64(len(b)) <= f.left {
				f.left -= uint64(len(b))
				return
			}
			b = b[f.left:]
			f.left = 0
			continue
		}
		need := f.headerLen()
		k := copy(f.hdr[f.have:need], b)
		f.have += uint8(k)
		b = b[k:]
		if int(f.have) < f.headerLen() {
			continue // the second byte just arrived and says the header is longer, or b ran out
		}
		f.left = f.payloadLen()
		f.have = 0
	}
}

// headerLen is the length of the header being read: 2 until its second byte is seen,
// then 2, plus 2 or 8 for an extended length, plus 4 for a masking key.
func (f *frameCursor) headerLen() int {
	if f.have < 2 {
		return 2
	}
	n := 2
	switch f.hdr[1] & 0x7f {
	case 126:
		n += 2
	case 127:
		n += 8
	}
	if f.hdr[1]&0x80 != 0 {
		n += 4
	}
	return n
}

// payloadLen is the payload length of the complete header in hdr. A length with the top
// bit set is invalid and coder/websocket refuses the frame; the cursor counts it all the
// same, as the stream is failed anyway.
func (f *frameCursor) payloadLen() uint64 {
	switch n := f.hdr[1] & 0x7f; n {
	case 126:
		return uint64(binary.BigEndian.Uint16(f.hdr[2:4]))
	case 127:
		return binary.BigEndian.Uint64(f.hdr[2:10])
	default:
		return uint64(n)
	}
}
