package protocol

import (
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"

	"github.com/tendril-p2p/tendril/internal/deadline"
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
//
// Its deadlines are those of a net.Conn, the negotiation included: a deadline of the
// caller's that passes while the request is sent or the answer awaited fails that call
// with the connection's timeout error and leaves the rest of the negotiation to the next
// call; only the negotiation's own timeout ends it (ErrNegotiationTimeout).
type LazyConn struct {
	net.Conn
	version string
	timeout time.Duration

	wmu        sync.Mutex
	req        []byte // what is left to send of the request, until it is all sent
	unanswered int    // bytes written before the answer was read, request included

	rmu      sync.Mutex
	answered bool
	ans      []byte   // the answer as far as it has been read, in ansBuf unless longer
	ansBuf   [32]byte // room for an acceptance: reading one allocates nothing

	mu  sync.Mutex
	rdl time.Time // the caller's read deadline
	wdl time.Time // the caller's write deadline
	err error     // sticky: the refusal, or why the answer could not be read
	// answerBy is when the answer is due (the negotiation timeout from the first wait for
	// it; zero for none). awaiting is set while a call reads the answer, forWrite if that
	// call is a Write: the connection's read deadline is then the earlier of answerBy and
	// that call's own deadline. sending is set while a Read sends the request: the
	// connection's write deadline is then the Read's.
	answerBy          time.Time
	awaiting, sending bool
	forWrite          bool
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
// arrive within timeout of the first call that waits for it, else ErrNegotiationTimeout,
// from that call and every one after it. A deadline of the caller's that passes first
// fails only the call waiting, with the connection's timeout error, as any net.Conn
// deadline does; the next call waits on. Use Negotiate to offer several versions or to
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

// sendRequest writes what is left of the request, if anything, in front of first (which
// may be nil); took reports whether first went with it, n how many of its bytes did (all,
// unless a deadline cut the write).
func (c *LazyConn) sendRequest(first []byte) (n int, took bool, err error) {
	return c.sendRequestWith(first, c.Conn.Write, false)
}

// sendRequestWith is sendRequest writing with write. The request is kept until all of it
// is out: a write a deadline cut leaves the rest for the next call, which sends it before
// anything else. forRead is set when a Read sends it: the Read's deadline bounds the write
// rather than the write deadline (a Write's timeout does not fail the Reads after it). No
// other write is in progress then: data is written only once the request is out.
func (c *LazyConn) sendRequestWith(first []byte, write func([]byte) (int, error), forRead bool) (n int, took bool, err error) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if c.req == nil {
		return 0, false, nil
	}
	if forRead {
		c.mu.Lock()
		c.sending = true
		err := c.Conn.SetWriteDeadline(earlier(c.rdl, c.answerBy))
		c.mu.Unlock()
		defer func() {
			c.mu.Lock()
			c.sending = false
			_ = c.Conn.SetWriteDeadline(c.wdl)
			c.mu.Unlock()
		}()
		if err != nil {
			return 0, false, fmt.Errorf("protocol: setting deadline: %w", err)
		}
	}
	b := c.req
	if len(first) <= lazyCoalesce {
		b = append(b, first...)
		took = true
	}
	m, err := write(b)
	c.unanswered += m
	if m >= len(c.req) {
		n = m - len(c.req)
		c.req = nil
	} else {
		c.req = c.req[m:]
	}
	if err != nil {
		return n, took, ioError("sending negotiation request", err)
	}
	return n, took, nil
}

// ioError wraps an I/O error of the negotiation, except a timeout of the caller's deadline,
// which is returned as the connection returned it: a net.Error, as a net.Conn's timeouts.
func ioError(doing string, err error) error {
	if deadline.TimedOut(err) {
		return err
	}
	return fmt.Errorf("protocol: %s: %w", doing, err)
}

// Write writes p; the first Write carries the request in front of it. Beyond
// MaxUnanswered bytes written before the answer, it reads the answer first: a refusal is
// its error.
func (c *LazyConn) Write(p []byte) (int, error) {
	if err := c.failed(); err != nil {
		return 0, err
	}
	n, took, err := c.sendRequest(p)
	if err != nil || took {
		return n, err
	}
	for len(p) > 0 {
		k := c.unansweredRoom(len(p))
		if k == 0 {
			if err := c.awaitAnswer(true); err != nil {
				return n, err
			}
			continue
		}
		w, err := c.Conn.Write(p[:k])
		n += w
		if err != nil {
			return n, c.refusalOr(err)
		}
		p = p[k:]
	}
	return n, nil
}

// refusalOr returns the acceptor's refusal, if it refused, in place of err, the failure of
// a write made before the answer was read. An acceptor that refuses closes the stream with
// the opener's data unread, which resets it (as TCP does), so the opener's next write fails
// with the reset while the refusal that explains it is still unread, ahead of the reset. A
// timeout is returned as it is: the stream is intact and the answer may still be on its way.
func (c *LazyConn) refusalOr(err error) error {
	if deadline.TimedOut(err) {
		return err
	}
	var refused *RefusedError
	if aerr := c.awaitAnswer(true); errors.As(aerr, &refused) {
		return aerr
	}
	return err
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
	if fw, ok := c.Conn.(finalWriter); ok && len(p) <= lazyCoalesce {
		if n, took, err := c.sendRequestWith(p, fw.WriteFinal, false); err != nil || took {
			return n, err
		}
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
	if err := c.awaitAnswer(false); err != nil {
		return 0, err
	}
	return c.Conn.Read(p)
}

// awaitAnswer reads the acceptor's answer unless it has been read, and returns the
// refusal or failure if there was one. forWrite is set when a Write waits: its write
// deadline bounds the wait, rather than the read deadline.
func (c *LazyConn) awaitAnswer(forWrite bool) error {
	if err := c.failed(); err != nil {
		return err
	}
	c.rmu.Lock()
	defer c.rmu.Unlock()
	if !c.answered {
		if err := c.readAnswer(forWrite); err != nil {
			if deadline.TimedOut(err) && !errors.Is(err, ErrNegotiationTimeout) {
				if !c.answerDue() {
					return err // the caller's deadline: the negotiation goes on at the next call
				}
				err = fmt.Errorf("%w: %w", ErrNegotiationTimeout, err)
			}
			return c.fail(err)
		}
		c.answered = true
		c.ans = nil
		c.wmu.Lock()
		c.unanswered = -1
		c.wmu.Unlock()
	}
	return nil
}

// answerDue reports whether the negotiation's own timeout has passed.
func (c *LazyConn) answerDue() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return !c.answerBy.IsZero() && !time.Now().Before(c.answerBy)
}

// readAnswer sends the request if needed and reads the answer, within the timeout (counted
// from the first call that waits) and the caller's deadline. c.rmu is held.
func (c *LazyConn) readAnswer(forWrite bool) error {
	c.mu.Lock()
	if c.answerBy.IsZero() && c.timeout > 0 {
		c.answerBy = time.Now().Add(c.timeout)
	}
	c.awaiting, c.forWrite = true, forWrite
	err := c.Conn.SetReadDeadline(c.answerDeadlineLocked())
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		_ = c.Conn.SetReadDeadline(c.rdl)
		c.awaiting = false
		c.mu.Unlock()
	}()
	if err != nil {
		return fmt.Errorf("protocol: setting deadline: %w", err)
	}
	if _, _, err := c.sendRequestWith(nil, c.Conn.Write, !forWrite); err != nil {
		return err
	}
	typ, body, err := c.readAnswerMsg()
	if err != nil {
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

// readAnswerMsg reads the answer into c.ans, going on from where a call a deadline
// interrupted left it. c.rmu is held.
func (c *LazyConn) readAnswerMsg() (typ byte, body []byte, err error) {
	if c.ans == nil {
		c.ans = c.ansBuf[:0]
	}
	need, doing := negHeaderSize, "reading negotiation header"
	for {
		if len(c.ans) >= negHeaderSize {
			t, n, err := parseNegotiationHeader(c.ans[:negHeaderSize])
			if err != nil {
				return 0, nil, err
			}
			typ, need, doing = t, negHeaderSize+n, "reading negotiation body"
			if len(c.ans) == need {
				return typ, c.ans[negHeaderSize:], nil
			}
			if cap(c.ans) < need {
				c.ans = append(make([]byte, 0, need), c.ans...)
			}
		}
		m, err := c.Conn.Read(c.ans[len(c.ans):need])
		c.ans = c.ans[:len(c.ans)+m]
		if err != nil && len(c.ans) < need {
			if err == io.EOF && len(c.ans) > 0 {
				err = io.ErrUnexpectedEOF
			}
			return 0, nil, ioError(doing, err)
		}
	}
}

// answerDeadlineLocked is the connection's read deadline while the answer is awaited: the
// earlier of the negotiation's and the waiting call's. c.mu is held.
func (c *LazyConn) answerDeadlineLocked() time.Time {
	if c.forWrite {
		return earlier(c.wdl, c.answerBy)
	}
	return earlier(c.rdl, c.answerBy)
}

// earlier returns the earlier of two deadlines, the zero time being none.
func earlier(a, b time.Time) time.Time {
	if a.IsZero() || !b.IsZero() && b.Before(a) {
		return b
	}
	return a
}

// CloseWrite sends the request if it has not been sent (the acceptor learns of the stream
// even if nothing was written), then half-closes the stream, if the underlying conn can.
func (c *LazyConn) CloseWrite() error {
	if _, _, err := c.sendRequest(nil); err != nil {
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
	defer c.mu.Unlock()
	c.rdl = t
	if c.sending {
		if err := c.Conn.SetWriteDeadline(earlier(t, c.answerBy)); err != nil {
			return err
		}
	}
	if c.awaiting {
		return c.Conn.SetReadDeadline(c.answerDeadlineLocked())
	}
	return c.Conn.SetReadDeadline(t)
}

// SetWriteDeadline sets the write deadline; while a Write awaits the answer, the earlier
// of it and the negotiation timeout applies to that wait.
func (c *LazyConn) SetWriteDeadline(t time.Time) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.wdl = t
	if c.awaiting && c.forWrite {
		if err := c.Conn.SetReadDeadline(c.answerDeadlineLocked()); err != nil {
			return err
		}
	}
	if c.sending {
		return nil // a Read sends the request under its own deadline, and restores this one
	}
	return c.Conn.SetWriteDeadline(t)
}

// SetDeadline sets the read and write deadlines.
func (c *LazyConn) SetDeadline(t time.Time) error {
	if err := c.SetReadDeadline(t); err != nil {
		return err
	}
	return c.SetWriteDeadline(t)
}
