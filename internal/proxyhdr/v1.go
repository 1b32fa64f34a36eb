package proxyhdr

import (
	"fmt"
	"io"
	"net/netip"
	"strings"
)

// maxV1 is the longest v1 line with its CRLF (the specification's worst case, an UNKNOWN
// line carrying two full IPv6 addresses and ports).
const maxV1 = 107

// readV1 reads the rest of a v1 line after "PROXY" and parses it. It reads one byte at a
// time, since nothing but the CRLF says where the line ends and the handshake begins.
func readV1(r io.Reader) (Header, error) {
	var line [maxV1 - len(sigV1)]byte
	n := 0
	for {
		if n == len(line) {
			return Header{}, fmt.Errorf("%w: v1 line longer than %d bytes", ErrMalformed, maxV1)
		}
		if _, err := io.ReadFull(r, line[n:n+1]); err != nil {
			return Header{}, readErr("v1 line", err)
		}
		n++
		if line[n-1] == '\n' {
			break
		}
	}
	if n < 2 || line[n-2] != '\r' {
		return Header{}, fmt.Errorf("%w: v1 line not ended by CRLF", ErrMalformed)
	}
	return parseV1(string(line[:n-2]))
}

// parseV1 parses what follows "PROXY" on a v1 line, without the CRLF: a space, then
// "UNKNOWN" and anything, or "TCP4" or "TCP6" and exactly four fields, each after exactly
// one space.
func parseV1(s string) (Header, error) {
	s, ok := strings.CutPrefix(s, " ")
	if !ok {
		return Header{}, fmt.Errorf("%w: v1: no space after PROXY", ErrMalformed)
	}
	if s == "UNKNOWN" || strings.HasPrefix(s, "UNKNOWN ") {
		// The sender could not say; the specification has the receiver ignore the rest.
		return Header{Local: true, Version: 1}, nil
	}
	f := strings.Split(s, " ")
	if len(f) != 5 {
		return Header{}, fmt.Errorf("%w: v1: want protocol, 2 addresses and 2 ports separated by single spaces", ErrMalformed)
	}
	var want6 bool
	switch f[0] {
	case "TCP4":
	case "TCP6":
		want6 = true
	default:
		return Header{}, fmt.Errorf("%w: v1: unknown protocol %q", ErrMalformed, f[0])
	}
	src, err := parseV1Addr(f[1], want6)
	if err != nil {
		return Header{}, fmt.Errorf("%w: v1 source address: %v", ErrMalformed, err)
	}
	dst, err := parseV1Addr(f[2], want6)
	if err != nil {
		return Header{}, fmt.Errorf("%w: v1 destination address: %v", ErrMalformed, err)
	}
	sport, ok := parsePort(f[3], false)
	if !ok {
		return Header{}, fmt.Errorf("%w: v1 source port %q", ErrMalformed, f[3])
	}
	dport, ok := parsePort(f[4], false)
	if !ok {
		return Header{}, fmt.Errorf("%w: v1 destination port %q", ErrMalformed, f[4])
	}
	return Header{
		Source:      netip.AddrPortFrom(src, sport),
		Destination: netip.AddrPortFrom(dst, dport),
		Version:     1,
	}, nil
}

// parseV1Addr parses an address of the family the line announced. netip already refuses
// leading zeros in IPv4 (the specification forbids them, against octal readings); a zone
// means nothing on another host.
func parseV1Addr(s string, want6 bool) (netip.Addr, error) {
	a, err := netip.ParseAddr(s)
	switch {
	case err != nil:
		return netip.Addr{}, err
	case a.Is6() != want6:
		return netip.Addr{}, fmt.Errorf("%q is not of the announced family", s)
	case a.Zone() != "":
		return netip.Addr{}, fmt.Errorf("%q has a zone", s)
	}
	return a, nil
}

// parsePort parses a decimal port of 1 to 5 digits, at most 65535. Leading zeros are
// refused unless leadingZeros is set: the PROXY specification forbids them, RFC 7239's
// node-port (1*5DIGIT) allows them.
func parsePort(s string, leadingZeros bool) (uint16, bool) {
	if len(s) == 0 || len(s) > 5 || (!leadingZeros && len(s) > 1 && s[0] == '0') {
		return 0, false
	}
	v := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		v = v*10 + int(c-'0')
	}
	if v > 65535 {
		return 0, false
	}
	return uint16(v), true
}
