package proxyhdr

import (
	"errors"
	"io"
	"strings"
	"testing"
)

func TestV1(t *testing.T) {
	max6 := "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff"
	for _, tc := range []struct {
		name, line string
		want       Header
	}{
		{"TCP4", "PROXY TCP4 192.168.0.1 192.168.0.11 56324 443\r\n",
			Header{Source: ap("192.168.0.1:56324"), Destination: ap("192.168.0.11:443"), Version: 1}},
		{"TCP4 longest", "PROXY TCP4 255.255.255.255 255.255.255.255 65535 65535\r\n",
			Header{Source: ap("255.255.255.255:65535"), Destination: ap("255.255.255.255:65535"), Version: 1}},
		{"TCP4 port 0", "PROXY TCP4 0.0.0.0 10.0.0.1 0 0\r\n",
			Header{Source: ap("0.0.0.0:0"), Destination: ap("10.0.0.1:0"), Version: 1}},
		{"TCP6", "PROXY TCP6 2001:db8::1 2001:db8::2 4711 443\r\n",
			Header{Source: ap("[2001:db8::1]:4711"), Destination: ap("[2001:db8::2]:443"), Version: 1}},
		{"TCP6 longest", "PROXY TCP6 " + max6 + " " + max6 + " 65535 65535\r\n",
			Header{Source: ap("[" + max6 + "]:65535"), Destination: ap("[" + max6 + "]:65535"), Version: 1}},
		{"TCP6 upper case", "PROXY TCP6 2001:DB8::1 ::1 1 2\r\n",
			Header{Source: ap("[2001:db8::1]:1"), Destination: ap("[::1]:2"), Version: 1}},
		{"TCP6 mapped IPv4", "PROXY TCP6 ::ffff:192.0.2.1 ::1 1 2\r\n",
			Header{Source: ap("[::ffff:192.0.2.1]:1"), Destination: ap("[::1]:2"), Version: 1}},
		{"UNKNOWN", "PROXY UNKNOWN\r\n", Header{Local: true, Version: 1}},
		{"UNKNOWN with addresses", "PROXY UNKNOWN 192.168.0.1 192.168.0.11 56324 443\r\n", Header{Local: true, Version: 1}},
		{"UNKNOWN longest", "PROXY UNKNOWN " + max6 + " " + max6 + " 65535 65535\r\n", Header{Local: true, Version: 1}},
		{"UNKNOWN anything", "PROXY UNKNOWN \x01 junk \r junk\r\n", Header{Local: true, Version: 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if len(tc.line) > maxV1 {
				t.Fatalf("test line of %d bytes", len(tc.line))
			}
			checkRead(t, []byte(tc.line), tc.want)
		})
	}
}

func TestV1Malformed(t *testing.T) {
	for _, tc := range []struct{ name, line string }{
		{"no space", "PROXYTCP4 1.2.3.4 5.6.7.8 1 2\r\n"},
		{"empty", "PROXY\r\n"},
		{"only a space", "PROXY \r\n"},
		{"lower-case protocol", "PROXY tcp4 1.2.3.4 5.6.7.8 1 2\r\n"},
		{"unknown protocol", "PROXY UDP4 1.2.3.4 5.6.7.8 1 2\r\n"},
		{"UNKNOWN run on", "PROXY UNKNOWNX\r\n"},
		{"two spaces", "PROXY TCP4  1.2.3.4 5.6.7.8 1 2\r\n"},
		{"two spaces later", "PROXY TCP4 1.2.3.4 5.6.7.8  1 2\r\n"},
		{"trailing space", "PROXY TCP4 1.2.3.4 5.6.7.8 1 2 \r\n"},
		{"tab", "PROXY TCP4 1.2.3.4\t5.6.7.8 1 2\r\n"},
		{"missing port", "PROXY TCP4 1.2.3.4 5.6.7.8 1\r\n"},
		{"extra field", "PROXY TCP4 1.2.3.4 5.6.7.8 1 2 3\r\n"},
		{"LF alone", "PROXY TCP4 1.2.3.4 5.6.7.8 1 2\n"},
		{"UNKNOWN LF alone", "PROXY UNKNOWN xy\n"},
		{"CR alone", "PROXY TCP4 1.2.3.4 5.6.7.8 1 2\r\r\n"},
		{"IPv4 leading zero", "PROXY TCP4 192.168.0.01 5.6.7.8 1 2\r\n"},
		{"IPv4 octet too big", "PROXY TCP4 1.2.3.256 5.6.7.8 1 2\r\n"},
		{"IPv4 three octets", "PROXY TCP4 1.2.3 5.6.7.8 1 2\r\n"},
		{"IPv6 in TCP4", "PROXY TCP4 ::1 5.6.7.8 1 2\r\n"},
		{"IPv4 in TCP6", "PROXY TCP6 1.2.3.4 ::1 1 2\r\n"},
		{"IPv6 destination in TCP4", "PROXY TCP4 1.2.3.4 ::1 1 2\r\n"},
		{"IPv6 zone", "PROXY TCP6 fe80::1%eth0 ::1 1 2\r\n"},
		{"IPv6 brackets", "PROXY TCP6 [::1] ::1 1 2\r\n"},
		{"host name", "PROXY TCP4 localhost 5.6.7.8 1 2\r\n"},
		{"port leading zero", "PROXY TCP4 1.2.3.4 5.6.7.8 01 2\r\n"},
		{"port 00", "PROXY TCP4 1.2.3.4 5.6.7.8 1 00\r\n"},
		{"port too big", "PROXY TCP4 1.2.3.4 5.6.7.8 65536 2\r\n"},
		{"port six digits", "PROXY TCP4 1.2.3.4 5.6.7.8 100000 2\r\n"},
		{"port sign", "PROXY TCP4 1.2.3.4 5.6.7.8 +1 2\r\n"},
		{"port negative", "PROXY TCP4 1.2.3.4 5.6.7.8 1 -2\r\n"},
		{"port hex", "PROXY TCP4 1.2.3.4 5.6.7.8 0x1 2\r\n"},
		{"port empty", "PROXY TCP4 1.2.3.4 5.6.7.8  2\r\n"},
		{"108 bytes", "PROXY UNKNOWN " + strings.Repeat("x", 92) + "\r\n"},
		{"no line end", "PROXY UNKNOWN " + strings.Repeat("x", 200)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			checkMalformed(t, []byte(tc.line))
		})
	}
}

// TestV1Truncated checks every cut of a valid line: the stream's end inside it is a
// malformed header (and io.ErrUnexpectedEOF).
func TestV1Truncated(t *testing.T) {
	line := "PROXY TCP4 192.168.0.1 192.168.0.11 56324 443\r\n"
	for n := len(sigV1); n < len(line); n++ {
		_, _, isProxy, err := Read(strings.NewReader(line[:n]))
		if !isProxy || !errors.Is(err, ErrMalformed) || !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Errorf("%q: %v, %v; want ErrMalformed and io.ErrUnexpectedEOF", line[:n], isProxy, err)
		}
	}
}

// TestV1Length checks the bound at exactly 107 bytes: the longest line is read, one more
// byte before the CRLF is refused without reading past the 107th.
func TestV1Length(t *testing.T) {
	ok := "PROXY UNKNOWN " + strings.Repeat("x", 91) + "\r\n"
	if len(ok) != maxV1 {
		t.Fatalf("line of %d bytes", len(ok))
	}
	checkRead(t, []byte(ok), Header{Local: true, Version: 1})
	long := "PROXY UNKNOWN " + strings.Repeat("x", 92) + "\r\n"
	r := strings.NewReader(long)
	if _, _, _, err := Read(r); !errors.Is(err, ErrMalformed) {
		t.Fatalf("108-byte line: %v", err)
	}
	if read := len(long) - r.Len(); read != maxV1 {
		t.Errorf("read %d bytes of a line too long, want %d", read, maxV1)
	}
}
