package tendril

// Request/response: a request protocol (Protocol.RequestHandler) answers each request on a
// stream of its own. docs/protocol.md, "Requests", has the wire format.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"time"

	"github.com/tendril-p2p/tendril/protocol"
)

// RequestHandler answers the requests of a request-mode protocol. ServeRequest is called
// on a goroutine of its own for each request, concurrently; its Context's Done closes when
// the requester gives up (its context ends, or its session closes), so that long work can
// stop. What it returns is sent back: the reply, or an error whose text the requester gets
// in a *RequestError (do not put anything there the peer must not see). A handler may make
// requests itself, to this peer or others.
type RequestHandler interface {
	ServeRequest(c *Context, req []byte) (reply []byte, err error)
}

// RequestHandlerFunc adapts a function to RequestHandler.
type RequestHandlerFunc func(c *Context, req []byte) ([]byte, error)

// ServeRequest calls f.
func (f RequestHandlerFunc) ServeRequest(c *Context, req []byte) ([]byte, error) {
	return f(c, req)
}

// RequestError is the failure a peer's RequestHandler returned. It matches ErrRequestFailed.
type RequestError struct {
	// Reason is the text of the handler's error, at most MaxRequestErrorSize bytes.
	Reason string
}

func (e *RequestError) Error() string { return ErrRequestFailed.Error() + ": " + e.Reason }

// Is makes errors.Is(err, ErrRequestFailed) true.
func (e *RequestError) Is(target error) bool { return target == ErrRequestFailed }

// MaxRequestErrorSize bounds the reason a RequestHandler's error sends back; longer texts are
// cut.
const MaxRequestErrorSize = 1024

// Reply status bytes (docs/protocol.md, "Requests").
const (
	replyOK     = 0
	replyFailed = 1
)

// Request sends req on a new stream of the named request protocol and returns the peer's
// reply. It waits under ctx, and at most Config.RequestTimeout if ctx has no deadline; when
// it gives up (ctx ends) the stream is reset, which ends the peer's work on it. At most
// Config.MaxRequests requests of this session are in flight at once; beyond, Request fails
// at once with ErrTooManyRequests (back off and retry, as after Send's ErrSessionBlocked):
// waiting could deadlock handlers that make requests themselves. The protocol must be
// registered here with a RequestHandler or with no handler at all (a protocol this node
// only requests). It is safe to call from any handler.
//
// Errors: a *RequestError (ErrRequestFailed) when the peer's handler failed; ErrNoReply
// when the peer ended the request without a reply (its session closing, its handler
// panicking); ErrTooManyRequests; a refusal
// wrapping protocol.ErrUnknownProtocol or protocol.ErrNoCommonVersion when the peer does
// not serve the protocol; ErrMessageTooLarge for a request or reply above MaxMessageSize;
// ctx's error, or context.DeadlineExceeded after RequestTimeout; ErrSessionClosed when the
// session ends first.
//
// With one version listed, the request travels with the stream's opening and the
// negotiation, and the reply with the answer: one round trip. With several, the
// negotiation takes a round trip of its own first.
func (s *Session) Request(ctx context.Context, name string, req []byte) ([]byte, error) {
	p := s.svc.protocol(name)
	switch {
	case p == nil:
		return nil, fmt.Errorf("%w: %q", ErrUnknownProtocol, name)
	case p.Handler != nil || p.StreamHandler != nil:
		return nil, fmt.Errorf("tendril: %q is not a request protocol", name)
	case !s.allows(p):
		return nil, fmt.Errorf("%w: %q", ErrInsecureSession, name)
	case len(req) > s.svc.maxMessage(p):
		return nil, fmt.Errorf("%w: request of %d > %d bytes", ErrMessageTooLarge, len(req), s.svc.maxMessage(p))
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, s.svc.cfg.RequestTimeout)
		defer cancel()
	}
	// Beyond MaxRequests the request fails rather than waits: a handler making requests
	// while the requests that called it hold every slot would wait for itself.
	if n := s.requests.Add(1); int(n) > s.svc.cfg.MaxRequests {
		s.requests.Add(-1)
		return nil, fmt.Errorf("tendril: request %s: %w (%d in flight)", name, ErrTooManyRequests, s.svc.cfg.MaxRequests)
	}
	defer s.requests.Add(-1)
	// The acceptor's answer comes with the reply: it may take as long as the request does.
	st, _, err := s.openStreamWait(ctx, p, 0)
	if err != nil {
		return nil, err
	}
	defer st.Close()
	// Giving up resets the stream: the peer's handler sees its Context end.
	stop := context.AfterFunc(ctx, func() { _ = st.SetDeadline(aLongTimeAgo) })
	defer stop()
	dl, _ := ctx.Deadline()
	_ = st.SetDeadline(dl)
	reply, err := exchange(st, req, s.svc.maxMessage(p))
	if err != nil {
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() && !time.Now().Before(dl) {
			<-ctx.Done() // the stream's deadline is ctx's: ctx ends with it, if not already
		}
		if ctx.Err() != nil {
			resetStream(st)
			return nil, fmt.Errorf("tendril: request %s: %w", name, ctx.Err())
		}
		if s.mux.IsClosed() {
			return nil, fmt.Errorf("tendril: request %s: %w: %w", name, ErrSessionClosed, err)
		}
		return nil, fmt.Errorf("tendril: request %s: %w", name, err)
	}
	return reply, nil
}

// aLongTimeAgo is a deadline in the past: it wakes blocked reads and writes at once.
var aLongTimeAgo = time.Unix(1, 0)

// resetStream resets a stream returned by openStream (lazily negotiated or not).
func resetStream(st Stream) {
	if r, ok := st.(interface{ Reset() error }); ok {
		_ = r.Reset()
	}
}

// exchange writes a request on st and its end, in one frame with the stream's opening when
// it can, and reads the reply.
func exchange(st Stream, req []byte, maxMsg int) ([]byte, error) {
	msg := protocol.AppendFrame(make([]byte, 0, protocol.MessageHeaderSize+len(req)), req)
	if err := writeFinal(st, msg); err != nil {
		return nil, err
	}
	var status [1]byte
	if _, err := io.ReadFull(st, status[:]); err != nil {
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return nil, ErrNoReply
		}
		return nil, err
	}
	switch status[0] {
	case replyOK:
		return protocol.NewReader(st, maxMsg).ReadMessageAlloc()
	case replyFailed:
		reason, err := protocol.NewReader(st, MaxRequestErrorSize).ReadMessageAlloc()
		if err != nil {
			return nil, err
		}
		return nil, &RequestError{Reason: string(reason)}
	}
	return nil, fmt.Errorf("%w: reply status %d", protocol.ErrMalformed, status[0])
}

// writeFinal writes p and half-closes w: in one frame if w can (mux.Stream, and a lazily
// negotiated stream over one), else a Write and a CloseWrite.
func writeFinal(w net.Conn, p []byte) error {
	if fw, ok := w.(interface{ WriteFinal([]byte) (int, error) }); ok {
		_, err := fw.WriteFinal(p)
		return err
	}
	if _, err := w.Write(p); err != nil {
		return err
	}
	if cw, ok := w.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}

// requestServer serves a request protocol's streams: it reads the request, calls the
// handler, and writes what it returned.
type requestServer struct {
	h   RequestHandler
	svc *Service
}

func (rs requestServer) ServeStream(c *Context, version string, st net.Conn) {
	cfg := &rs.svc.cfg
	// The negotiation answer, held back to leave with the reply (acceptProtocol), goes in
	// front of whatever is written, and with the end of the stream: one frame.
	var out []byte
	if c.ps.answerHeld {
		out = protocol.AppendAccept(make([]byte, 0, 64), version)
	}
	// A requester that stops reading holds the handler at most this long.
	defer func() {
		_ = st.SetWriteDeadline(time.Now().Add(cfg.NegotiationTimeout))
		_ = writeFinal(st, out)
	}()
	// The request is bounded in size and in time, as a negotiation is.
	_ = st.SetReadDeadline(time.Now().Add(cfg.NegotiationTimeout))
	limit := rs.svc.maxMessage(c.ps.proto)
	req, err := protocol.NewReader(st, limit).ReadMessageAlloc()
	if err != nil {
		return // the answer alone, and the end: the requester reads ErrNoReply
	}
	_ = st.SetReadDeadline(time.Time{})
	reply, herr := rs.h.ServeRequest(c, req)
	select {
	case <-c.Done():
		return // the requester gave up (or the session is going): nobody reads a reply
	default:
	}
	switch {
	case herr != nil:
		reason := herr.Error()
		reason = reason[:min(len(reason), MaxRequestErrorSize)]
		out = protocol.AppendFrame(append(out, replyFailed), []byte(reason))
	case len(reply) > limit:
		reason := fmt.Sprintf("reply of %d bytes above the limit", len(reply))
		out = protocol.AppendFrame(append(out, replyFailed), []byte(reason))
	default:
		out = protocol.AppendFrame(append(out, replyOK), reply)
	}
}
