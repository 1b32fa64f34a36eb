//go:build !js

package ws

import (
	"crypto/rand"
	"encoding/binary"
	"errors"
	"io"

	"github.com/tendril-p2p/tendril/internal/deadline"
)

// errHandedOff reports that coder/websocket reads the stream now (see handOff).
var errHandedOff = errors.New("ws: the stream is handed over to the close handshake")

// readData reads the payload bytes of the peer's binary messages into p (not empty), in
// order, whatever their frames: one read of the connection, or of what pre holds, whose
// frames the frameReader takes apart in p. A read that brings only headers and control
// frames reads on. It returns a byte count with a nil error, or an error alone:
//   - a timeout, which leaves the stream intact;
//   - a *frameError, errPeerClose (the peer's close frame: coder/websocket reads it), or
//     errHandedOff, each returned again by every later call;
//   - io.EOF if the connection ended where a message may end, io.ErrUnexpectedEOF if
//     not, or the connection's error, permanent.
func (w *wire) readData(p []byte) (int, error) {
	w.rmu.Lock()
	defer w.rmu.Unlock()
	for {
		if w.rerr != nil {
			return 0, w.rerr
		}
		if w.handedOff {
			return 0, errHandedOff
		}
		var n int
		var err error
		if len(w.pre) > 0 {
			n = copy(p, w.pre)
			if w.pre = w.pre[n:]; len(w.pre) == 0 {
				w.pre = nil
			}
		} else {
			n, err = w.Conn.Read(p)
		}
		m, perr := w.fr.parse(p[:n])
		if w.fr.pongDue {
			w.pong()
		}
		switch {
		case perr == errPeerClose:
			// coder/websocket reads the close frame and answers it; what came after it
			// is nothing a peer may send.
			w.pre, w.handedOff, w.rerr = w.fr.closeFrame, true, errPeerClose
		case perr != nil:
			w.rerr = perr
		case err == io.EOF:
			if w.fr.atBoundary() {
				w.rerr = io.EOF
			} else {
				w.rerr = io.ErrUnexpectedEOF
			}
		case err != nil && !deadline.TimedOut(err):
			w.rerr = err
		}
		if m > 0 {
			return m, nil // any error comes with the next call
		}
		if w.rerr != nil {
			return 0, w.rerr
		}
		if err != nil {
			return 0, err
		}
	}
}

// pong answers the latest ping, as coder/websocket would: through Write, behind what
// write deadlines left unwritten. A write that fails is the write side's to report.
func (w *wire) pong() {
	var b [maxHeader + maxControl]byte
	p := w.fr.pong[:w.fr.pongLen]
	w.fr.pongDue = false
	b[0] = 0x80 | opPong
	b[1] = byte(len(p))
	n := 2
	if w.fr.server {
		n += copy(b[n:], p)
	} else {
		// A client masks every frame it sends.
		b[1] |= 0x80
		if _, err := rand.Read(b[2:6]); err != nil {
			return
		}
		maskCopy(b[6:6+len(p)], p, binary.LittleEndian.Uint32(b[2:6]))
		n = 6 + len(p)
	}
	_, _ = w.Write(b[:n])
}

// Read reads the stream for coder/websocket, which reads only to run the close handshake.
// The first call takes the stream over from the frameReader (handOff).
func (w *wire) Read(p []byte) (int, error) {
	w.rmu.Lock()
	defer w.rmu.Unlock()
	if !w.handedOff {
		w.handOff()
	}
	if fe, ok := w.rerr.(*frameError); ok && fe.fatal {
		return 0, w.rerr // no frame can be found in the rest
	}
	for w.skip > 0 {
		n, err := w.Conn.Read(p[:min(uint64(len(p)), w.skip)])
		w.skip -= uint64(n)
		if err != nil {
			return 0, err
		}
	}
	if len(w.pre) > 0 {
		n := copy(p, w.pre)
		if w.pre = w.pre[n:]; len(w.pre) == 0 {
			w.pre = nil
		}
		return n, nil
	}
	return w.Conn.Read(p)
}

// handOff gives the stream to coder/websocket at a frame boundary, so that its reader
// finds a frame header next: what the frameReader has of the next header or of a control
// frame is read again first, and the rest of a data frame (no one reads data any more:
// the connection is closing) is dropped.
func (w *wire) handOff() {
	w.handedOff = true
	r := &w.fr
	var prefix []byte
	switch {
	case r.have > 0:
		prefix = r.hdr[:r.have]
	case r.left > 0 && r.op >= opClose:
		prefix = append(r.hdr[:r.hlen:r.hlen], r.ctl[:r.ctlLen]...)
	case r.left > 0:
		k := min(r.left, uint64(len(w.pre)))
		w.pre = w.pre[k:]
		w.skip = r.left - k
	}
	if len(prefix) > 0 {
		w.pre = append(append([]byte(nil), prefix...), w.pre...)
	}
}
