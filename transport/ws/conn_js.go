//go:build js

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

// connIO is a Conn's I/O in a browser: coder/websocket over the browser's WebSocket,
// which delivers whole messages and whose Read closes the connection when its context
// ends. So a goroutine of the Conn's own reads the messages with a context that never
// ends and hands them over one at a time, and the deadlines are timers that Read and
// Write wait on beside it. A goroutine per connection is cheap in a browser, which holds
// few.
type connIO struct {
	ws           *websocket.Conn
	maxMessage   int
	closeTimeout time.Duration
	closed       atomic.Bool
	done         chan struct{} // closed by Close: the reading goroutine stops

	msgs chan message // from the reading goroutine
	rmu  sync.Mutex
	cur  []byte // what is left of the message being read
	rerr error  // the read side's permanent error

	wmu  sync.Mutex
	werr error

	rd, wd deadline
}

// message is what the reading goroutine hands over: a message, or the error that ended
// the reading.
type message struct {
	typ websocket.MessageType
	b   []byte
	err error
}

func newConn(ws *websocket.Conn, cfg *Config, remote net.Addr, suffix string) *Conn {
	ws.SetReadLimit(int64(cfg.MaxMessage))
	c := &Conn{
		connIO: connIO{
			ws: ws, maxMessage: cfg.MaxMessage, closeTimeout: cfg.CloseTimeout,
			done: make(chan struct{}), msgs: make(chan message),
			rd: makeDeadline(), wd: makeDeadline(),
		},
		local: browserAddr{}, remote: remote, suffix: suffix,
	}
	go c.readLoop()
	return c
}

func (c *Conn) readLoop() {
	for {
		typ, b, err := c.ws.Read(context.Background())
		select {
		case c.msgs <- message{typ, b, err}:
		case <-c.done:
			return
		}
		if err != nil {
			return
		}
	}
}

// Read reads the bytes of the binary messages received, in order.
func (c *Conn) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	c.rmu.Lock()
	defer c.rmu.Unlock()
	for len(c.cur) == 0 {
		if c.rerr != nil {
			return 0, c.rerr
		}
		select {
		case m := <-c.msgs:
			if err := c.take(m); err != nil {
				c.rerr = err
				return 0, err
			}
		case <-c.rd.wait():
			return 0, os.ErrDeadlineExceeded
		case <-c.done:
			return 0, net.ErrClosed
		}
	}
	n := copy(p, c.cur)
	c.cur = c.cur[n:]
	return n, nil
}

// take makes m the message being read, or returns why reading ends.
func (c *Conn) take(m message) error {
	if m.err != nil {
		switch code := websocket.CloseStatus(m.err); {
		case c.closed.Load():
			return net.ErrClosed
		case errors.Is(m.err, websocket.ErrMessageTooBig):
			return fmt.Errorf("%w: longer than %d bytes", ErrMessageTooBig, c.maxMessage)
		case code == websocket.StatusNormalClosure || code == websocket.StatusGoingAway:
			return io.EOF
		case code == websocket.StatusMessageTooBig:
			return fmt.Errorf("%w: the peer refused a message of ours: %w", ErrMessageTooBig, m.err)
		}
		return fmt.Errorf("ws: read: %w", m.err)
	}
	if m.typ != websocket.MessageBinary {
		go c.ws.Close(websocket.StatusPolicyViolation, "tendril: binary messages only")
		return ErrTextMessage
	}
	c.cur = m.b
	return nil
}

// Write sends p as one binary message, or several of at most Config.MaxMessage bytes.
// The browser queues them: Write does not wait for the network.
func (c *Conn) Write(p []byte) (int, error) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if c.werr != nil {
		return 0, c.werr
	}
	if c.closed.Load() {
		return 0, net.ErrClosed
	}
	select {
	case <-c.wd.wait():
		return 0, os.ErrDeadlineExceeded
	default:
	}
	n := 0
	for len(p) > 0 {
		k := min(len(p), c.maxMessage)
		if err := c.ws.Write(context.Background(), websocket.MessageBinary, p[:k]); err != nil {
			c.werr = fmt.Errorf("ws: write: %w", err)
			return n, c.werr
		}
		n += k
		p = p[k:]
	}
	return n, nil
}

// Close closes the WebSocket with status 1000, waiting for the browser to finish the
// close handshake for at most Config.CloseTimeout. It returns an error wrapping
// net.ErrClosed if called again.
func (c *Conn) Close() error {
	if c.closed.Swap(true) {
		return fmt.Errorf("ws: close: %w", net.ErrClosed)
	}
	close(c.done)
	ended := make(chan struct{})
	go func() {
		defer close(ended)
		_ = c.ws.Close(websocket.StatusNormalClosure, "")
	}()
	t := time.NewTimer(c.closeTimeout)
	defer t.Stop()
	select {
	case <-ended:
	case <-t.C:
	}
	return nil
}

// SetDeadline sets the read and write deadlines.
func (c *Conn) SetDeadline(t time.Time) error {
	c.rd.set(t)
	c.wd.set(t)
	return nil
}

// SetReadDeadline sets the deadline of blocked and future Reads.
func (c *Conn) SetReadDeadline(t time.Time) error {
	c.rd.set(t)
	return nil
}

// SetWriteDeadline sets the deadline of future Writes (a Write does not block).
func (c *Conn) SetWriteDeadline(t time.Time) error {
	c.wd.set(t)
	return nil
}

// deadline is a deadline that blocked calls wait on, as in net.Pipe: a channel closed by
// a timer when it passes.
type deadline struct {
	mu     sync.Mutex
	timer  *time.Timer
	cancel chan struct{}
}

func makeDeadline() deadline { return deadline{cancel: make(chan struct{})} }

func (d *deadline) set(t time.Time) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.timer != nil && !d.timer.Stop() {
		<-d.cancel // the timer fired: wait for it to have closed cancel
	}
	d.timer = nil
	closed := isClosed(d.cancel)
	if t.IsZero() {
		if closed {
			d.cancel = make(chan struct{})
		}
		return
	}
	if dur := time.Until(t); dur > 0 {
		if closed {
			d.cancel = make(chan struct{})
		}
		cancel := d.cancel
		d.timer = time.AfterFunc(dur, func() { close(cancel) })
		return
	}
	if !closed {
		close(d.cancel)
	}
}

func (d *deadline) wait() chan struct{} {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.cancel
}

func isClosed(c chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// browserAddr is the local address of a connection a browser made: it does not say which.
type browserAddr struct{}

func (browserAddr) Network() string { return "ws" }
func (browserAddr) String() string  { return "browser" }
