package proxyhdr

import (
	"bytes"
	"errors"
	"io"
	"net/netip"
	"strings"
	"testing"
	"testing/iotest"
)

// handshake stands for what follows a header: a tendril handshake's first bytes (a
// 4-byte big-endian length, whose first byte is 0).
var handshake = []byte{0, 0, 0, 5, 'h', 'e', 'l', 'l', 'o'}

// readers wraps a stream in the ways a reader may deliver it.
var readers = []struct {
	name string
	wrap func(io.Reader) io.Reader
}{
	{"whole", func(r io.Reader) io.Reader { return r }},
	{"byte-at-a-time", iotest.OneByteReader},
	{"half", iotest.HalfReader},
}

// headerReader serves a header and the stream after it, and fails the test if it is
// asked for a byte beyond the header: a reader that asked could have been given the
// handshake's bytes, lost to the caller.
type headerReader struct {
	t    testing.TB
	data []byte
	hdr  int // the header's length in data
	off  int
}

func (r *headerReader) Read(p []byte) (int, error) {
	if r.off+len(p) > r.hdr {
		r.t.Errorf("asked for %d bytes at offset %d, past the header's %d", len(p), r.off, r.hdr)
	}
	if r.off == len(r.data) {
		return 0, io.EOF
	}
	n := copy(p, r.data[r.off:])
	r.off += n
	return n, nil
}

// checkRead reads a header from hdr followed by the handshake through every reader and
// checks the result, and that the handshake is left unread.
func checkRead(t *testing.T, hdr []byte, want Header) {
	t.Helper()
	stream := append(append([]byte{}, hdr...), handshake...)
	for _, rd := range readers {
		br := bytes.NewReader(stream)
		h, prefix, isProxy, err := Read(rd.wrap(br))
		if err != nil || !isProxy || prefix != nil {
			t.Fatalf("%s: Read = %+v, %q, %v, %v; want a header", rd.name, h, prefix, isProxy, err)
		}
		if h != want {
			t.Errorf("%s: header %+v, want %+v", rd.name, h, want)
		}
		if rest, _ := io.ReadAll(br); !bytes.Equal(rest, handshake) {
			t.Errorf("%s: left %q unread, want the handshake %q", rd.name, rest, handshake)
		}
	}
	hr := &headerReader{t: t, data: stream, hdr: len(hdr)}
	if _, _, _, err := Read(hr); err != nil {
		t.Fatalf("strict reader: %v", err)
	}
	if hr.off != len(hdr) {
		t.Errorf("strict reader: read %d bytes of a %d-byte header", hr.off, len(hdr))
	}
}

// checkMalformed checks that reading hdr (then the handshake) fails with ErrMalformed
// through every reader, and that it reads nothing past the header either way.
func checkMalformed(t *testing.T, hdr []byte) {
	t.Helper()
	for _, rd := range readers {
		_, prefix, isProxy, err := Read(rd.wrap(bytes.NewReader(hdr)))
		if !errors.Is(err, ErrMalformed) || !isProxy || prefix != nil {
			t.Errorf("%s: Read(%q) = %q, %v, %v; want ErrMalformed", rd.name, hdr, prefix, isProxy, err)
		}
	}
	hr := &headerReader{t: t, data: append(append([]byte{}, hdr...), handshake...), hdr: len(hdr)}
	if _, _, _, err := Read(hr); !errors.Is(err, ErrMalformed) {
		t.Errorf("strict reader: Read(%q) = %v, want ErrMalformed", hdr, err)
	}
}

func ap(s string) netip.AddrPort { return netip.MustParseAddrPort(s) }

// TestNotProxy checks streams that do not start with a header: Read consumes only up to
// the first byte that rules both signatures out, and hands them back.
func TestNotProxy(t *testing.T) {
	for _, tc := range []struct {
		name, stream, prefix string
	}{
		{"tendril handshake", string(handshake), "\x00"},
		{"HTTP", "GET / HTTP/1.1\r\n\r\n", "G"},
		{"POST is not PROXY", "POST / HTTP/1.1\r\n\r\n", "PO"},
		{"almost v1", "PROX\x00\x00\x00\x00", "PROX\x00"},
		{"lowercase v1", "proxy TCP4", "p"},
		{"CRLF", "\r\nGET /", "\r\nG"},
		{"almost v2", "\r\n\r\n\x00\r\nQUIX\n\x21\x11\x00\x00", "\r\n\r\n\x00\r\nQUIX"},
		{"v2 but the last", "\r\n\r\n\x00\r\nQUIT\r", "\r\n\r\n\x00\r\nQUIT\r"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, rd := range readers {
				br := bytes.NewReader([]byte(tc.stream))
				h, prefix, isProxy, err := Read(rd.wrap(br))
				if err != nil || isProxy || h != (Header{}) {
					t.Fatalf("%s: Read = %+v, %q, %v, %v; want no header", rd.name, h, prefix, isProxy, err)
				}
				if string(prefix) != tc.prefix {
					t.Errorf("%s: prefix %q, want %q", rd.name, prefix, tc.prefix)
				}
				rest, _ := io.ReadAll(br)
				if got := string(prefix) + string(rest); got != tc.stream {
					t.Errorf("%s: prefix and rest %q, want the stream %q", rd.name, got, tc.stream)
				}
			}
		})
	}
}

// TestReadErrors checks the stream ending or failing before a signature is complete:
// the bytes read so far come back with the error.
func TestReadErrors(t *testing.T) {
	for _, tc := range []struct {
		name, stream, prefix string
	}{
		{"empty", "", ""},
		{"partial v1", "PRO", "PRO"},
		{"partial v2", "\r\n\r\n", "\r\n\r\n"},
	} {
		_, prefix, isProxy, err := Read(strings.NewReader(tc.stream))
		if !errors.Is(err, io.EOF) || isProxy || string(prefix) != tc.prefix {
			t.Errorf("%s: Read = %q, %v, %v; want %q, io.EOF", tc.name, prefix, isProxy, err, tc.prefix)
		}
	}
	boom := errors.New("boom")
	_, _, isProxy, err := Read(io.MultiReader(strings.NewReader("PROXY TCP4 "), iotest.ErrReader(boom)))
	if !errors.Is(err, boom) || errors.Is(err, ErrMalformed) || !isProxy {
		t.Errorf("failing read in a v1 line: %v, %v; want boom, not ErrMalformed", isProxy, err)
	}
}
