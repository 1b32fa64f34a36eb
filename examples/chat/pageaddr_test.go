package main

import (
	"strings"
	"testing"

	"github.com/tendril-p2p/tendril/secio"
)

func testPeerID(t *testing.T) string {
	t.Helper()
	k, err := secio.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	return k.PeerID().String()
}

func TestPageAddr(t *testing.T) {
	testPeer := testPeerID(t)
	for _, tc := range []struct{ url, want string }{
		{"http://127.0.0.1:8080/", "/ip4/127.0.0.1/tcp/8080/ws"},
		{"http://127.0.0.1:8080/?name=ann#x", "/ip4/127.0.0.1/tcp/8080/ws"},
		{"http://[::1]:8080/", "/ip6/::1/tcp/8080/ws"},
		{"http://[::ffff:10.0.0.1]:81/", "/ip4/10.0.0.1/tcp/81/ws"},
		{"http://localhost/", "/dns/localhost/tcp/80/ws"},
		{"https://chat.example.org/", "/dns/chat.example.org/tcp/443/wss"},
		{"https://chat.example.org:8443/index.html", "/dns/chat.example.org/tcp/8443/wss"},
	} {
		a, err := pageAddr(tc.url, testPeer)
		if err != nil {
			t.Errorf("%s: %v", tc.url, err)
			continue
		}
		if got, want := a.String(), tc.want+"/p2p/"+testPeer; got != want {
			t.Errorf("%s: %s, want %s", tc.url, got, want)
		}
	}
}

func TestPageAddrRefuses(t *testing.T) {
	testPeer := testPeerID(t)
	for _, tc := range []struct{ url, peer, want string }{
		{"file:///tmp/index.html", testPeer, "not http or https"},
		{"http:///", testPeer, "no host"},
		{"http://127.0.0.1:8080/", "", "no peer ID"},
		{"http://127.0.0.1:8080/", "not-a-peer-id", "p2p"},
		{"http://%zz/", testPeer, "URL"},
	} {
		_, err := pageAddr(tc.url, tc.peer)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("pageAddr(%q, %q): %v, want an error saying %q", tc.url, tc.peer, err, tc.want)
		}
	}
}
