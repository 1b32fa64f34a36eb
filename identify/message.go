package identify

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"strings"
	"unicode/utf8"

	ma "github.com/multiformats/go-multiaddr"
	"github.com/tendril-p2p/tendril/peerrecord"
)

// Bounds of a message; a message or field beyond them is ErrTooLarge.
const (
	// MaxMessageSize bounds one identify message, record included.
	MaxMessageSize = 4096
	// MaxAgent bounds the agent string, in bytes.
	MaxAgent = 128
	// MaxObservedAddr bounds the observed address's binary multiaddr, in bytes.
	MaxObservedAddr = 128
	// MaxProtocols bounds the protocols listed in one message. A node with more lists its
	// first MaxProtocols (in registration order), and as many of them as fit in
	// MaxMessageSize.
	MaxProtocols = 64
	// MaxProtocolName bounds a protocol name, in bytes.
	MaxProtocolName = 128
	// MaxVersions bounds the versions listed for one protocol.
	MaxVersions = 8
	// MaxVersionLen bounds one version string, in bytes.
	MaxVersionLen = 32

	wireVersion = 1
)

// ProtoVersions is a protocol a peer speaks: its name and versions.
type ProtoVersions struct {
	Name     string
	Versions []string
}

// message is one identify message as it travels. Only record is signed; the rest is
// believed because it comes over the authenticated session, from the peer itself.
type message struct {
	record    []byte       // a peerrecord encoding, not yet parsed
	observed  ma.Multiaddr // the address the sender sees the receiver at; nil if none
	agent     string
	protocols []ProtoVersions
}

// appendTo appends the encoding of m, mirroring parseMessage. It lists as many of
// m.protocols as fit in MaxMessageSize and returns how many that was.
func (m *message) appendTo(b []byte) ([]byte, int) {
	start := len(b)
	b = append(b, wireVersion)
	b = appendBytes(b, m.record)
	b = appendBytes(b, m.observed.Bytes())
	b = appendBytes(b, []byte(m.agent))
	protos := m.protocols[:min(len(m.protocols), MaxProtocols)]
	var enc []byte
	n := 0
	for _, p := range protos {
		var one []byte
		one = appendBytes(one, []byte(p.Name))
		vs := p.Versions[:min(len(p.Versions), MaxVersions)]
		one = append(one, byte(len(vs)))
		for _, v := range vs {
			one = appendBytes(one, []byte(v))
		}
		// One byte for the count, which stays below 128 and so is one varint byte.
		if len(b)-start+1+len(enc)+len(one) > MaxMessageSize {
			break
		}
		enc = append(enc, one...)
		n++
	}
	b = binary.AppendUvarint(b, uint64(n))
	return append(b, enc...), n
}

func appendBytes(b, v []byte) []byte {
	b = binary.AppendUvarint(b, uint64(len(v)))
	return append(b, v...)
}

// parseMessage decodes b, checking every bound before it allocates and every field's
// syntax. It verifies nothing: the record is returned unparsed, so that the caller can
// skip a record it has verified already.
func parseMessage(b []byte) (message, error) {
	var m message
	if len(b) > MaxMessageSize {
		return m, fmt.Errorf("%w: %d bytes, at most %d", ErrTooLarge, len(b), MaxMessageSize)
	}
	r := reader{b: b}
	if v := r.u8(); v != wireVersion && !r.bad {
		return m, fmt.Errorf("%w: version %d", ErrMalformed, v)
	}
	var err error
	if m.record, err = r.field("record", peerrecord.MaxSize); err != nil {
		return m, err
	}
	if len(m.record) == 0 && !r.bad {
		return m, fmt.Errorf("%w: no record", ErrMalformed)
	}
	observed, err := r.field("observed address", MaxObservedAddr)
	if err != nil {
		return m, err
	}
	if len(observed) > 0 {
		if m.observed, err = ma.NewMultiaddrBytes(observed); err != nil {
			return m, fmt.Errorf("%w: observed address: %w", ErrMalformed, err)
		}
		if !bytes.Equal(m.observed.Bytes(), observed) {
			return m, fmt.Errorf("%w: observed address not in its canonical form", ErrMalformed)
		}
	}
	if m.agent, err = r.text("agent", MaxAgent); err != nil {
		return m, err
	}
	n := r.uvarint()
	if n > MaxProtocols {
		return m, fmt.Errorf("%w: %d protocols, at most %d", ErrTooLarge, n, MaxProtocols)
	}
	if !r.bad && n > 0 {
		m.protocols = make([]ProtoVersions, 0, n)
	}
	for i := 0; i < int(n) && !r.bad; i++ {
		var p ProtoVersions
		if p.Name, err = r.text("protocol name", MaxProtocolName); err != nil {
			return m, err
		}
		if !r.bad && !strings.HasPrefix(p.Name, "/") {
			return m, fmt.Errorf("%w: protocol name %q does not start with /", ErrMalformed, p.Name)
		}
		for _, q := range m.protocols {
			if q.Name == p.Name {
				return m, fmt.Errorf("%w: protocol %q listed twice", ErrMalformed, p.Name)
			}
		}
		nv := int(r.u8())
		if nv > MaxVersions {
			return m, fmt.Errorf("%w: %d versions of %q, at most %d", ErrTooLarge, nv, p.Name, MaxVersions)
		}
		for j := 0; j < nv && !r.bad; j++ {
			v, err := r.text("version", MaxVersionLen)
			if err != nil {
				return m, err
			}
			if v == "" && !r.bad {
				return m, fmt.Errorf("%w: empty version of %q", ErrMalformed, p.Name)
			}
			p.Versions = append(p.Versions, v)
		}
		m.protocols = append(m.protocols, p)
	}
	return m, r.end()
}

// reader decodes a message with a sticky truncation flag: once a read runs past the end,
// every later read returns zero values and end reports the truncation.
type reader struct {
	b   []byte
	bad bool
}

func (r *reader) u8() uint8 {
	if len(r.b) < 1 {
		r.bad, r.b = true, nil
		return 0
	}
	v := r.b[0]
	r.b = r.b[1:]
	return v
}

func (r *reader) uvarint() uint64 {
	v, n := binary.Uvarint(r.b)
	// A longer encoding than needed is refused, so that a message has one encoding.
	if n <= 0 || n != uvarintLen(v) {
		r.bad, r.b = true, nil
		return 0
	}
	r.b = r.b[n:]
	return v
}

func uvarintLen(v uint64) int {
	n := 1
	for ; v >= 0x80; v >>= 7 {
		n++
	}
	return n
}

// field reads a length-prefixed byte string of at most limit bytes, aliasing the input.
func (r *reader) field(what string, limit int) ([]byte, error) {
	n := r.uvarint()
	if n > uint64(limit) {
		return nil, fmt.Errorf("%w: %s of %d bytes, at most %d", ErrTooLarge, what, n, limit)
	}
	if uint64(len(r.b)) < n {
		r.bad, r.b = true, nil
		return nil, nil
	}
	v := r.b[:n:n]
	r.b = r.b[n:]
	return v, nil
}

// text reads a field that must be UTF-8.
func (r *reader) text(what string, limit int) (string, error) {
	v, err := r.field(what, limit)
	if err != nil {
		return "", err
	}
	if !utf8.Valid(v) {
		return "", fmt.Errorf("%w: %s is not UTF-8", ErrMalformed, what)
	}
	return string(v), nil
}

// end checks that the message was consumed exactly.
func (r *reader) end() error {
	if r.bad {
		return fmt.Errorf("%w: truncated", ErrMalformed)
	}
	if len(r.b) != 0 {
		return fmt.Errorf("%w: %d trailing bytes", ErrMalformed, len(r.b))
	}
	return nil
}
