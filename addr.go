package tendril

import (
	"fmt"
	"log/slog"
	"strings"

	ma "github.com/multiformats/go-multiaddr"

	"github.com/tendril-p2p/tendril/secio"
)

// Addr is a dialable address: a transport multiaddr and, optionally, the peer ID expected
// there (/p2p/PEERID). The transport part is what a Service's transports handle, written
// as go-multiaddr and libp2p write it: /ip4/1.2.3.4/tcp/4001 (TCP; also /ip6, /dns,
// /dns4, /dns6), /ip4/1.2.3.4/tcp/443/ws and /dns/example.com/tcp/443/wss (WebSocket;
// /tls/ws is the same as /wss), /memory/7 (in one process).
//
// The /p2p/ part is kept apart from the multiaddr because tendril peer IDs are BLAKE3
// multihashes, which go-multiaddr's /p2p/ codec (sha2-256 and identity only) does not accept.
// A dial to an Addr with a peer ID verifies it inside the handshake, before any ECDH.
type Addr struct {
	// Transport is the network part, e.g. /ip4/127.0.0.1/tcp/4001.
	Transport ma.Multiaddr
	// Peer is the expected peer ID; zero if none.
	Peer secio.PeerID
}

// ParseAddr parses "MULTIADDR[/p2p/PEERID]", e.g. "/ip4/1.2.3.4/tcp/4001/p2p/PEERID". It
// checks the multiaddr's syntax; whether a transport handles it is known when it is
// dialled (an error wrapping ErrInvalidAddr and transport.ErrUnsupported). Errors wrap
// ErrInvalidAddr.
func ParseAddr(s string) (Addr, error) {
	var a Addr
	transport := s
	if i := strings.Index(s, "/p2p/"); i >= 0 {
		transport = s[:i]
		idStr := s[i+len("/p2p/"):]
		if idStr == "" || strings.Contains(idStr, "/") {
			return Addr{}, fmt.Errorf("%w: %q: /p2p/ must be last and hold one peer ID", ErrInvalidAddr, s)
		}
		id, err := secio.ParsePeerID(idStr)
		if err != nil {
			return Addr{}, fmt.Errorf("%w: %q: %w", ErrInvalidAddr, s, err)
		}
		a.Peer = id
	}
	m, err := ma.NewMultiaddr(transport)
	if err != nil {
		return Addr{}, fmt.Errorf("%w: %q: %v", ErrInvalidAddr, s, err)
	}
	if len(m) == 0 {
		return Addr{}, fmt.Errorf("%w: %q: no transport address", ErrInvalidAddr, s)
	}
	a.Transport = m
	return a, nil
}

// MustParseAddr is ParseAddr for constants in programs and tests; it panics on error.
func MustParseAddr(s string) Addr {
	a, err := ParseAddr(s)
	if err != nil {
		panic(err)
	}
	return a
}

// String returns the multiaddr form, with /p2p/PEERID when the peer is known.
func (a Addr) String() string {
	s := a.Transport.String()
	if !a.Peer.IsZero() {
		s += "/p2p/" + a.Peer.String()
	}
	return s
}

// LogValue makes log/slog print the address as its string, formatted only if the record is
// actually logged.
func (a Addr) LogValue() slog.Value { return slog.StringValue(a.String()) }

// WithPeer returns a copy of a that expects peer id.
func (a Addr) WithPeer(id secio.PeerID) Addr {
	a.Peer = id
	return a
}

// IsZero reports whether a is the zero Addr.
func (a Addr) IsZero() bool { return len(a.Transport) == 0 && a.Peer.IsZero() }

// MarshalText implements encoding.TextMarshaler.
func (a Addr) MarshalText() ([]byte, error) { return []byte(a.String()), nil }

// UnmarshalText implements encoding.TextUnmarshaler.
func (a *Addr) UnmarshalText(b []byte) error {
	p, err := ParseAddr(string(b))
	if err != nil {
		return err
	}
	*a = p
	return nil
}
