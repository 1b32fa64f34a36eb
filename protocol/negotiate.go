package protocol

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"time"

	"github.com/tendril-p2p/tendril/internal/deadline"
)

// Negotiation wire constants (see docs/protocol.md).
const (
	// MaxNegotiationSize caps one negotiation message, header included.
	MaxNegotiationSize = 1024
	// MaxReasonLen caps the free-text reason of a refusal.
	MaxReasonLen = 128

	negHeaderSize = 6
	negMagic0     = 'T'
	negMagic1     = 'N'
	negWireV1     = 1

	msgRequest = 1
	msgAccept  = 2
	msgRefuse  = 3
)

// Negotiate runs the opener's side of the negotiation on a new stream: it
// sends name and versions and waits for the acceptor's answer. On success it
// returns the agreed version, spelled as in versions. A refusal is returned as
// a *RefusedError (errors.Is matches ErrUnknownProtocol or ErrNoCommonVersion
// by its code). ctx bounds the whole exchange: its deadline and cancellation
// are applied to conn as a deadline, which is cleared again before returning;
// expiry yields ErrNegotiationTimeout.
//
// Negotiate reads exactly the answer's bytes, so the stream can carry
// messages right after it.
func Negotiate(ctx context.Context, conn net.Conn, name string, versions []string) (string, error) {
	if !ValidName(name) {
		return "", fmt.Errorf("%w: %q", ErrInvalidName, truncate(name))
	}
	if err := validateVersions(versions); err != nil {
		return "", err
	}
	req := appendRequest(make([]byte, 0, 64), name, versions)
	var version string
	err := withContext(ctx, conn, func() error {
		if _, err := conn.Write(req); err != nil {
			return fmt.Errorf("protocol: sending negotiation request: %w", err)
		}
		var buf [MaxNegotiationSize]byte
		typ, body, err := readNegotiation(conn, &buf)
		if err != nil {
			return err
		}
		chosen, refused, err := decodeResponse(typ, body)
		if err != nil {
			return err
		}
		if refused != nil {
			return refused
		}
		for _, v := range versions {
			if CompareVersions(v, chosen) == 0 {
				version = v
				return nil
			}
		}
		return fmt.Errorf("%w: peer chose version %q, which was not offered", ErrMalformed, chosen)
	})
	if err != nil {
		return "", err
	}
	return version, nil
}

// Accept runs the acceptor's side of the negotiation on a new stream: it reads
// the opener's request, looks the protocol up in reg, selects a version with
// the protocol's SelectFunc (SelectHighest if nil) and answers with the chosen
// version or a refusal. It returns the protocol and the version (in the
// acceptor's spelling as returned by the SelectFunc). After a refusal it
// returns ErrUnknownProtocol, ErrNoCommonVersion or ErrBadSelection, wrapped,
// and an Info carrying only the requested Name (empty if the request could not
// be read). ctx is applied as for Negotiate.
func Accept(ctx context.Context, conn net.Conn, reg *Registry) (Info, string, error) {
	return AcceptCommit(ctx, conn, reg, nil)
}

// AcceptCommit is Accept with a commit step: once the version is chosen, and before the
// answer is sent, commit is called with the protocol and the version. The caller makes its
// end of the stream ready there (registers it, say), so that by the time the opener learns
// the stream is accepted, the acceptor's end already exists. If commit returns an error, a
// refusal is sent instead of the answer (with the error's code and reason if it is a
// *RefusedError, CodeRefused otherwise) and the error is returned, wrapped. Nil commit
// makes it Accept.
func AcceptCommit(ctx context.Context, conn net.Conn, reg *Registry, commit func(Info, string) error) (Info, string, error) {
	var hold func(Info, string) (bool, error)
	if commit != nil {
		hold = func(info Info, v string) (bool, error) { return false, commit(info, v) }
	}
	info, version, _, err := AcceptHold(ctx, conn, reg, hold)
	return info, version, err
}

// AcceptHold is AcceptCommit whose commit step may hold the answer back: when it returns
// true, the answer is not written, and AcceptHold reports it held; the caller then writes
// it (AppendAccept with the version) in front of the first data it sends, in the same
// Write, so in the same frame below: a request answered at once costs one frame each way.
// The opener reads nothing of the stream before the answer, so the caller must send it
// before anything else, also when it has nothing else to send. Refusals are always written
// at once.
func AcceptHold(ctx context.Context, conn net.Conn, reg *Registry, commit func(Info, string) (hold bool, err error)) (Info, string, bool, error) {
	var (
		info    Info
		name    string
		version string
		held    bool
	)
	err := withContext(ctx, conn, func() error {
		var buf [MaxNegotiationSize]byte
		typ, body, err := readNegotiation(conn, &buf)
		if err != nil {
			return err
		}
		if typ != msgRequest {
			return fmt.Errorf("%w: expected a request, got message type %d", ErrMalformed, typ)
		}
		var remote []string
		name, remote, err = decodeRequest(body)
		if err != nil {
			return err
		}
		var ok bool
		info, ok = reg.lookup(name)
		if !ok {
			return refuse(conn, CodeUnknownProtocol, "", fmt.Errorf("%w: %s", ErrUnknownProtocol, name))
		}
		sel := info.Select
		if sel == nil {
			sel = SelectHighest
		}
		v, ok := sel(info.Versions, remote)
		if !ok {
			return refuse(conn, CodeNoCommonVersion, "", fmt.Errorf("%w: %s offered %q, local %q", ErrNoCommonVersion, name, remote, info.Versions))
		}
		offered := false
		for _, r := range remote {
			if ValidVersion(v) && CompareVersions(v, r) == 0 {
				offered = true
				break
			}
		}
		if !offered {
			return refuse(conn, CodeRefused, "internal error", fmt.Errorf("%w: %s: %q", ErrBadSelection, name, truncate(v)))
		}
		hold := false
		if commit != nil {
			var err error
			if hold, err = commit(info, v); err != nil {
				code, reason := CodeRefused, ""
				var re *RefusedError
				if errors.As(err, &re) {
					code, reason = re.Code, re.Reason
				}
				return refuse(conn, code, reason, fmt.Errorf("protocol: %s refused by the acceptor: %w", name, err))
			}
		}
		version = v
		if hold {
			held = true
			return nil
		}
		if _, err := conn.Write(appendAccept(buf[:0], v)); err != nil {
			return fmt.Errorf("protocol: sending negotiation answer: %w", err)
		}
		return nil
	})
	if err != nil {
		return Info{Name: name}, "", false, err
	}
	return info.clone(), version, held, nil
}

// AppendAccept appends the acceptor's answer choosing version to dst: what the caller of
// AcceptHold sends when it held the answer back.
func AppendAccept(dst []byte, version string) []byte { return appendAccept(dst, version) }

// refuse sends a refusal and returns cause (or the write error, if any).
func refuse(conn net.Conn, code RefusalCode, reason string, cause error) error {
	var buf [negHeaderSize + 2 + MaxReasonLen]byte
	if _, err := conn.Write(appendRefuse(buf[:0], code, reason)); err != nil {
		return fmt.Errorf("%w (sending the refusal failed: %w)", cause, err)
	}
	return cause
}

// aLongTimeAgo is a deadline in the past, used to interrupt blocked I/O.
var aLongTimeAgo = time.Unix(1, 0)

// withContext runs fn with ctx's deadline and cancellation applied to conn,
// clears the deadline afterwards and maps timeouts to ErrNegotiationTimeout.
func withContext(ctx context.Context, conn net.Conn, fn func() error) error {
	if err := ctx.Err(); err != nil {
		return mapContextErr(err)
	}
	var err error
	if ctx.Done() == nil {
		err = fn()
	} else {
		if dl, ok := ctx.Deadline(); ok {
			if err := conn.SetDeadline(dl); err != nil {
				return fmt.Errorf("protocol: setting deadline: %w", err)
			}
		}
		fired := make(chan struct{})
		stop := context.AfterFunc(ctx, func() {
			defer close(fired)
			_ = conn.SetDeadline(aLongTimeAgo)
		})
		err = fn()
		if !stop() {
			<-fired // the deadline is being set to the past: let it finish first
		}
		_ = conn.SetDeadline(time.Time{})
		if err != nil {
			if cerr := ctx.Err(); cerr != nil {
				return mapContextErr(cerr)
			}
		}
	}
	if err != nil && deadline.TimedOut(err) && !errors.Is(err, ErrNegotiationTimeout) {
		return fmt.Errorf("%w: %w", ErrNegotiationTimeout, err)
	}
	return err
}

func mapContextErr(err error) error {
	if errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("%w: %w", ErrNegotiationTimeout, err)
	}
	return fmt.Errorf("protocol: negotiation canceled: %w", err)
}

// readNegotiation reads one negotiation message into buf and returns its type
// and body (a slice of buf).
func readNegotiation(r io.Reader, buf *[MaxNegotiationSize]byte) (byte, []byte, error) {
	hdr := buf[:negHeaderSize]
	if _, err := io.ReadFull(r, hdr); err != nil {
		return 0, nil, fmt.Errorf("protocol: reading negotiation header: %w", err)
	}
	typ, n, err := parseNegotiationHeader(hdr)
	if err != nil {
		return 0, nil, err
	}
	body := buf[negHeaderSize : negHeaderSize+n]
	if _, err := io.ReadFull(r, body); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return 0, nil, fmt.Errorf("protocol: reading negotiation body: %w", err)
	}
	return typ, body, nil
}

// parseNegotiationHeader checks the 6-byte header and returns the message type
// and the body length.
func parseNegotiationHeader(h []byte) (byte, int, error) {
	if len(h) < negHeaderSize {
		return 0, 0, fmt.Errorf("%w: short header", ErrMalformed)
	}
	if h[0] != negMagic0 || h[1] != negMagic1 {
		return 0, 0, fmt.Errorf("%w: bad magic %#x %#x", ErrMalformed, h[0], h[1])
	}
	if h[2] != negWireV1 {
		return 0, 0, fmt.Errorf("%w: unsupported negotiation version %d", ErrMalformed, h[2])
	}
	typ := h[3]
	if typ < msgRequest || typ > msgRefuse {
		return 0, 0, fmt.Errorf("%w: unknown message type %d", ErrMalformed, typ)
	}
	n := int(binary.BigEndian.Uint16(h[4:6]))
	if n > MaxNegotiationSize-negHeaderSize {
		return 0, 0, fmt.Errorf("%w: body of %d bytes exceeds %d", ErrMalformed, n, MaxNegotiationSize-negHeaderSize)
	}
	return typ, n, nil
}

// appendHeader appends a header whose length field is patched by finish.
func appendHeader(dst []byte, typ byte) []byte {
	return append(dst, negMagic0, negMagic1, negWireV1, typ, 0, 0)
}

func finish(msg []byte, start int) []byte {
	binary.BigEndian.PutUint16(msg[start+4:start+6], uint16(len(msg)-start-negHeaderSize))
	return msg
}

// appendRequest encodes a request; name and versions must be valid (their
// limits keep the message under MaxNegotiationSize).
func appendRequest(dst []byte, name string, versions []string) []byte {
	start := len(dst)
	dst = appendHeader(dst, msgRequest)
	dst = append(dst, byte(len(name)))
	dst = append(dst, name...)
	dst = append(dst, byte(len(versions)))
	for _, v := range versions {
		dst = append(dst, byte(len(v)))
		dst = append(dst, v...)
	}
	return finish(dst, start)
}

func appendAccept(dst []byte, version string) []byte {
	start := len(dst)
	dst = appendHeader(dst, msgAccept)
	dst = append(dst, byte(len(version)))
	dst = append(dst, version...)
	return finish(dst, start)
}

func appendRefuse(dst []byte, code RefusalCode, reason string) []byte {
	if len(reason) > MaxReasonLen {
		reason = reason[:MaxReasonLen]
	}
	start := len(dst)
	dst = appendHeader(dst, msgRefuse)
	dst = append(dst, byte(code), byte(len(reason)))
	dst = append(dst, reason...)
	return finish(dst, start)
}

// decoder reads length-prefixed fields from a message body.
type decoder struct {
	b   []byte
	err error
}

func (d *decoder) byte() byte {
	if d.err != nil {
		return 0
	}
	if len(d.b) < 1 {
		d.err = fmt.Errorf("%w: truncated body", ErrMalformed)
		return 0
	}
	c := d.b[0]
	d.b = d.b[1:]
	return c
}

func (d *decoder) bytes() []byte {
	n := int(d.byte())
	if d.err != nil {
		return nil
	}
	if len(d.b) < n {
		d.err = fmt.Errorf("%w: truncated body", ErrMalformed)
		return nil
	}
	s := d.b[:n]
	d.b = d.b[n:]
	return s
}

func (d *decoder) end() error {
	if d.err == nil && len(d.b) != 0 {
		d.err = fmt.Errorf("%w: %d trailing bytes", ErrMalformed, len(d.b))
	}
	return d.err
}

// decodeRequest parses a request body and validates every field.
func decodeRequest(body []byte) (name string, versions []string, err error) {
	d := decoder{b: body}
	nb := d.bytes()
	if d.err == nil && !ValidName(string(nb)) {
		return "", nil, fmt.Errorf("%w: invalid protocol name", ErrMalformed)
	}
	count := int(d.byte())
	if d.err == nil && (count == 0 || count > MaxVersions) {
		return "", nil, fmt.Errorf("%w: %d versions offered", ErrMalformed, count)
	}
	if d.err != nil {
		return "", nil, d.err
	}
	versions = make([]string, 0, count)
	for range count {
		vb := d.bytes()
		if d.err != nil {
			return "", nil, d.err
		}
		if !ValidVersion(string(vb)) {
			return "", nil, fmt.Errorf("%w: invalid version", ErrMalformed)
		}
		versions = append(versions, string(vb))
	}
	if err := d.end(); err != nil {
		return "", nil, err
	}
	return string(nb), versions, nil
}

// decodeResponse parses an accept or refuse body. Exactly one of version and
// refused is set when err is nil.
func decodeResponse(typ byte, body []byte) (version string, refused *RefusedError, err error) {
	d := decoder{b: body}
	switch typ {
	case msgAccept:
		vb := d.bytes()
		if err := d.end(); err != nil {
			return "", nil, err
		}
		if !ValidVersion(string(vb)) {
			return "", nil, fmt.Errorf("%w: invalid version in answer", ErrMalformed)
		}
		return string(vb), nil, nil
	case msgRefuse:
		code := RefusalCode(d.byte())
		rb := d.bytes()
		if err := d.end(); err != nil {
			return "", nil, err
		}
		if code == 0 {
			return "", nil, fmt.Errorf("%w: refusal code 0", ErrMalformed)
		}
		if len(rb) > MaxReasonLen {
			return "", nil, fmt.Errorf("%w: refusal reason of %d bytes", ErrMalformed, len(rb))
		}
		for _, c := range rb {
			if c < 0x20 || c > 0x7e {
				return "", nil, fmt.Errorf("%w: non-printable refusal reason", ErrMalformed)
			}
		}
		return "", &RefusedError{Code: code, Reason: string(rb)}, nil
	default:
		return "", nil, fmt.Errorf("%w: expected an answer, got message type %d", ErrMalformed, typ)
	}
}
