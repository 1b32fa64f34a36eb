package proxyhdr

import (
	"bytes"
	"encoding/binary"
	"errors"
	"net/http"
	"net/netip"
	"strings"
	"testing"
	"testing/iotest"
)

// countReader serves data and counts what it gave.
type countReader struct {
	data []byte
	off  int
}

func (r *countReader) Read(p []byte) (int, error) {
	if r.off == len(r.data) {
		return 0, errEnd
	}
	n := copy(p, r.data[r.off:])
	r.off += n
	return n, nil
}

// errEnd ends a countReader's data: not io.EOF, so that a header cut short is told
// apart from one that is malformed.
var errEnd = errors.New("end of data")

// FuzzReadV1V2 checks that Read never panics, reads at most the bounds it documents, and
// reads exactly a header: the same bytes alone parse to the same header, one byte fewer
// do not, and what is not a header is handed back whole.
func FuzzReadV1V2(f *testing.F) {
	for _, s := range [][]byte{
		handshake,
		[]byte("GET / HTTP/1.1\r\n"),
		[]byte("PROXY TCP4 192.168.0.1 192.168.0.11 56324 443\r\n"),
		[]byte("PROXY TCP6 2001:db8::1 2001:db8::2 4711 443\r\nrest"),
		[]byte("PROXY UNKNOWN\r\n"),
		[]byte("PROXY TCP4 1.2.3.4 5.6.7.8 01 2\r\n"),
		v2(0x21, famTCP4, inet4),
		v2(0x21, famTCP6, inet6, tlv(1, []byte("h2"))),
		withCRC(v2(0x21, famTCP4, inet4)),
		v2(0x20, famUnspec),
		v2(0x21, famUnixS, unixAddrs),
		v2(0x21, famTCP4, inet4, []byte{1, 0xff, 0xff}),
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		r := &countReader{data: data}
		h, prefix, isProxy, err := Read(r)
		n := r.off
		if !isProxy {
			if h != (Header{}) || !bytes.Equal(prefix, data[:n]) || n > maxPrefix {
				t.Fatalf("no header: %+v, prefix %q of %d bytes read", h, prefix, n)
			}
			if err == nil && n > 1 && data[0] != 'P' && data[0] != '\r' {
				t.Fatalf("read %d bytes of a stream starting %#x", n, data[0])
			}
			return
		}
		if prefix != nil {
			t.Fatalf("header with prefix %q", prefix)
		}
		if data[0] == 'P' && n > maxV1 || n > maxV2 {
			t.Fatalf("read %d bytes", n)
		}
		if err != nil {
			if !errors.Is(err, ErrMalformed) && !errors.Is(err, errEnd) {
				t.Fatalf("error %v neither malformed nor the reader's", err)
			}
			return
		}
		switch {
		case h.Version != 1 && h.Version != 2:
			t.Fatalf("version %d", h.Version)
		case h.Local && (h.Source.IsValid() || h.Destination.IsValid()):
			t.Fatalf("Local header with addresses %+v", h)
		case !h.Local && (!h.Source.IsValid() || !h.Destination.IsValid() || h.Source.Addr().Zone() != ""):
			t.Fatalf("header without valid addresses %+v", h)
		}
		// Where the header ends, by the format: v1 at its first LF, v2 after its length.
		if end := bytes.IndexByte(data, '\n') + 1; h.Version == 1 && n != end {
			t.Fatalf("v1 header of %d bytes, read %d", end, n)
		}
		if h.Version == 2 && n != 16+int(binary.BigEndian.Uint16(data[14:16])) {
			t.Fatalf("v2 header of 16+%d bytes, read %d", binary.BigEndian.Uint16(data[14:16]), n)
		}
		h2, _, _, err := Read(iotest.OneByteReader(bytes.NewReader(data[:n])))
		if err != nil || h2 != h {
			t.Fatalf("the header's %d bytes alone: %+v, %v; want %+v", n, h2, err, h)
		}
		if _, _, _, err := Read(bytes.NewReader(data[:n-1])); err == nil {
			t.Fatalf("the header's first %d of %d bytes parsed", n-1, n)
		}
	})
}

// FuzzClientAddr checks that ClientAddr never panics, asks trusted about a bounded number
// of addresses, returns remote or a clean address, and that client text added on the
// left of a chain never changes a client it found.
func FuzzClientAddr(f *testing.F) {
	f.Add("192.0.2.1, 10.0.0.2", "", "junk", true)
	f.Add("", `for="[2001:db8::1]:4711";proto=https, for=10.0.0.2`, "for=6.6.6.6", true)
	f.Add("6.6.6.6\n198.51.100.17", "for=198.51.100.17", `for="`, true)
	f.Add("[2001:db8::1]:80", "for=unknown", "", false)
	f.Fuzz(func(t *testing.T, xff, fwd, junk string, remoteTrusted bool) {
		remote := proxy
		if !remoteTrusted {
			remote = stray
		}
		h := http.Header{}
		if xff != "" {
			h["X-Forwarded-For"] = strings.Split(xff, "\n")
		}
		if fwd != "" {
			h["Forwarded"] = strings.Split(fwd, "\n")
		}
		calls := 0
		trusted := func(a netip.Addr) bool { calls++; return isTrusted(a) }
		got := ClientAddr(remote, h, trusted)
		if calls > 1+2*maxChain {
			t.Fatalf("trusted called %d times", calls)
		}
		if got == remote {
			return
		}
		a := got.Addr()
		if !remoteTrusted || !a.IsValid() || a.Zone() != "" || a.Is4In6() {
			t.Fatalf("ClientAddr = %v from remote %v", got, remote)
		}
		if isTrusted(a) {
			return // every entry trusted: the leftmost, which added text moves
		}
		longer := http.Header{}
		for k, lines := range h {
			longer[k] = append([]string{junk}, lines...)
		}
		if again := ClientAddr(remote, longer, isTrusted); again != got {
			t.Fatalf("client %v became %v with %q on the left", got, again, junk)
		}
	})
}
