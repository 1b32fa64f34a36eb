//go:build !js

package ws

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/coder/websocket"
)

// Opcodes (RFC 6455, section 5.2).
const (
	opContinuation = 0x0
	opText         = 0x1
	opBinary       = 0x2
	opClose        = 0x8
	opPing         = 0x9
	opPong         = 0xa

	// maxControl is the longest payload of a control frame (RFC 6455, section 5.5).
	maxControl = 125
	// maxHeader is the longest frame header: 2 bytes, 8 of extended length, 4 of mask.
	maxHeader = 14
)

// frameReader reads the frames of a Conn's read side, the hot path: coder/websocket's
// reader would read each frame header through its bufio.Reader, then the payload, through
// a mutex, a limit reader and a second masking pass, and never more than one frame per
// read. A frameReader instead walks the bytes a read put in the caller's buffer in place:
// it moves the payloads of data frames to the front, unmasking them in the same pass, and
// takes the headers out, so that one read of the socket returns as many frames as arrived,
// as a read of TCP does.
//
// It checks what coder/websocket checks, and the masking rule in both directions (RFC
// 6455, section 5.1: a server closes on an unmasked frame, a client on a masked one).
// Pings it answers itself (see wire.pong); the peer's close frame, once it has it whole,
// it hands to coder/websocket, which runs the close handshake (see wire.handOff).
//
// A read that a deadline interrupts loses nothing: what the frameReader has seen of a
// header, a payload or a control frame is in its state, so the next read goes on from
// there, as on TCP.
type frameReader struct {
	server     bool   // the peer is a client: every frame must be masked, and none may be otherwise
	maxMessage uint64 // Config.MaxMessage

	// The current frame, once its header is complete.
	left   uint64 // payload bytes not seen yet; a header is next when it is 0
	key    uint32 // masking key, rotated to the next payload byte of a data frame
	masked bool
	op     byte

	// The header being read (have bytes of it), or, once complete, the last one (hlen bytes),
	// which a close frame is handed on with.
	hdr  [maxHeader]byte
	have uint8
	hlen uint8

	// A control frame's payload, as it arrives.
	ctl    [maxControl]byte
	ctlLen uint8

	// The data message in progress: open between its first frame and its final one;
	// msgLeft is how many more bytes it may have.
	open    bool
	msgLeft uint64

	// The payload of the latest ping not answered yet (see wire.pong): RFC 6455, section
	// 5.5.3, lets an endpoint answer only the latest of several, so a burst of pings costs
	// one pong per read.
	pong    [maxControl]byte
	pongLen uint8
	pongDue bool

	// closeFrame is the peer's close frame, whole, as it came, once seen.
	closeFrame []byte
}

// frameError is a frame that breaks the protocol or tendril's use of it: the read fails
// with err, and the connection is closed with code.
type frameError struct {
	code websocket.StatusCode
	err  error
	// fatal is set if the stream cannot be followed past the frame (its header is
	// invalid): coder/websocket, which then runs the close handshake, reads nothing more.
	fatal bool
}

func (e *frameError) Error() string { return e.err.Error() }
func (e *frameError) Unwrap() error { return e.err }

// protocolError is a frame that breaks RFC 6455: status 1002.
func protocolError(format string, args ...any) *frameError {
	return &frameError{code: websocket.StatusProtocolError, err: fmt.Errorf("%w: "+format, append([]any{ErrBadFrame}, args...)...), fatal: true}
}

// errPeerClose reports the peer's close frame, which coder/websocket is to read.
var errPeerClose = errors.New("ws: the peer's close frame")

// atBoundary reports whether the bytes seen end a frame, outside a message: where the
// stream may end cleanly.
func (r *frameReader) atBoundary() bool { return r.left == 0 && r.have == 0 && !r.open }

// parse walks b, the next bytes of the stream, and moves the payload bytes of data
// frames, unmasked, to the front of b; it returns how many there are. An error (a
// *frameError, or errPeerClose) stops it: the bytes before it count, those after it are
// dropped, and the frameReader must not be used again.
func (r *frameReader) parse(b []byte) (int, error) {
	out, i := 0, 0
	for i < len(b) {
		if r.left > 0 {
			k := int(min(uint64(len(b)-i), r.left))
			src := b[i : i+k]
			i += k
			r.left -= uint64(k)
			if r.op >= opClose {
				r.ctlLen += uint8(copy(r.ctl[r.ctlLen:], src))
				if r.left == 0 {
					if err := r.control(); err != nil {
						return out, err
					}
				}
				continue
			}
			// The payload moves down over the headers taken out before it: dst starts at
			// or before src, which maskCopy and copy allow.
			dst := b[out : out+k]
			if r.masked {
				r.key = maskCopy(dst, src, r.key)
			} else if out != i-k {
				copy(dst, src)
			}
			out += k
			continue
		}
		var h []byte
		if r.have == 0 && len(b)-i >= maxHeader {
			// The whole header is here: read it where it is.
			n := headerLen(b[i], b[i+1])
			h = b[i : i+n]
			i += n
		} else {
			need := 2
			if r.have >= 2 {
				need = headerLen(r.hdr[0], r.hdr[1])
			}
			k := copy(r.hdr[r.have:need], b[i:])
			r.have += uint8(k)
			i += k
			if r.have < 2 || int(r.have) < headerLen(r.hdr[0], r.hdr[1]) {
				continue // the second byte may just have said that the header is longer
			}
			h = r.hdr[:r.have]
			r.have = 0
		}
		if err := r.begin(h); err != nil {
			return out, err
		}
	}
	return out, nil
}

// headerLen is the length of a header whose first two bytes are b0 and b1.
func headerLen(b0, b1 byte) int {
	n := 2
	switch b1 & 0x7f {
	case 126:
		n += 2
	case 127:
		n += 8
	}
	if b1&0x80 != 0 {
		n += 4
	}
	return n
}

// begin checks the complete header h and makes its frame the current one.
func (r *frameReader) begin(h []byte) error {
	r.hlen = uint8(copy(r.hdr[:], h))
	b0, b1 := h[0], h[1]
	fin := b0&0x80 != 0
	op := b0 & 0x0f
	masked := b1&0x80 != 0
	var n uint64
	switch b1 & 0x7f {
	case 126:
		n = uint64(binary.BigEndian.Uint16(h[2:4]))
	case 127:
		n = binary.BigEndian.Uint64(h[2:10])
	default:
		n = uint64(b1 & 0x7f)
	}
	switch {
	case b0&0x70 != 0:
		// No extension was negotiated (compression is off): the reserved bits are 0.
		return protocolError("reserved bits %#x set", b0&0x70)
	case masked != r.server && r.server:
		return protocolError("an unmasked frame from the client")
	case masked != r.server:
		return protocolError("a masked frame from the server")
	case n>>63 != 0:
		return protocolError("a payload length with the top bit set")
	}
	r.op, r.left, r.masked, r.key, r.ctlLen = op, n, masked, 0, 0
	if masked {
		r.key = binary.LittleEndian.Uint32(h[len(h)-4:])
	}
	switch op {
	case opClose, opPing, opPong:
		if !fin {
			return protocolError("a fragmented control frame")
		}
		if n > maxControl {
			return protocolError("a control frame of %d bytes", n)
		}
		if n == 0 {
			return r.control()
		}
		return nil
	case opContinuation:
		if !r.open {
			return protocolError("a continuation frame outside a message")
		}
	case opText, opBinary:
		if r.open {
			return protocolError("a new message before the end of the previous one")
		}
		if op == opText {
			return &frameError{code: websocket.StatusPolicyViolation, err: ErrTextMessage}
		}
		r.msgLeft = r.maxMessage
	default:
		return protocolError("opcode %#x", op)
	}
	if n > r.msgLeft {
		return &frameError{code: websocket.StatusMessageTooBig, err: fmt.Errorf("%w: longer than %d bytes", ErrMessageTooBig, r.maxMessage)}
	}
	r.msgLeft -= n
	r.open = !fin
	return nil
}

// control acts on the complete control frame in hand.
func (r *frameReader) control() error {
	p := r.ctl[:r.ctlLen]
	switch r.op {
	case opPing:
		if r.masked {
			maskCopy(r.pong[:len(p)], p, r.key)
		} else {
			copy(r.pong[:], p)
		}
		r.pongLen, r.pongDue = uint8(len(p)), true
	case opClose:
		r.closeFrame = append(append(make([]byte, 0, int(r.hlen)+len(p)), r.hdr[:r.hlen]...), p...)
		return errPeerClose
	}
	// A pong answers nothing: this side sends no pings.
	return nil
}
