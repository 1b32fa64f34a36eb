package protocol

import (
	"errors"
	"fmt"
	"net"
	"sync"
	"time"
)

// lazyCoalesce is the largest first write that is sent in one piece with the request.
const lazyCoalesce = 64 << 10

// MaxUnanswered is how many bytes, request included, a LazyConn writes before it has read
// the acceptor's answer; a Write beyond it waits for the answer, so that a refusal comes
// back as that Write's error rather than as a Write blocked for good on a stream nobody
// reads. It is the initial window of a yamux stream (256 KiB): an acceptor reads nothing
// of the data before it has answered, so no more could be in flight before the answer
// anyway, and waiting costs no round trip.
const MaxUnanswered = 256 << 10

// LazyConn is the opener's end of a stream negotiated lazily (see NegotiateLazy): the
// request goes out with the first data, and the answer is read before the first data the
// acceptor sends.
type LazyConn struct {
	net.Conn
	version string
	timeout time.Duration

	wmu        sync.Mutex
	req        []byte // the request, until it is sent
	unanswered int    // bytes written before the answer was read, request included

	rmu      sync.Mutex
	answered bool

	mu  sync.Mutex
	rdl time.Time // the caller's read deadline
	err error     // sticky: the refusal, or why the answer could not be read
}

// NegotiateLazy starts the opener's side of the negotiation without waiting for the
// acceptor's answer, as multistream-select's lazy mode does, so that a request sent right
// after opening costs no extra round trip. It offers exactly one version, which is
// therefore the version in use if the acceptor agrees.
//
// The request travels in front of the first data written on the returned conn (in the same
// Write, so in the same frame below), or is sent by the first Read or CloseWrite if they
// come first. The first Read reads and checks the answer before returning any of the
// acceptor's data, and so does a Write once MaxUnanswered bytes have gone out unanswered:
// a refusal is returned there, as a *RefusedError (errors.Is matches ErrUnknownProtocol or
// ErrNoCommonVersion), and by every Read and Write after it; data written before the
// refusal was known is discarded by the acceptor. A refused stream therefore fails the
// Read or the Write that waits for it, never leaving a Write blocked. The answer must
// arrive within timeout of that first Read (or before the caller's read deadline, if
// earlier), else ErrNegotiationTimeout. Use Negotiate to offer several versions or to
// know the outcome before writing.
func NegotiateLazy(conn net.Conn, name, version string, timeout time.Duration) (*LazyConn, error) {
	if !ValidName(name) {
		return nil, fmt.Errorf("%w: %q", ErrInvalidName, truncate(name))
	}
	if err := validateVersions([]string{version}); err != nil {
		return nil, err
	}
	req := appendRequest(make([]byte, 0, 64), name, []string{version})
	return &LazyConn{Conn: conn, version: version, timeout: timeout, req: req}, nil
}

// Version returns the version offered, the one in use unless the acceptor refuses.
func (c *LazyConn) Version() string { return c.version }

func (c *LazyConn) failed() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

func (c *LazyConn) fail(err error) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err == nil {
		c.err = err
	}
	return c.err
}

// sendRequest writes the request if it has not been sent, in front of first (which may be
// nil); it reports whether first went with it.
func (c *LazyConn) sendRequest(first []byte) (sentFirst bool, err error) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if c.req == nil {
		return false, nil
	}
	b := c.req
	if len(first) <= lazyCoalesce {
		b = append(b, first...)
		sentFirst = true
	}
	if _, err := c.Conn.Write(b); err != nil {
		return false, fmt.Errorf("protocol: sending negotiation request: %w", err)
	}
	c.unanswered = len(b)
	c.req = nil
	return sentFirst, nil
}

// Write writes p; the first Write carries the request in front of it. Beyond
// MaxUnanswered bytes written before the answer, it reads the answer first: a refusal is
// its error.
func (c *LazyConn) Write(p []byte) (int, error) {
	if err := c.failed(); err != nil {
		return 0, err
	}
	sent, err := c.sendRequest(p)
	if err != nil {
		return 0, err
	}
	if sent {
		return len(p), nil
	}
	n := 0
	for len(p) > 0 {
		k := c.unansweredRoom(len(p))
		if k == 0 {
			if err := c.awaitAnswer(); err != nil {
				return n, err
			}
			continue
		}
		w, err := c.Conn.Write(p[:k])
		n += w
		if err != nil {
			return n, err
		}
		p = p[k:]
	}
	return n, nil
}

// finalWriter is a conn that can write and half-close in one write (mux.Stream).
type finalWriter interface {
	WriteFinal(p []byte) (int, error)
}

// WriteFinal writes p and then half-closes the stream, as Write and CloseWrite do. When p is
// the first data and the conn below can write and half-close at once (a mux stream), the
// request, p and the end of the stream leave in one write: a request/response protocol's
// whole request is one frame.
func (c *LazyConn) WriteFinal(p []byte) (int, error) {
	if err := c.failed(); err != nil {
		return 0, err
	}
	if fw, ok := c.Conn.(finalWriter); ok {
		c.wmu.Lock()
		if c.req != nil && len(p) <= lazyCoalesce {
			b := append(c.req, p...)
			_, err := fw.WriteFinal(b)
			c.req = nil
			c.unanswered = len(b)
			c.wmu.Unlock()
			if err != nil {
				return 0, fmt.Errorf("protocol: sending negotiation request: %w", err)
			}
			return len(p), nil
		}
		c.wmu.Unlock()
	}
	n, err := c.Write(p)
	if err != nil {
		return n, err
	}
	return n, c.CloseWrite()
}

// unansweredRoom returns how much of a write of n bytes may go before the answer is read
// (n once it has been), and counts it as written.
func (c *LazyConn) unansweredRoom(n int) int {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if c.unanswered < 0 {
		return n // answered
	}
	k := min(n, MaxUnanswered-c.unanswered)
	c.unanswered += k
	return k
}

// Read reads the acceptor's data, after its answer.
func (c *LazyConn) Read(p []byte) (int, error) {
	if err := c.awaitAnswer(); err != nil {
		return 0, err
	}
	return c.Conn.Read(p)
}

// awaitAnswer reads the acceptor's answer unless it has been read, and returns the
// refusal or failure if there was one.
func (c *LazyConn) awaitAnswer() error {
	if err := c.failed(); err != nil {
		return err
	}
	c.rmu.Lock()
	defer c.rmu.Unlock()
	if !c.answered {
		if err := c.readAnswer(); err != nil {
			return c.fail(err)
		}
		c.answered = true
		c.wmu.Lock()
		c.unanswered = -1
		c.wmu.Unlock()
	}
	return nil
}

// readAnswer sends the request if needed and reads the answer, within the timeout.
func (c *LazyConn) readAnswer() error {
	if _, err := c.sendRequest(nil); err != nil {
		return err
	}
	c.mu.Lock()
	user := c.rdl
	c.mu.Unlock()
	dl := user
	if c.timeout > 0 {
		if own := time.Now().Add(c.timeout); dl.IsZero() || own.Before(dl) {
			dl = own
		}
	}
	if err := c.Conn.SetReadDeadline(dl); err != nil {
		return fmt.Errorf("protocol: setting deadline: %w", err)
	}
	var buf [MaxNegotiationSize]byte
	typ, body, err := readNegotiation(c.Conn, &buf)
	_ = c.Conn.SetReadDeadline(user)
	if err != nil {
		if isTimeout(err) && !errors.Is(err, ErrNegotiationTimeout) {
			return fmt.Errorf("%w: %w", ErrNegotiationTimeout, err)
		}
		return err
	}
	chosen, refused, err := decodeResponse(typ, body)
	switch {
	case err != nil:
		return err
	case refused != nil:
		return refused
	case CompareVersions(chosen, c.version) != 0:
		return fmt.Errorf("%w: peer chose version %q, which was not offered", ErrMalformed, chosen)
	}
	return nil
}

// CloseWrite sends the request if it has not been sent (the acceptor learns of the stream
// even if nothing was written), then half-closes the stream, if the underlying conn can.
func (c *LazyConn) CloseWrite() error {
	if _, err := c.sendRequest(nil); err != nil {
		return err
	}
	cw, ok := c.Conn.(interface{ CloseWrite() error })
	if !ok {
		return fmt.Errorf("protocol: %T cannot half-close", c.Conn)
	}
	return cw.CloseWrite()
}

// SetReadDeadline sets the read deadline; while the answer is awaited, the earlier of it
// and the negotiation timeout applies.
func (c *LazyConn) SetReadDeadline(t time.Time) error {
	c.mu.Lock()
	c.rdl = t
	c.mu.Unlock()
	return c.Conn.SetReadDeadline(t)
}

// SetDeadline sets the read and write deadlines.
func (c *LazyConn) SetDeadline(t time.Time) error {
	if err := c.SetReadDeadline(t); err != nil {
		return err
	}
	return c.Conn.SetWriteDeadline(t)
}
