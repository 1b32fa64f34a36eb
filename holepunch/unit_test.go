package holepunch

import (
	"testing"
	"time"

	ma "github.com/multiformats/go-multiaddr"

	"github.com/tendril-p2p/tendril/secio"
)

func peerID(t *testing.T) secio.PeerID {
	t.Helper()
	k, err := secio.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	return k.Public().PeerID()
}

// TestLimiter: MaxAttempts per window and one at a time per peer, on a fixed clock; the
// table stays within maxTrackedPeers.
func TestLimiter(t *testing.T) {
	l := newLimiter(2, time.Minute)
	p, q := peerID(t), peerID(t)
	t0 := time.Unix(1000, 0)
	if !l.take(p, t0) {
		t.Fatal("first attempt refused")
	}
	if l.take(p, t0) {
		t.Fatal("a second attempt while one is in flight")
	}
	if !l.take(q, t0) {
		t.Fatal("another peer refused")
	}
	l.done(p)
	if !l.take(p, t0.Add(time.Second)) {
		t.Fatal("second attempt in the window refused")
	}
	l.done(p)
	if l.take(p, t0.Add(59*time.Second)) {
		t.Fatal("a third attempt in the window")
	}
	if !l.take(p, t0.Add(time.Minute)) {
		t.Fatal("refused in the next window")
	}
	l.done(p)
	l.done(q)
	for i := range 3 * maxTrackedPeers {
		id := peerID(t)
		l.take(id, t0.Add(time.Duration(i)*time.Millisecond))
		l.done(id)
	}
	if n := len(l.peers); n > maxTrackedPeers {
		t.Fatalf("%d peers tracked", n)
	}
}

// TestConnectRoundTrip: a CONNECT decodes to what was encoded; encoding keeps at most the
// limit, and drops addresses too long to send.
func TestConnectRoundTrip(t *testing.T) {
	addrs := []ma.Multiaddr{
		ma.StringCast("/ip4/198.51.100.1/tcp/4001"),
		ma.StringCast("/ip6/2001:db8::1/tcp/4001"),
		ma.StringCast("/ip4/198.51.100.2/tcp/4002"),
	}
	b := appendConnect(nil, connectMsg{addrs: addrs, rewritesPorts: true}, 2)
	body := b[1:]
	m, err := parseConnect(body, 2)
	if err != nil {
		t.Fatal(err)
	}
	if !m.rewritesPorts || len(m.addrs) != 2 || !m.addrs[0].Equal(addrs[0]) || !m.addrs[1].Equal(addrs[1]) {
		t.Fatalf("decoded %+v", m)
	}
	if _, err := parseConnect(body, 1); err == nil {
		t.Fatal("two addresses accepted with a limit of one")
	}
	for i := range body {
		if _, err := parseConnect(body[:i], 2); err == nil {
			t.Fatalf("a CONNECT cut at %d bytes decoded", i)
		}
	}
}

func FuzzParseConnect(f *testing.F) {
	f.Add(appendConnect(nil, connectMsg{addrs: []ma.Multiaddr{ma.StringCast("/ip4/198.51.100.1/tcp/4001")}}, 8)[1:])
	f.Fuzz(func(t *testing.T, body []byte) {
		m, err := parseConnect(body, DefaultMaxAddrs)
		if err != nil {
			return
		}
		if len(m.addrs) > DefaultMaxAddrs {
			t.Fatalf("%d addresses", len(m.addrs))
		}
		again, err := parseConnect(appendConnect(nil, m, DefaultMaxAddrs)[1:], DefaultMaxAddrs)
		if err != nil || len(again.addrs) != len(m.addrs) || again.rewritesPorts != m.rewritesPorts {
			t.Fatalf("re-encoded: %+v, %v", again, err)
		}
	})
}
