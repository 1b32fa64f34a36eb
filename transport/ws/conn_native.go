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
	"github.com/tendril-p2p/tendril/internal/deadline"
)

// connIO is a Conn's I/O natively: coder/websocket's Conn over a wire, whose deadlines
// are the Conn's (see wire). The wire reads and writes the data frames (readData,
// writeMessage) and answers pings; coder/websocket runs the close handshake, called with
// context.Background(), which it recognises as never ending and then sets up nothing per
// call.
type connIO struct {
	ws           *websocket.Conn
	wire         *wire
	maxMessage   int
	closeTimeout time.Duration
	client       bool        // the dialling side: its frames are masked
	closed       atomic.Bool // Close was called

	rmu  sync.Mutex
	rerr error // the read side's permanent error

	wmu  sync.Mutex
	werr error // the write side's permanent error
}

func newConn(ws *websocket.Conn, w *wire, cfg *Config, client bool, local, remote net.Addr, suffix string) *Conn {
	// coder/websocket reads no data message of ours; should it ever, the limit is ours.
	ws.SetReadLimit(int64(cfg.MaxMessage))
	w.fr.server, w.fr.maxMessage = !client, uint64(cfg.MaxMessage)
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
	if c.closed.Load() {
		c.rerr = net.ErrClosed
		return 0, c.rerr
	}
	n, err := c.wire.readData(p)
	if err != nil {
		return 0, c.readFailed(err)
	}
	return n, nil
}

// readFailed turns an error of the wire's readData into the Conn's: a timeout as it is,
// anything else permanent.
func (c *Conn) readFailed(err error) error {
	if c.closed.Load() {
		c.rerr = net.ErrClosed
		return c.rerr
	}
	if deadline.TimedOut(err) {
		return os.ErrDeadlineExceeded
	}
	var fe *frameError
	switch {
	case errors.As(err, &fe):
		c.rerr = fe.err
		reason := ""
		if fe.code == websocket.StatusProtocolError || fe.code == websocket.StatusPolicyViolation {
			reason = "tendril: " + fe.err.Error()
		}
		c.shut(fe.code, reason[:min(len(reason), maxControl-2)])
		return c.rerr
	case err == errPeerClose:
		// coder/websocket reads the close frame, checks it and answers it.
		_, _, err = c.ws.Reader(context.Background())
		if err == nil {
			err = errors.New("ws: a message after the peer's close frame")
		}
		err = c.closeError(err)
	case err == io.EOF || err == io.ErrUnexpectedEOF:
		// The TCP connection ended without a close frame: between messages (io.EOF), or
		// within one.
	default:
		err = fmt.Errorf("ws: read: %w", err)
	}
	c.rerr = err
	return err
}

// closeError is the Conn's read error for coder/websocket's after the peer's close frame.
func (c *Conn) closeError(err error) error {
	switch code := websocket.CloseStatus(err); {
	case code == websocket.StatusNormalClosure || code == websocket.StatusGoingAway:
		return io.EOF
	case code == websocket.StatusMessageTooBig:
		return fmt.Errorf("%w: the peer refused a message of ours: %w", ErrMessageTooBig, err)
	case code != -1:
		return fmt.Errorf("ws: closed by the peer: %w", err)
	case c.closed.Load():
		return net.ErrClosed
	}
	return fmt.Errorf("ws: read: %w", err)
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
		if deadline.TimedOut(err) {
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
	if deadline.TimedOut(err) || c.closed.Load() {
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
