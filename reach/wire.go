package reach

import (
	"encoding/binary"
	"fmt"

	ma "github.com/multiformats/go-multiaddr"
)

// The wire format (docs in doc.go). A request:
//
//	version  1 byte, 1
//	count    1 byte, 1 to the server's MaxCandidates
//	count times: a uvarint length (1 to MaxAddrLen), then a binary multiaddr
//
// A reply:
//
//	version  1 byte, 1
//	status   1 byte: statusOK, statusRateLimited or statusBusy
//	count    1 byte: the request's count with statusOK, else 0
//	count times: 1 byte, the Result for the request's candidate in that place
//
// Nothing may follow either.

const wireVersion = 1

// MaxAddrLen bounds one candidate's binary multiaddr: /ip6/.../tcp/N/ws is 23 bytes.
const MaxAddrLen = 64

// maxRequestSize bounds a request before it is parsed.
const maxRequestSize = 2 + MaxCandidatesLimit*(1+MaxAddrLen)

const (
	statusOK          = 0
	statusRateLimited = 1
	statusBusy        = 2
)

// Result is a server's answer about one candidate.
type Result uint8

// The answers about a candidate.
const (
	ResultOK      Result = iota // dialled back: the requester proved its identity there
	ResultFailed                // dialled back, and the dial or the handshake failed
	ResultRefused               // not dialled: not at the requester's observed IP, or not an IP address
	ResultSkipped               // not dialled: the server had no dial-back to spare
)

// String names the result.
func (r Result) String() string {
	switch r {
	case ResultOK:
		return "ok"
	case ResultFailed:
		return "failed"
	case ResultRefused:
		return "refused"
	case ResultSkipped:
		return "skipped"
	}
	return fmt.Sprintf("result(%d)", uint8(r))
}

// appendRequest encodes a request for addrs (at most MaxCandidatesLimit, each at most
// MaxAddrLen bytes: the caller checks).
func appendRequest(b []byte, addrs []ma.Multiaddr) []byte {
	b = append(b, wireVersion, byte(len(addrs)))
	for _, a := range addrs {
		raw := a.Bytes()
		b = binary.AppendUvarint(b, uint64(len(raw)))
		b = append(b, raw...)
	}
	return b
}

// parseRequest decodes a request of at most max candidates.
func parseRequest(b []byte, max int) ([]ma.Multiaddr, error) {
	if len(b) > maxRequestSize {
		return nil, fmt.Errorf("%w: request of %d bytes", ErrMalformed, len(b))
	}
	if len(b) < 2 || b[0] != wireVersion {
		return nil, fmt.Errorf("%w: request header", ErrMalformed)
	}
	n := int(b[1])
	if n == 0 || n > max {
		return nil, fmt.Errorf("%w: %d candidates, want 1 to %d", ErrMalformed, n, max)
	}
	b = b[2:]
	addrs := make([]ma.Multiaddr, 0, n)
	for i := range n {
		l, k := binary.Uvarint(b)
		if k <= 0 || l == 0 || l > MaxAddrLen || uint64(len(b)-k) < l {
			return nil, fmt.Errorf("%w: candidate %d: length", ErrMalformed, i)
		}
		a, err := ma.NewMultiaddrBytes(b[k : k+int(l)])
		if err != nil {
			return nil, fmt.Errorf("%w: candidate %d: %v", ErrMalformed, i, err)
		}
		addrs = append(addrs, a)
		b = b[k+int(l):]
	}
	if len(b) != 0 {
		return nil, fmt.Errorf("%w: %d bytes after the candidates", ErrMalformed, len(b))
	}
	return addrs, nil
}

// appendReply encodes a reply.
func appendReply(b []byte, status byte, results []Result) []byte {
	b = append(b, wireVersion, status, byte(len(results)))
	for _, r := range results {
		b = append(b, byte(r))
	}
	return b
}

// parseReply decodes the reply to a request of n candidates: the results, or
// ErrRateLimited, ErrBusy or ErrMalformed.
func parseReply(b []byte, n int) ([]Result, error) {
	if len(b) < 3 || b[0] != wireVersion {
		return nil, fmt.Errorf("%w: reply header", ErrMalformed)
	}
	switch b[1] {
	case statusRateLimited, statusBusy:
		if b[2] != 0 || len(b) != 3 {
			return nil, fmt.Errorf("%w: refusal with results", ErrMalformed)
		}
		if b[1] == statusBusy {
			return nil, ErrBusy
		}
		return nil, ErrRateLimited
	case statusOK:
	default:
		return nil, fmt.Errorf("%w: status %d", ErrMalformed, b[1])
	}
	if int(b[2]) != n || len(b) != 3+n {
		return nil, fmt.Errorf("%w: %d results for %d candidates", ErrMalformed, b[2], n)
	}
	out := make([]Result, n)
	for i, r := range b[3:] {
		if Result(r) > ResultSkipped {
			return nil, fmt.Errorf("%w: result %d", ErrMalformed, r)
		}
		out[i] = Result(r)
	}
	return out, nil
}
