//go:build !js

package ws

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/textproto"
	"strconv"
	"strings"
	"sync"

	"github.com/coder/websocket"

	"github.com/tendril-p2p/tendril/transport"
)

// Buffer sizes. The server side's bufio pair lives as long as the connection (coder/
// websocket keeps it): small. coder/websocket reads through the reader only in the close
// handshake (the wire reads the data frames), frames of at most 14 + 125 bytes but for
// data it drops; it writes only control frames through the writer (at most 131 bytes:
// data frames are the wire's), and the HTTP answer goes through it once. requestBuffer is
// pooled and given back once the request is read.
const (
	serverReadBuffer  = 256
	serverWriteBuffer = 256
	requestBuffer     = 4 << 10
)

// acceptOptions are those of every upgrade. Any origin is accepted: a listener is a p2p
// endpoint, not a web application. Origin checks protect a server that trusts its
// browser clients' ambient authority (cookies, HTTP authentication, a client's network
// position) from pages of other origins using it; tendril authenticates each peer in its
// own handshake, after the upgrade, and nothing the browser attaches to the request is
// ever looked at. Compression stays off: secio's records are encrypted, so incompressible.
var acceptOptions = websocket.AcceptOptions{
	Subprotocols:       []string{Subprotocol},
	InsecureSkipVerify: true,
	CompressionMode:    websocket.CompressionDisabled,
}

// refusal is why a request is not upgraded: the HTTP status answered, headers to add, and
// the reason, which is both the body of the answer and the error.
type refusal struct {
	status int
	header [][2]string
	reason string
}

// checkRequest checks an upgrade request before anything is done for it, so that every
// refusal has its status and reason here (coder/websocket's Accept checks the same again,
// and then finds nothing to refuse).
func checkRequest(r *http.Request, path string) *refusal {
	upgrade := hasToken(r.Header, "Connection", "upgrade") && hasToken(r.Header, "Upgrade", "websocket")
	switch {
	case r.URL.Path != path:
		return &refusal{status: http.StatusNotFound, reason: "ws: no WebSocket endpoint at " + strconv.Quote(r.URL.Path)}
	case !r.ProtoAtLeast(1, 1) || !upgrade:
		return &refusal{
			status: http.StatusUpgradeRequired,
			header: [][2]string{{"Upgrade", "websocket"}, {"Connection", "Upgrade"}},
			reason: "ws: a WebSocket upgrade (HTTP/1.1, Connection: Upgrade, Upgrade: websocket) is required",
		}
	case r.Method != http.MethodGet:
		return &refusal{status: http.StatusMethodNotAllowed, header: [][2]string{{"Allow", "GET"}}, reason: "ws: the upgrade request must be a GET"}
	case r.Header.Get("Sec-WebSocket-Version") != "13":
		return &refusal{
			status: http.StatusUpgradeRequired,
			header: [][2]string{{"Sec-WebSocket-Version", "13"}},
			reason: "ws: only WebSocket version 13 is spoken",
		}
	case !validKey(r.Header.Values("Sec-WebSocket-Key")):
		return &refusal{status: http.StatusBadRequest, reason: "ws: Sec-WebSocket-Key must be one base64 16-byte key"}
	case !hasToken(r.Header, "Sec-WebSocket-Protocol", Subprotocol):
		// A valid upgrade to a protocol this endpoint does not speak: 400, not 426, which
		// would tell the client to switch protocols.
		return &refusal{status: http.StatusBadRequest, reason: "ws: subprotocol " + strconv.Quote(Subprotocol) + " required"}
	case r.ContentLength != 0 || len(r.TransferEncoding) > 0:
		return &refusal{status: http.StatusBadRequest, reason: "ws: an upgrade request has no body"}
	}
	return nil
}

// answer writes the refusal to w.
func (f *refusal) answer(w http.ResponseWriter) {
	for _, h := range f.header {
		w.Header().Set(h[0], h[1])
	}
	http.Error(w, f.reason, f.status)
}

func (f *refusal) error(from string) error {
	return fmt.Errorf("ws: upgrade from %s: %w: %d %s", from, transport.ErrBadHeader, f.status, f.reason)
}

func validKey(keys []string) bool {
	if len(keys) != 1 {
		return false
	}
	b, err := base64.StdEncoding.DecodeString(strings.TrimSpace(keys[0]))
	return err == nil && len(b) == 16
}

// hasToken reports whether header key of h lists token (case-insensitive), in any of its
// values.
func hasToken(h http.Header, key, token string) bool {
	for _, v := range h[textproto.CanonicalMIMEHeaderKey(key)] {
		for t := range strings.SplitSeq(v, ",") {
			if strings.EqualFold(strings.TrimSpace(t), token) {
				return true
			}
		}
	}
	return false
}

// rawResponse is the http.ResponseWriter and http.Hijacker of an upgrade that a Listener
// reads off a connection itself, with no http.Server. websocket.Accept sets the headers,
// writes 101 and hijacks: Hijack writes the status line and headers and hands the
// connection over with a small bufio pair. A refusal (http.Error, from checkRequest or
// Accept) is written whole by finish, with Content-Length and Connection: close, as the
// connection is closed after it.
type rawResponse struct {
	conn     net.Conn // where the answer goes
	wire     *wire    // what Hijack hands over: conn, under the frames from now on
	h        http.Header
	status   int
	body     bytes.Buffer
	hijacked bool
}

func (w *rawResponse) Header() http.Header { return w.h }

func (w *rawResponse) WriteHeader(status int) {
	if w.status == 0 {
		w.status = status
	}
}

func (w *rawResponse) Write(b []byte) (int, error) {
	w.WriteHeader(http.StatusOK)
	if w.body.Len() < 1024 {
		w.body.Write(b[:min(len(b), 1024-w.body.Len())])
	}
	return len(b), nil
}

func (w *rawResponse) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	if w.status != http.StatusSwitchingProtocols || w.hijacked {
		return nil, nil, errors.New("ws: hijack without a 101 answer")
	}
	w.hijacked = true
	// The head goes to conn itself, not through the wire, which takes what it writes
	// for frames.
	bw := bufio.NewWriterSize(w.conn, serverWriteBuffer)
	writeHead(bw, w.status, w.h)
	if err := bw.Flush(); err != nil {
		return nil, nil, err
	}
	bw.Reset(w.wire)
	return w.wire, bufio.NewReadWriter(bufio.NewReaderSize(w.wire, serverReadBuffer), bw), nil
}

// finish writes a refusal answered through w.
func (w *rawResponse) finish() error {
	if w.hijacked || w.status == 0 {
		return nil
	}
	w.h.Set("Content-Length", strconv.Itoa(w.body.Len()))
	w.h.Set("Connection", "close")
	var b bytes.Buffer
	bw := bufio.NewWriterSize(&b, 512)
	writeHead(bw, w.status, w.h)
	bw.Write(w.body.Bytes())
	bw.Flush()
	_, err := w.conn.Write(b.Bytes())
	return err
}

func writeHead(bw *bufio.Writer, status int, h http.Header) {
	bw.WriteString("HTTP/1.1 ")
	bw.WriteString(strconv.Itoa(status))
	bw.WriteByte(' ')
	bw.WriteString(http.StatusText(status))
	bw.WriteString("\r\n")
	h.Write(bw)
	bw.WriteString("\r\n")
}

// boundedReader reads at most n bytes of an HTTP head off a connection, and keeps the
// error that ended the reading: bufio and textproto return a partial line as a whole one
// when a read fails (a deadline in the middle of a trickled request line), and the
// parse error that follows would hide the timeout.
type boundedReader struct {
	r   io.Reader
	n   int64
	err error
}

func (b *boundedReader) Read(p []byte) (int, error) {
	if b.n <= 0 {
		return 0, io.EOF
	}
	if int64(len(p)) > b.n {
		p = p[:b.n]
	}
	n, err := b.r.Read(p)
	b.n -= int64(n)
	if err != nil && b.err == nil {
		b.err = err
	}
	return n, err
}

// requestReaders holds the bufio.Readers that upgrade requests are read with.
var requestReaders sync.Pool

func getRequestReader(r io.Reader) *bufio.Reader {
	if br, ok := requestReaders.Get().(*bufio.Reader); ok {
		br.Reset(r)
		return br
	}
	return bufio.NewReaderSize(r, requestBuffer)
}

func putRequestReader(br *bufio.Reader) {
	br.Reset(nil)
	requestReaders.Put(br)
}
