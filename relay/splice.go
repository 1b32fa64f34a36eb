package relay

// The relay's side of a circuit: two streams, the dialer's hop stream and the target's
// stop stream, spliced frame by frame. Each direction is one goroutine (the hop handler's
// own and one more), the only writer of its destination, with one buffer of a frame's
// size: the circuit holds 2 x 16 KiB here whatever its ends do, and the mux's flow
// control makes a sender wait for a slow receiver instead of growing anything.

import (
	"bufio"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"sync/atomic"
	"time"

	"github.com/tendril-p2p/tendril/secio"
)

// notifyGrace is how long a stopped circuit's pumps may take to hand their close notices
// to the streams; a pump blocked longer by an end that does not read is cut off, and that
// end gets a reset instead.
const notifyGrace = time.Second

// end is one end of a circuit as the relay holds it.
type end struct {
	st   net.Conn
	r    *bufio.Reader
	peer secio.PeerID
}

// circuit is a spliced circuit on the relay.
type circuit struct {
	ends   [2]end // the dialer's, the target's
	limits Limits
	reason atomic.Uint32 // the CloseCode that stopped it; 0 while it runs
	sent   [2]atomic.Int64
}

// stop ends the circuit for code, unless it was stopped already: both pumps are woken
// from their reads (and given notifyGrace to finish a write), and each tells its
// destination why.
func (c *circuit) stop(code CloseCode) {
	if c.reason.CompareAndSwap(0, uint32(code)) {
		c.interrupt()
	}
}

// interrupt wakes the pumps from their reads and gives their writes notifyGrace. Ends not
// yet set (a circuit stopped while its target was being asked) are skipped: the Relay
// interrupts again once it sets them.
//
// If a pump is still running notifyGrace later (its write blocked by an end that does
// not read), its streams are reset, so Close always returns.
func (c *circuit) interrupt() {
	now := time.Now()
	ends := c.ends // a copy: the Relay may set c.ends after a first interrupt
	for _, e := range ends {
		if e.st != nil {
			e.st.SetReadDeadline(now)
			e.st.SetWriteDeadline(now.Add(notifyGrace))
		}
	}
	time.AfterFunc(notifyGrace, func() {
		for _, e := range ends {
			if e.st != nil {
				resetConn(e.st)
			}
		}
	})
}

// run splices the two ends (their deadlines cleared by the caller) until both directions are done or the circuit is stopped,
// then closes both streams. It returns the reason it was stopped (0: both ends closed).
func (c *circuit) run(spawn func(func())) CloseCode {
	timer := time.AfterFunc(c.limits.Duration, func() { c.stop(CloseDuration) })
	defer timer.Stop()
	done := make(chan struct{})
	spawn(func() {
		defer close(done)
		c.pump(&c.ends[1], &c.ends[0], &c.sent[1])
	})
	c.pump(&c.ends[0], &c.ends[1], &c.sent[0])
	<-done
	for _, e := range c.ends {
		e.st.Close()
	}
	return CloseCode(c.reason.Load())
}

// pump forwards whole frames from one end to the other, counting them against the byte
// limit, until from ends (its end-of-stream is passed on) or the circuit stops (to gets
// the close notice).
func (c *circuit) pump(from, to *end, sent *atomic.Int64) {
	buf := make([]byte, 0, maxFrame+maxHeader)
	for {
		out, err := readFrames(from.r, buf[:0])
		if err != nil {
			switch {
			case err == io.EOF && c.reason.Load() == 0:
				if cw, ok := to.st.(interface{ CloseWrite() error }); ok {
					cw.CloseWrite()
				}
				return
			case errors.Is(err, ErrMalformed):
				c.stop(CloseMalformed)
			default:
				c.stop(CloseReset) // a no-op if this is stop's own wake-up
			}
			c.notify(to)
			return
		}
		if c.reason.Load() != 0 {
			// Stopped while this read returned: forwarding what came would let an end's
			// reaction to its own notice (a close) reach the other end before that end's
			// notice says why.
			c.notify(to)
			return
		}
		if tap := testTap.Load(); tap != nil {
			(*tap)(out)
		}
		if sent.Load()+int64(len(out)) > c.limits.Bytes {
			c.stop(CloseBytes)
			c.notify(to)
			return
		}
		if _, err := to.st.Write(out); err != nil {
			c.stop(CloseReset)
			resetConn(to.st) // possibly mid-frame: nothing more can follow
			return
		}
		sent.Add(int64(len(out)))
	}
}

// notify writes the close notice, a zero length and the reason, to an end.
func (c *circuit) notify(to *end) {
	if _, err := to.st.Write([]byte{0, byte(c.reason.Load())}); err != nil {
		resetConn(to.st)
	}
}

// resetConn aborts a stream if it can, else closes it.
func resetConn(c net.Conn) {
	if r, ok := c.(interface{ Reset() error }); ok {
		r.Reset()
		return
	}
	c.Close()
}

// readFrames reads one data frame, waiting for it, then as many more whole frames as the
// reader has buffered and out has room for, so that a sender of tiny frames costs the
// relay one write per buffer rather than one per frame. It returns the frames as they
// came, headers included. A close notice (length 0) from an end is malformed: only the
// relay sends those.
func readFrames(r *bufio.Reader, out []byte) ([]byte, error) {
	n, err := readFrameHeader(r)
	if err != nil {
		return nil, err
	}
	if n == 0 {
		return nil, errEndNotice
	}
	out = binary.AppendUvarint(out, uint64(n))
	h := len(out)
	out = out[:h+n]
	if _, err := io.ReadFull(r, out[h:]); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return nil, err
	}
	for r.Buffered() > 0 {
		p, _ := r.Peek(min(r.Buffered(), maxHeader))
		n, k := binary.Uvarint(p)
		if k <= 0 || n == 0 || n > maxFrame || k+int(n) > r.Buffered() || len(out)+k+int(n) > cap(out) {
			break // incomplete, not ours to judge yet, or no room: the next call deals with it
		}
		whole, _ := r.Peek(k + int(n))
		out = append(out, whole...)
		r.Discard(k + int(n))
	}
	return out, nil
}

// testTap, if set, sees every batch of frames a relay forwards: the tests check that no
// plaintext passes.
var testTap atomic.Pointer[func([]byte)]

var errEndNotice = errors.Join(ErrMalformed, errors.New("relay: a close notice from an end"))
