// Package proxyhdr tells a listener who a trusted reverse proxy says its client is: the
// [PROXY protocol] header (versions 1 and 2) that HAProxy, nginx's stream module and cloud
// load balancers put before the client's bytes, and the X-Forwarded-For and Forwarded
// ([RFC 7239]) headers that HTTP proxies add to a WebSocket upgrade.
//
// The caller decides whom to believe (transport.ListenOptions.TrustedProxies): Accept
// reads a PROXY header only on a connection it is told is trusted, and ClientAddr walks a
// forwarding chain only from a trusted remote address. Even then every byte is treated as
// hostile: the parsers are strict, and everything they read or look at is bounded (a v1
// line is at most 107 bytes, a v2 header at most 4 KiB, a forwarding chain at most 4 KiB
// and 64 entries).
//
// The PROXY header is optional on a trusted connection: the specification asks receivers
// to require it, but a trusted network may also hold direct peers and proxy health checks.
// A stream that does not start with a PROXY signature is not a header: Read stops at the
// first byte that differs from both signatures (the first byte, for a tendril handshake,
// which starts with 0x00) and hands back what it read, for the caller to put back.
//
// [PROXY protocol]: https://www.haproxy.org/download/2.9/doc/proxy-protocol.txt
// [RFC 7239]: https://www.rfc-editor.org/rfc/rfc7239
package proxyhdr

import (
	"errors"
	"fmt"
	"io"
	"net/netip"
)

// ErrMalformed is wrapped by the errors of Read and Accept when a stream starts with a
// PROXY signature and what follows is not a valid header: bad syntax, an unknown version,
// command or family, a bad checksum, a header cut short by the end of the stream, or one
// longer than this package accepts.
var ErrMalformed = errors.New("proxyhdr: malformed PROXY header")

// Header is a PROXY protocol header.
type Header struct {
	// Source is the client's address and port, Destination the address it connected to
	// (the proxy's listener). Both are zero when Local is set.
	Source, Destination netip.AddrPort
	// Local means the header gives no client address and the connection keeps its own:
	// a v2 LOCAL command (a proxy's health check), a v1 UNKNOWN line, or a v2 PROXY
	// command whose family is not TCP over IPv4 or IPv6 (unspecified, UDP, Unix sockets:
	// the specification lets a receiver fall back to the real endpoints for those).
	Local bool
	// Version is 1 (the text line) or 2 (binary).
	Version int
}

// The two signatures; a v1 header is known by "PROXY" alone (the specification's test),
// so that "PROXY" followed by anything but a space is a malformed header, not a stream
// to pass on.
var (
	sigV1 = [5]byte{'P', 'R', 'O', 'X', 'Y'}
	sigV2 = [12]byte{'\r', '\n', '\r', '\n', 0, '\r', '\n', 'Q', 'U', 'I', 'T', '\n'}
)

// maxPrefix is the most Read consumes of a stream that turns out not to start with a
// header: all but the last byte of the longer signature, and the byte that differed.
const maxPrefix = len(sigV2)

// Read reads a PROXY protocol header from r if r starts with one, reading exactly the
// header's bytes and never one more: what follows (a handshake) stays unread in r.
//
// If r does not start with a PROXY signature, isProxy is false and prefix holds the bytes
// read to find out (at most 12, and a single byte unless the stream starts like a
// signature): they belong to the stream and the caller must put them back in front of it.
// A read error before the signature is complete is returned with the bytes read so far.
//
// Once a signature has been read, isProxy is true and prefix is nil: an invalid header
// is an error wrapping ErrMalformed (with io.ErrUnexpectedEOF too if the stream ended in
// it), any other read error is returned wrapped.
//
// Read makes small reads (the signature and a v1 line byte by byte, since nothing else
// says where they end), so that r can be the connection itself: a buffered reader in
// between would take the handshake's first bytes with it. It blocks on r's reads: the
// caller bounds them (a read deadline on a connection).
func Read(r io.Reader) (h Header, prefix []byte, isProxy bool, err error) {
	var sig [maxPrefix]byte
	n, v, err := readSignature(r, &sig)
	if err != nil || v == 0 {
		return Header{}, sig[:n:n], false, err
	}
	if v == 1 {
		h, err = readV1(r)
	} else {
		h, err = readV2(r)
	}
	if err != nil {
		return Header{}, nil, true, err
	}
	return h, nil, true, nil
}

// readSignature reads r one byte at a time while what it has read is a prefix of a
// signature. It returns how many bytes it read into sig, and the version of the complete
// signature it found, or 0 if a byte differed (that byte is the last of sig[:n]).
func readSignature(r io.Reader, sig *[maxPrefix]byte) (n, version int, err error) {
	for {
		if _, err := io.ReadFull(r, sig[n:n+1]); err != nil {
			return n, 0, err
		}
		n++
		got := sig[:n]
		v1 := n <= len(sigV1) && string(got) == string(sigV1[:n])
		v2 := string(got) == string(sigV2[:n])
		switch {
		case v1 && n == len(sigV1):
			return n, 1, nil
		case v2 && n == len(sigV2):
			return n, 2, nil
		case !v1 && !v2:
			return n, 0, nil
		}
	}
}

// readErr wraps an error of reading inside a header: the stream's end there means the
// header is truncated, hence malformed.
func readErr(what string, err error) error {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return fmt.Errorf("%w: %s cut short: %w", ErrMalformed, what, io.ErrUnexpectedEOF)
	}
	return fmt.Errorf("proxyhdr: reading %s: %w", what, err)
}
