package tendril

import (
	"errors"
	"testing"

	"github.com/tendril-p2p/tendril/secio"
)

func TestParseAddr(t *testing.T) {
	key, _ := secio.GenerateKey()
	id := key.PeerID()
	good := []string{
		"/ip4/127.0.0.1/tcp/4001",
		"/ip6/::1/tcp/4001",
		"/dns4/localhost/tcp/1",
		"/ip4/10.0.0.1/tcp/9/p2p/" + id.String(),
		"/ip4/127.0.0.1/tcp/4001/ws",
		"/dns/example.com/tcp/443/wss/p2p/" + id.String(),
		"/dns/example.com/tcp/443/tls/ws",
		"/memory/7",
		"/ip4/1.2.3.4/udp/1", // parses; no default transport dials it (TestDialUnsupported)
	}
	for _, s := range good {
		a, err := ParseAddr(s)
		if err != nil {
			t.Fatalf("%s: %v", s, err)
		}
		if a.String() != s {
			t.Fatalf("round trip %s -> %s", s, a)
		}
	}
	bad := []string{"", "/p2p/" + id.String(), "/ip4/1.2.3.4/tcp/1/p2p/", "/ip4/1.2.3.4/tcp/1/p2p/notanid", "garbage"}
	for _, s := range bad {
		if _, err := ParseAddr(s); !errors.Is(err, ErrInvalidAddr) {
			t.Errorf("%q: %v, want ErrInvalidAddr", s, err)
		}
	}
}

// FuzzParseAddr feeds arbitrary strings to ParseAddr (user input: command lines, config
// files, addresses learnt from peers). It must never panic; what it accepts must print back
// to a string that parses to the same address, and what it refuses must wrap ErrInvalidAddr.
// Seeds: f.Add below and testdata/fuzz/FuzzParseAddr.
func FuzzParseAddr(f *testing.F) {
	for _, s := range []string{
		"/ip4/127.0.0.1/tcp/4001",
		"/ip6/::1/tcp/0",
		"/dns/example.com/tcp/443",
		"/dns4/localhost/tcp/1/p2p/gW3BXdPdNE8Rq2guvJUdVMvh2qLZar8UWrUrEgm78CmwdP",
		"/ip4/1.2.3.4/tcp/1/p2p/",
		"/ip4/1.2.3.4/udp/1",
		"/p2p/gW3BXdPdNE8Rq2guvJUdVMvh2qLZar8UWrUrEgm78CmwdP",
		"/ip4/1.2.3.4/tcp/99999",
		"",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		a, err := ParseAddr(s)
		if err != nil {
			if !errors.Is(err, ErrInvalidAddr) {
				t.Fatalf("ParseAddr(%q): %v does not wrap ErrInvalidAddr", s, err)
			}
			return
		}
		text := a.String()
		b, err := ParseAddr(text)
		if err != nil {
			t.Fatalf("ParseAddr(%q) = %q, which does not parse: %v", s, text, err)
		}
		if !a.Transport.Equal(b.Transport) || a.Peer != b.Peer || b.String() != text {
			t.Fatalf("round trip %q -> %q -> %q", s, text, b.String())
		}
		var u Addr
		if err := u.UnmarshalText([]byte(text)); err != nil || u.String() != text {
			t.Fatalf("UnmarshalText(%q): %v, %q", text, err, u.String())
		}
	})
}
