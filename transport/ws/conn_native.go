//go:build !js

package ws

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"
)

// connIO is a Conn's I/O natively: coder/websocket's Conn over a wire, whose deadlines
// are the Conn's (see wire). coder/websocket reads the frames, answers pings and runs the
// close handshake, called with context.Background(), which it recognises as never ending
// and then sets up nothing per call; the wire writes the data frames (writeMessage).
type connIO struct {
	ws           *websocket.Conn
	wire         *wire
	maxMessage   int
	closeTimeout time.Duration
	client       bool        // the dialling side: its frames are masked
	closed       atomic.Bool // Close was called

	rmu  sync.Mutex
	msg  io.Reader // the message being read, nil between messages
	left int       // how many more bytes msg may have
	rerr error     // the read side's permanent error

	wmu  sync.Mutex
	werr error // the write side's permanent error
}

func newConn(ws *websocket.Conn, w *wire, cfg *Config, client bool, local, remote net.Addr, suffix string) *Conn {
	ws.SetReadLimit(int64(cfg.MaxMessage))
	return &Conn{
		connIO: connIO{ws: ws, wire: w, maxMessage: cfg.MaxMessage, closeTimeout: cfg.CloseTimeout, client: client},
		local:  local, remote: remote, suffix: suffix,
	}
}

// Read reads the bytes of the binary messages received, in order.
func (c *Conn) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	c.rmu.Lock()
	defer c.rmu.Unlock()
	if c.rerr != nil {
		return 0, c.rerr
	}
	for {
		if c.msg == nil {
			typ, r, err := c.ws.Reader(context.Background())
			if err != nil {
				return 0, c.readFailed(err)
			}
			if typ != websocket.MessageBinary {
				c.rerr = ErrTextMessage
				c.shut(websocket.StatusPolicyViolation, "tendril: binary messages only")
				return 0, c.rerr
			}
			c.msg, c.left = r, c.maxMessage
		}
		// One byte more than the message may have: if it comes, the message is too long.
		// (coder/websocket's own limit lets that byte through.)
		n, err := c.msg.Read(p[:min(len(p), c.left+1)])
		if n > c.left {
			c.rerr = fmt.Errorf("%w: longer than %d bytes", ErrMessageTooBig, c.maxMessage)
			c.shut(websocket.StatusMessageTooBig, "")
			return 0, c.rerr
		}
		c.left -= n
		if err == io.EOF {
			c.msg = nil
			if n == 0 {
				continue // the next message; an empty one is nothing to return
			}
			return n, nil
		}
		if err != nil {
			// A timeout between frames of the message leaves it to be read on.
			return n, c.readFailed(err)
		}
		return n, nil
	}
}

// readFailed turns a read error of coder/websocket into the Conn's: a timeout as it is,
// anything else permanent.
func (c *Conn) readFailed(err error) error {
	if c.closed.Load() {
		c.rerr = net.ErrClosed
		return c.rerr
	}
	if isTimeout(err) {
		return os.ErrDeadlineExceeded
	}
	switch {
	case errors.Is(err, ErrStalledFrame):
		err = ErrStalledFrame
		c.ws.CloseNow() // the stream is lost: no close frame can be read in it
	default:
		switch code := websocket.CloseStatus(err); {
		case code == websocket.StatusNormalClosure || code == websocket.StatusGoingAway:
			err = io.EOF
		case code == websocket.StatusMessageTooBig:
			err = fmt.Errorf("%w: the peer refused a message of ours: %w", ErrMessageTooBig, err)
		case code != -1:
			err = fmt.Errorf("ws: closed by the peer: %w", err)
		case errors.Is(err, io.ErrUnexpectedEOF):
			err = io.ErrUnexpectedEOF
		case errors.Is(err, io.EOF):
			err = io.EOF // the TCP connection ended between frames, without a close frame
		default:
			err = fmt.Errorf("ws: read: %w", err)
		}
	}
	c.rerr = err
	return err
}

// Write sends p as one binary message, or several of at most Config.MaxMessage bytes.
func (c *Conn) Write(p []byte) (int, error) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if c.werr != nil {
		return 0, c.werr
	}
	if c.closed.Load() || c.wire.isClosing() {
		return 0, net.ErrClosed // nothing but the close frame goes out now
	}
	if c.wire.writeExpired() {
		return 0, c.timedOut() // nothing sent: the stream is intact
	}
	if err := c.wire.settle(); err != nil {
		if isTimeout(err) {
			return 0, c.timedOut()
		}
		c.werr = c.writeFailed(err)
		return 0, c.werr
	}
	n := 0
	for len(p) > 0 {
		k := min(len(p), c.maxMessage)
		if err := c.wire.writeMessage(p[:k], c.client); err != nil {
			c.werr = c.writeFailed(err)
			return n, c.werr
		}
		n += k
		p = p[k:]
		if c.wire.takeCut() {
			// The message is accepted: its rest goes out before the next one.
			return n, c.timedOut()
		}
	}
	return n, nil
}

// timedOut is the error of a Write that its deadline stopped: net.ErrClosed if the
// connection is closing meanwhile (Close, or a refused message: the close handshake is
// bounded by the write deadline, which a Write blocked beside it then sees).
func (c *Conn) timedOut() error {
	if c.closed.Load() || c.wire.isClosing() {
		return net.ErrClosed
	}
	return os.ErrDeadlineExceeded
}

func (c *Conn) writeFailed(err error) error {
	if isTimeout(err) || c.closed.Load() {
		return c.timedOut()
	}
	return fmt.Errorf("ws: write: %w", err)
}

// Close sends a close frame and waits for the peer's, for at most Config.CloseTimeout,
// then closes the connection. It returns an error wrapping net.ErrClosed if called again.
func (c *Conn) Close() error {
	if c.closed.Swap(true) {
		return fmt.Errorf("ws: close: %w", net.ErrClosed)
	}
	c.shut(websocket.StatusNormalClosure, "")
	return nil
}

// shut runs the close handshake with code and reason within Config.CloseTimeout, or
// closes at once if the write deadline has passed already.
func (c *Conn) shut(code websocket.StatusCode, reason string) {
	if c.wire.beginClose(c.closeTimeout) {
		_ = c.ws.Close(code, reason)
	} else {
		_ = c.ws.CloseNow()
	}
}

// SetDeadline sets the read and write deadlines.
func (c *Conn) SetDeadline(t time.Time) error {
	if err := c.wire.setReadDeadline(t); err != nil {
		return err
	}
	return c.wire.setWriteDeadline(t)
}

// SetReadDeadline sets the deadline of blocked and future Reads.
func (c *Conn) SetReadDeadline(t time.Time) error { return c.wire.setReadDeadline(t) }

// SetWriteDeadline sets the deadline of blocked and future Writes.
func (c *Conn) SetWriteDeadline(t time.Time) error { return c.wire.setWriteDeadline(t) }
