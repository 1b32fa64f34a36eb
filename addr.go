package tendril

import (
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"strings"

	ma "github.com/multiformats/go-multiaddr"

	"github.com/tendril-p2p/tendril/secio"
)

// Addr is a dialable address: a TCP multiaddr (/ip4, /ip6, /dns, /dns4 or /dns6 followed by
// /tcp/PORT) and, optionally, the peer ID expected there (/p2p/PEERID).
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

// ParseAddr parses "/ip4/1.2.3.4/tcp/4001[/p2p/PEERID]" and the /ip6, /dns, /dns4 and /dns6
// forms. Errors wrap ErrInvalidAddr.
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
	a.Transport = m
	if _, _, err := a.hostPort(); err != nil {
		return Addr{}, err
	}
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

// hostPort returns the network ("tcp", "tcp4" or "tcp6") and "host:port" to dial or listen on.
func (a Addr) hostPort() (network, hostport string, err error) {
	comps := []ma.Component(a.Transport)
	if len(comps) != 2 {
		return "", "", fmt.Errorf("%w: %q: want /ip4|/ip6|/dns|/dns4|/dns6 then /tcp", ErrInvalidAddr, a.Transport.String())
	}
	host, port := comps[0], comps[1]
	if port.Code() != ma.P_TCP {
		return "", "", fmt.Errorf("%w: %q: only /tcp is supported", ErrInvalidAddr, a.Transport.String())
	}
	switch host.Code() {
	case ma.P_IP4, ma.P_DNS4:
		network = "tcp4"
	case ma.P_IP6, ma.P_DNS6:
		network = "tcp6"
	case ma.P_DNS:
		network = "tcp"
	default:
		return "", "", fmt.Errorf("%w: %q: unsupported host protocol %s", ErrInvalidAddr, a.Transport.String(), host.Protocol().Name)
	}
	return network, net.JoinHostPort(host.Value(), port.Value()), nil
}

// addrFromNet converts a TCP net.Addr into an Addr.
func addrFromNet(na net.Addr, peer secio.PeerID) Addr {
	tcp, ok := na.(*net.TCPAddr)
	if !ok {
		return Addr{Peer: peer}
	}
	proto := "ip4"
	ip := tcp.IP.To4()
	if ip == nil {
		proto, ip = "ip6", tcp.IP
	}
	m, err := ma.NewMultiaddr("/" + proto + "/" + ip.String() + "/tcp/" + strconv.Itoa(tcp.Port))
	if err != nil {
		return Addr{Peer: peer}
	}
	return Addr{Transport: m, Peer: peer}
}
