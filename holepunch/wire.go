package holepunch

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"

	ma "github.com/multiformats/go-multiaddr"
)

const (
	msgConnect = 1
	msgSync    = 2

	maxMessage = 1024 // a message's body, in bytes
	maxAddrLen = 128  // one address's bytes

	flagRewritesPorts = 1 // CONNECT: the sender's NAT does not keep ports
)

// connectMsg is a CONNECT: where the sender can be dialled, and what it knows of its NAT.
type connectMsg struct {
	addrs         []ma.Multiaddr
	rewritesPorts bool
}

// appendConnect encodes m, with at most limit addresses (those that fit).
func appendConnect(b []byte, m connectMsg, limit int) []byte {
	body := []byte{msgConnect, 0}
	if m.rewritesPorts {
		body[1] |= flagRewritesPorts
	}
	n := 0
	var addrs []byte
	for _, a := range m.addrs {
		ab := a.Bytes()
		if n == limit || len(ab) > maxAddrLen || len(body)+1+len(addrs)+binary.MaxVarintLen16+len(ab) > maxMessage {
			continue
		}
		addrs = binary.AppendUvarint(addrs, uint64(len(ab)))
		addrs = append(addrs, ab...)
		n++
	}
	body = append(body, byte(n))
	body = append(body, addrs...)
	return appendMsg(b, body)
}

// parseConnect decodes a CONNECT body, refusing more than limit addresses or any that is
// not a valid multiaddr.
func parseConnect(body []byte, limit int) (connectMsg, error) {
	var m connectMsg
	if len(body) < 3 || body[0] != msgConnect {
		return m, fmt.Errorf("%w: not a CONNECT", ErrMalformed)
	}
	m.rewritesPorts = body[1]&flagRewritesPorts != 0
	n := int(body[2])
	if n > limit {
		return m, fmt.Errorf("%w: %d addresses, at most %d", ErrMalformed, n, limit)
	}
	rest := body[3:]
	for range n {
		l, k := binary.Uvarint(rest)
		if k <= 0 || l == 0 || l > maxAddrLen || uint64(len(rest)-k) < l {
			return m, fmt.Errorf("%w: bad address length", ErrMalformed)
		}
		a, err := ma.NewMultiaddrBytes(rest[k : k+int(l)])
		if err != nil {
			return m, fmt.Errorf("%w: %w", ErrMalformed, err)
		}
		m.addrs = append(m.addrs, a)
		rest = rest[k+int(l):]
	}
	if len(rest) != 0 {
		return m, fmt.Errorf("%w: %d bytes after the addresses", ErrMalformed, len(rest))
	}
	return m, nil
}

func appendMsg(b, body []byte) []byte {
	b = binary.AppendUvarint(b, uint64(len(body)))
	return append(b, body...)
}

// readMsg reads one message body, refusing lengths outside 1..maxMessage before reading
// the body.
func readMsg(r *bufio.Reader) ([]byte, error) {
	l, err := binary.ReadUvarint(r)
	if err != nil {
		if err == io.EOF {
			return nil, io.ErrUnexpectedEOF
		}
		return nil, err
	}
	if l == 0 || l > maxMessage {
		return nil, fmt.Errorf("%w: message of %d bytes", ErrMalformed, l)
	}
	body := make([]byte, l)
	if _, err := io.ReadFull(r, body); err != nil {
		return nil, err
	}
	return body, nil
}
