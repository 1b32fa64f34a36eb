package portmap

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"sync/atomic"
	"time"
)

// Caps on what a UPnP device can make us read. A real IGD's description is 2 to 10 KB
// and a SOAP answer under 1 KB.
const (
	maxDescriptionBytes = 64 << 10
	maxSOAPBytes        = 16 << 10
	maxHeaderBytes      = 8 << 10
)

// httpNote records, for one request, why the pinned transport refused or cut it: goupnp
// formats the errors it returns with %v, so the cause travels beside the call instead,
// in the request's context. The fields are atomic because the transport dials on a
// goroutine of its own, which may still run when the request has returned.
type httpNote struct {
	untrusted atomic.Bool
	tooLarge  atomic.Bool
	timeout   atomic.Bool
	// unreachable: the connection failed (refused, no route) before any answer.
	unreachable atomic.Bool
}

type noteKey struct{}

func withNote(ctx context.Context) (context.Context, *httpNote) {
	n := new(httpNote)
	return context.WithValue(ctx, noteKey{}, n), n
}

func noteOf(ctx context.Context) *httpNote {
	if n, ok := ctx.Value(noteKey{}).(*httpNote); ok {
		return n
	}
	return new(httpNote) // a request made without a note: record into nothing
}

// err turns a failed call into this package's error; call names what was attempted.
func (n *httpNote) err(call string, err error) error {
	switch {
	case n.untrusted.Load():
		return fmt.Errorf("%w: upnp %s", ErrUntrustedGateway, call)
	case n.tooLarge.Load():
		return fmt.Errorf("%w: upnp %s", ErrTooLarge, call)
	case n.timeout.Load():
		return fmt.Errorf("%w: upnp %s", ErrTimeout, call)
	case n.unreachable.Load():
		return fmt.Errorf("%w: upnp %s: %v", ErrUnreachable, call, err)
	}
	return fmt.Errorf("%w: upnp %s: %v", ErrBadResponse, call, err)
}

// gatewayTransport sends requests to one host only, cuts bodies at a size, and records
// why in the request's httpNote.
type gatewayTransport struct {
	host    netip.Addr
	maxBody int64
	next    http.RoundTripper
}

func (t *gatewayTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	note := noteOf(req.Context())
	ip, err := netip.ParseAddr(req.URL.Hostname())
	if err != nil || ip.Unmap() != t.host || req.URL.Scheme != "http" {
		note.untrusted.Store(true)
		if req.Body != nil {
			req.Body.Close()
		}
		return nil, fmt.Errorf("%w: %s", ErrUntrustedGateway, req.URL.Redacted())
	}
	resp, err := t.next.RoundTrip(req)
	if err != nil {
		if isTimeout(err) || pastDeadline(req.Context()) {
			note.timeout.Store(true)
		} else if !note.untrusted.Load() {
			note.unreachable.Store(true)
		}
		return nil, err
	}
	resp.Body = &cappedBody{rc: resp.Body, left: t.maxBody, note: note, ctx: req.Context()}
	return resp, nil
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout())
}

// pastDeadline reports whether ctx's deadline has passed. http.Client enforces its
// Timeout on a RoundTripper it does not know (ours) both through the request context's
// deadline and by closing Request.Cancel; when the channel wins, the inner transport
// reports a bare "request canceled" that is no timeout by its type, so the clock decides.
func pastDeadline(ctx context.Context) bool {
	d, ok := ctx.Deadline()
	return ok && !time.Now().Before(d)
}

// cappedBody fails a read that would go past the cap, rather than truncating silently
// (a truncated XML document could still decode).
type cappedBody struct {
	rc   io.ReadCloser
	left int64
	note *httpNote
	ctx  context.Context // the request's, whose deadline the client's Timeout set
}

func (b *cappedBody) Read(p []byte) (int, error) {
	if b.left <= 0 {
		// One byte more tells a body of exactly the cap from a longer one.
		var one [1]byte
		n, err := b.rc.Read(one[:])
		if n > 0 {
			b.note.tooLarge.Store(true)
			return 0, ErrTooLarge
		}
		return 0, err
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.rc.Read(p)
	b.left -= int64(n)
	if err != nil && err != io.EOF && (isTimeout(err) || pastDeadline(b.ctx)) {
		b.note.timeout.Store(true)
	}
	return n, err
}

func (b *cappedBody) Close() error { return b.rc.Close() }

// newGatewayClient returns an HTTP client that talks only to host, reads at most
// maxBody bytes of a body, ends each request (body included) within timeout, follows no
// redirect, uses no proxy from the environment and keeps no idle connection (so that no
// goroutine outlives a request).
func newGatewayClient(host netip.Addr, timeout time.Duration, maxBody int64) *http.Client {
	dialer := &net.Dialer{Timeout: timeout}
	tr := &http.Transport{
		Proxy: nil,
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			ap, err := netip.ParseAddrPort(addr)
			if err != nil || ap.Addr().Unmap() != host {
				noteOf(ctx).untrusted.Store(true)
				return nil, fmt.Errorf("%w: dial %s", ErrUntrustedGateway, addr)
			}
			return dialer.DialContext(ctx, "tcp4", addr)
		},
		DisableKeepAlives:      true,
		ResponseHeaderTimeout:  timeout,
		MaxResponseHeaderBytes: maxHeaderBytes,
		DisableCompression:     true, // nothing to gain from gzip on a LAN; the cap counts decoded bytes
	}
	return &http.Client{
		Transport: &gatewayTransport{host: host, maxBody: maxBody, next: tr},
		Timeout:   timeout,
		CheckRedirect: func(req *http.Request, _ []*http.Request) error {
			noteOf(req.Context()).untrusted.Store(true)
			return fmt.Errorf("%w: redirect to %s", ErrUntrustedGateway, req.URL.Redacted())
		},
	}
}
