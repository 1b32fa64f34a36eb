package pex

import (
	"encoding/binary"
	"fmt"

	"github.com/tendril-p2p/tendril/peerrecord"
	"github.com/tendril-p2p/tendril/secio"
)

// appendRequest encodes a request for want records.
func appendRequest(b []byte, want int) []byte { return binary.AppendUvarint(b, uint64(want)) }

// parseRequest decodes a request and returns the number of records wanted, at most max
// (and at least 1: asking for none is asking for the default).
func parseRequest(req []byte, max int) (int, error) {
	want, n := binary.Uvarint(req)
	if n <= 0 || n != len(req) {
		return 0, fmt.Errorf("%w: %d bytes", ErrBadRequest, len(req))
	}
	if want == 0 || want > uint64(max) {
		return max, nil
	}
	return int(want), nil
}

// appendAnswer encodes up to want of recs, leaving out peer's own record, within
// maxBytes.
func appendAnswer(b []byte, recs []*peerrecord.Record, peer secio.PeerID, want, maxBytes int) []byte {
	var body []byte
	count := 0
	for _, r := range recs {
		if count == want {
			break
		}
		if r.Peer() == peer {
			continue // the asker knows its own record
		}
		raw := r.Bytes()
		// The count's varint takes at most 2 bytes for any count Validate allows.
		if 2+len(body)+binary.MaxVarintLen16+len(raw) > maxBytes {
			break
		}
		body = binary.AppendUvarint(body, uint64(len(raw)))
		body = append(body, raw...)
		count++
	}
	b = binary.AppendUvarint(b, uint64(count))
	return append(b, body...)
}

// splitAnswer checks an answer's size, count and framing, and returns its records' bytes,
// unparsed. Nothing is parsed, so a refused answer cost no signature check.
func splitAnswer(ans []byte, maxCount, maxBytes int) ([][]byte, error) {
	if len(ans) > maxBytes {
		return nil, fmt.Errorf("%w: %d bytes, at most %d", ErrAnswerTooLarge, len(ans), maxBytes)
	}
	count, n := binary.Uvarint(ans)
	if n <= 0 {
		return nil, fmt.Errorf("%w: bad count", ErrMalformedAnswer)
	}
	if count > uint64(maxCount) {
		return nil, fmt.Errorf("%w: %d records, at most %d", ErrAnswerTooLarge, count, maxCount)
	}
	rest := ans[n:]
	out := make([][]byte, 0, count)
	for i := range count {
		l, n := binary.Uvarint(rest)
		if n <= 0 || l == 0 || l > peerrecord.MaxSize || l > uint64(len(rest)-n) {
			return nil, fmt.Errorf("%w: bad length of record %d", ErrMalformedAnswer, i)
		}
		out = append(out, rest[n:n+int(l)])
		rest = rest[n+int(l):]
	}
	if len(rest) != 0 {
		return nil, fmt.Errorf("%w: %d trailing bytes", ErrMalformedAnswer, len(rest))
	}
	return out, nil
}
