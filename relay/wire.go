package relay

// The control messages of the hop and stop protocols (docs in doc.go): each is a uvarint
// length, at most maxMessage, then the body. Decoders take a whole body and check that it
// is consumed exactly; encoders mirror them.

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"time"

	ma "github.com/multiformats/go-multiaddr"

	"github.com/tendril-p2p/tendril/secio"
)

// Message types: the first byte of a hop or stop request.
const (
	msgReserve = 1 // hop: reserve a slot for the sender
	msgConnect = 2 // hop: connect me to a target; stop: someone connects to you
)

const (
	// maxMessage bounds a control message body: a type, two peer IDs' worth and a
	// multiaddr fit with room to spare.
	maxMessage = 512
	// maxIDLen bounds an encoded peer ID (tendril's are 34 bytes).
	maxIDLen = 64
	// maxAddrLen bounds the observed address in a stop request.
	maxAddrLen = 256
)

// Limits are what a relay allows one circuit: bytes in each direction and a lifetime.
type Limits struct {
	Bytes    int64
	Duration time.Duration
}

// hopRequest is a decoded hop request.
type hopRequest struct {
	typ    uint8
	target secio.PeerID // msgConnect
}

// stopRequest is a decoded stop request: who connects, as the relay saw them.
type stopRequest struct {
	dialer   secio.PeerID
	observed ma.Multiaddr // may be nil
	limits   Limits
}

// reservation is what a relay grants, as a hop answer to msgReserve says.
type grant struct {
	ttl    time.Duration
	limits Limits
}

// writeMsg sends body with its length prefix in one Write.
func writeMsg(w io.Writer, body []byte) error {
	b := binary.AppendUvarint(make([]byte, 0, len(body)+binary.MaxVarintLen16), uint64(len(body)))
	_, err := w.Write(append(b, body...))
	return err
}

// readMsg reads one length-prefixed body, refusing a length above maxMessage before
// allocating.
func readMsg(r *bufio.Reader) ([]byte, error) {
	n, err := binary.ReadUvarint(r)
	if err != nil {
		if err == io.EOF {
			return nil, io.ErrUnexpectedEOF
		}
		return nil, fmt.Errorf("%w: length: %w", ErrMalformed, err)
	}
	if n == 0 || n > maxMessage {
		return nil, fmt.Errorf("%w: message length %d outside [1, %d]", ErrMalformed, n, maxMessage)
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(r, b); err != nil {
		return nil, err
	}
	return b, nil
}

// decoder reads a body; running short marks it bad and every later read fails too.
type decoder struct {
	b   []byte
	bad bool
}

func (d *decoder) u8() uint8 {
	if len(d.b) < 1 {
		d.bad = true
		return 0
	}
	v := d.b[0]
	d.b = d.b[1:]
	return v
}

func (d *decoder) uvarint() uint64 {
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.bad = true
		d.b = nil
		return 0
	}
	d.b = d.b[n:]
	return v
}

// bytes reads a uvarint length, at most max, and that many bytes (aliasing the body).
func (d *decoder) bytes(max int) []byte {
	n := d.uvarint()
	if d.bad || n > uint64(max) || n > uint64(len(d.b)) {
		d.bad = true
		d.b = nil
		return nil
	}
	v := d.b[:n:n]
	d.b = d.b[n:]
	return v
}

func (d *decoder) peer(what string) (secio.PeerID, error) {
	b := d.bytes(maxIDLen)
	if d.bad {
		return secio.PeerID{}, fmt.Errorf("%w: truncated %s", ErrMalformed, what)
	}
	id, err := secio.PeerIDFromBytes(b)
	if err != nil || id.IsZero() {
		return secio.PeerID{}, fmt.Errorf("%w: %s: bad peer ID", ErrMalformed, what)
	}
	return id, nil
}

// limits reads a byte limit and a duration in seconds; both must be positive and the
// duration at most a day, so that nothing a relay says overflows a time.Duration.
func (d *decoder) limits(what string) Limits {
	b, s := d.uvarint(), d.uvarint()
	if b == 0 || b > 1<<62 || s == 0 || s > maxSeconds {
		d.bad = true
	}
	return Limits{Bytes: int64(b), Duration: time.Duration(s) * time.Second}
}

// maxSeconds bounds every duration on the wire (a day).
const maxSeconds = 24 * 3600

// end checks that the body was consumed exactly.
func (d *decoder) end(what string) error {
	if d.bad {
		return fmt.Errorf("%w: truncated or out-of-range %s", ErrMalformed, what)
	}
	if len(d.b) != 0 {
		return fmt.Errorf("%w: %d trailing bytes after %s", ErrMalformed, len(d.b), what)
	}
	return nil
}

func appendLimits(b []byte, l Limits) []byte {
	b = binary.AppendUvarint(b, uint64(l.Bytes))
	return binary.AppendUvarint(b, uint64(seconds(l.Duration)))
}

// seconds rounds d up to whole seconds, at least 1 and at most maxSeconds.
func seconds(d time.Duration) int64 {
	s := int64((d + time.Second - 1) / time.Second)
	return min(max(s, 1), maxSeconds)
}

func appendPeer(b []byte, id secio.PeerID) []byte {
	raw := id.Bytes()
	b = binary.AppendUvarint(b, uint64(len(raw)))
	return append(b, raw...)
}

func appendHopRequest(b []byte, r hopRequest) []byte {
	b = append(b, r.typ)
	if r.typ == msgConnect {
		b = appendPeer(b, r.target)
	}
	return b
}

func parseHopRequest(body []byte) (hopRequest, error) {
	d := decoder{b: body}
	r := hopRequest{typ: d.u8()}
	switch r.typ {
	case msgReserve:
	case msgConnect:
		id, err := d.peer("connect target")
		if err != nil {
			return r, err
		}
		r.target = id
	default:
		if d.bad {
			return r, fmt.Errorf("%w: empty hop request", ErrMalformed)
		}
		return r, fmt.Errorf("%w: hop request type %d", ErrMalformed, r.typ)
	}
	return r, d.end("hop request")
}

// appendReserveAnswer encodes a hop answer to msgReserve: the status, then, if OK, the
// reservation's lifetime in seconds and the circuit limits.
func appendReserveAnswer(b []byte, st Status, g grant) []byte {
	b = append(b, byte(st))
	if st == StatusOK {
		b = binary.AppendUvarint(b, uint64(seconds(g.ttl)))
		b = appendLimits(b, g.limits)
	}
	return b
}

func parseReserveAnswer(body []byte) (grant, error) {
	d := decoder{b: body}
	st := Status(d.u8())
	if d.bad {
		return grant{}, fmt.Errorf("%w: empty reserve answer", ErrMalformed)
	}
	if st != StatusOK {
		if err := d.end("reserve answer"); err != nil {
			return grant{}, err
		}
		return grant{}, st.Err()
	}
	ttl := d.uvarint()
	if ttl == 0 || ttl > maxSeconds {
		d.bad = true
	}
	g := grant{ttl: time.Duration(ttl) * time.Second, limits: d.limits("reserve answer")}
	return g, d.end("reserve answer")
}

// appendConnectAnswer encodes a hop answer to msgConnect: the status, then, if OK, the
// circuit's limits.
func appendConnectAnswer(b []byte, st Status, l Limits) []byte {
	b = append(b, byte(st))
	if st == StatusOK {
		b = appendLimits(b, l)
	}
	return b
}

func parseConnectAnswer(body []byte) (Limits, error) {
	d := decoder{b: body}
	st := Status(d.u8())
	if d.bad {
		return Limits{}, fmt.Errorf("%w: empty connect answer", ErrMalformed)
	}
	if st != StatusOK {
		if err := d.end("connect answer"); err != nil {
			return Limits{}, err
		}
		return Limits{}, st.Err()
	}
	l := d.limits("connect answer")
	return l, d.end("connect answer")
}

func appendStopRequest(b []byte, r stopRequest) []byte {
	b = append(b, msgConnect)
	b = appendPeer(b, r.dialer)
	var addr []byte
	if r.observed != nil {
		addr = r.observed.Bytes()
	}
	if len(addr) > maxAddrLen {
		addr = nil
	}
	b = binary.AppendUvarint(b, uint64(len(addr)))
	b = append(b, addr...)
	return appendLimits(b, r.limits)
}

func parseStopRequest(body []byte) (stopRequest, error) {
	d := decoder{b: body}
	if typ := d.u8(); typ != msgConnect {
		return stopRequest{}, fmt.Errorf("%w: stop request type %d", ErrMalformed, typ)
	}
	id, err := d.peer("stop dialer")
	if err != nil {
		return stopRequest{}, err
	}
	r := stopRequest{dialer: id}
	if raw := d.bytes(maxAddrLen); len(raw) > 0 {
		m, err := ma.NewMultiaddrBytes(raw)
		if err != nil {
			return stopRequest{}, fmt.Errorf("%w: stop request: observed address: %v", ErrMalformed, err)
		}
		r.observed = m
	}
	r.limits = d.limits("stop request")
	return r, d.end("stop request")
}

// parseStatus decodes a one-byte status answer (the stop answer).
func parseStatus(body []byte) error {
	d := decoder{b: body}
	st := Status(d.u8())
	if err := d.end("status"); err != nil {
		return err
	}
	return st.Err()
}
