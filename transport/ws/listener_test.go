//go:build !js

package ws

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/netip"
	"net/url"
	"strings"
	"testing"
	"time"

	ma "github.com/multiformats/go-multiaddr"

	"github.com/tendril-p2p/tendril/transport"
)

// TestBadRequests sends what is not an upgrade of "/" to the tendril subprotocol: each
// is answered with its HTTP error, Upgrade's error wraps transport.ErrBadHeader, and the
// connection is closed.
func TestBadRequests(t *testing.T) {
	req := func(mutate func(string) string) string { return mutate(upgradeRequest("/")) }
	cases := []struct {
		name   string
		send   string
		status int
	}{
		{"plain GET", "GET / HTTP/1.1\r\nHost: test\r\n\r\n", 426},
		{"HTTP/1.0", req(func(s string) string { return strings.Replace(s, "HTTP/1.1", "HTTP/1.0", 1) }), 426},
		{"garbage", "\x16\x03\x01\x00\xa5\x01\x00\x00\xa1\x03\x03 not HTTP at all\r\n\r\n", 400},
		{"binary zeros", strings.Repeat("\x00", 64) + "\r\n\r\n", 400},
		{"oversized headers", "GET / HTTP/1.1\r\nHost: test\r\nX-Pad: " + strings.Repeat("a", 9000) + "\r\n\r\n", 431},
		{"many headers", "GET / HTTP/1.1\r\n" + strings.Repeat("X-A: b\r\n", 2000) + "\r\n", 431},
		{"wrong subprotocol", req(func(s string) string { return strings.Replace(s, "tendril", "chat, superchat", 1) }), 400},
		{"no subprotocol", req(func(s string) string { return strings.Replace(s, "Sec-WebSocket-Protocol: tendril\r\n", "", 1) }), 400},
		{"other path", upgradeRequest("/elsewhere"), 404},
		{"POST", req(func(s string) string { return strings.Replace(s, "GET", "POST", 1) }), 405},
		{"version 8", req(func(s string) string { return strings.Replace(s, "Version: 13", "Version: 8", 1) }), 426},
		{"bad key", req(func(s string) string { return strings.Replace(s, testKey, "short", 1) }), 400},
		{"two keys", req(func(s string) string {
			return strings.Replace(s, "\r\n\r\n", "\r\nSec-WebSocket-Key: "+testKey+"\r\n\r\n", 1)
		}), 400},
		{"body", req(func(s string) string { return strings.Replace(s, "\r\n\r\n", "\r\nContent-Length: 4\r\n\r\nbody", 1) }), 400},
		{"chunked", req(func(s string) string {
			return strings.Replace(s, "\r\n\r\n", "\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", 1)
		}), 400},
		{"untrusted PROXY header", "PROXY TCP4 203.0.113.1 127.0.0.1 5555 80\r\n" + upgradeRequest("/"), 400},
	}
	ln := listen(t, New(nil), "/ip4/127.0.0.1/tcp/0/ws", transport.ListenOptions{})
	ch := serve(t, ln, 5*time.Second)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := rawDial(t, ln)
			go io.WriteString(c, tc.send) // may fail: the server closes at once
			c.SetReadDeadline(time.Now().Add(5 * time.Second))
			br := bufio.NewReader(c)
			resp, err := http.ReadResponse(br, nil)
			if err != nil {
				t.Fatalf("no HTTP answer: %v", err)
			}
			body, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != tc.status {
				t.Errorf("status %d (%s), want %d", resp.StatusCode, strings.TrimSpace(string(body)), tc.status)
			}
			if !resp.Close || resp.ContentLength != int64(len(body)) {
				t.Errorf("answer without Connection: close (%v) or a right Content-Length: %d for %d bytes", resp.Close, resp.ContentLength, len(body))
			}
			if _, err := br.ReadByte(); err == nil {
				t.Error("bytes after the answer; want the connection closed")
			}
			u := next(t, ch)
			if !errors.Is(u.err, transport.ErrBadHeader) {
				t.Errorf("Upgrade: %v, want an error wrapping transport.ErrBadHeader", u.err)
			}
		})
	}
}

// TestTLSGarbage: what is not a TLS handshake on a /wss listener fails Upgrade with
// transport.ErrBadHeader.
func TestTLSGarbage(t *testing.T) {
	_, server := transports(t, "wss", Config{})
	ln := listen(t, server, "/ip4/127.0.0.1/tcp/0/wss", transport.ListenOptions{})
	ch := serve(t, ln, 5*time.Second)
	c := rawDial(t, ln)
	io.WriteString(c, upgradeRequest("/"))
	if u := next(t, ch); !errors.Is(u.err, transport.ErrBadHeader) {
		t.Errorf("Upgrade: %v, want an error wrapping transport.ErrBadHeader", u.err)
	}
}

// TestSlowClients: a request trickled a byte at a time, or nothing at all, or a TLS
// handshake left unfinished, is bounded by the context of Upgrade, whose cause it
// returns.
func TestSlowClients(t *testing.T) {
	cases := []struct {
		name, addr string
		trickle    string
	}{
		{"silent", "/ip4/127.0.0.1/tcp/0/ws", ""},
		{"slowloris", "/ip4/127.0.0.1/tcp/0/ws", upgradeRequest("/")},
		{"silent TLS", "/ip4/127.0.0.1/tcp/0/wss", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, server := transports(t, tc.addr, Config{})
			ln := listen(t, server, tc.addr, transport.ListenOptions{})
			c := rawDial(t, ln)
			go func() {
				for i := range len(tc.trickle) {
					if _, err := c.Write([]byte{tc.trickle[i]}); err != nil {
						return
					}
					time.Sleep(50 * time.Millisecond)
				}
			}()
			raw, err := ln.Accept()
			if err != nil {
				t.Fatal(err)
			}
			defer raw.Close()
			cause := errors.New("handshake timeout")
			ctx, cancel := context.WithTimeoutCause(context.Background(), 300*time.Millisecond, cause)
			defer cancel()
			start := time.Now()
			_, err = ln.Upgrade(ctx, raw)
			if !errors.Is(err, cause) || errors.Is(err, transport.ErrBadHeader) {
				t.Errorf("Upgrade: %v, want the context's cause", err)
			}
			if el := time.Since(start); el > 2*time.Second {
				t.Errorf("Upgrade returned after %v, want about 300ms", el)
			}
		})
	}
}

// TestEarlyFrames: frames sent right behind the request, before the answer, are the
// stream's first bytes.
func TestEarlyFrames(t *testing.T) {
	ln := listen(t, New(nil), "/ip4/127.0.0.1/tcp/0/ws", transport.ListenOptions{})
	ch := serve(t, ln, 5*time.Second)
	c := rawDial(t, ln)
	io.WriteString(c, upgradeRequest("/")+string(clientFrame(2, true, []byte("early"))))
	u := next(t, ch)
	if u.err != nil {
		t.Fatal(u.err)
	}
	defer u.conn.Close()
	u.conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	got := make([]byte, 5)
	if _, err := io.ReadFull(u.conn, got); err != nil || string(got) != "early" {
		t.Fatalf("read %q, %v", got, err)
	}
}

// TestProxyHeader: from a trusted proxy, a PROXY header names the client, which is the
// Conn's RemoteAddr and multiaddr.
func TestProxyHeader(t *testing.T) {
	opts := transport.ListenOptions{TrustedProxies: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}}
	ln := listen(t, New(nil), "/ip4/127.0.0.1/tcp/0/ws", opts)
	ch := serve(t, ln, 5*time.Second)
	for _, prefix := range []string{
		"PROXY TCP4 203.0.113.9 127.0.0.1 5555 80\r\n",
		"PROXY TCP6 2001:db8::9 ::1 5555 80\r\n",
	} {
		raw, _ := rawUpgrade(t, ln, prefix)
		u := next(t, ch)
		if u.err != nil {
			t.Fatal(u.err)
		}
		want := strings.Fields(prefix)[2]
		if got := u.conn.RemoteAddr().(*net.TCPAddr); got.IP.String() != want || got.Port != 5555 {
			t.Errorf("RemoteAddr %v, want %s:5555", got, want)
		}
		if got := u.conn.(*Conn).RemoteMultiaddr().String(); !strings.Contains(got, want) || !strings.HasSuffix(got, "/tcp/5555/ws") {
			t.Errorf("RemoteMultiaddr %s", got)
		}
		raw.Write(clientFrame(2, true, []byte("hi")))
		got := make([]byte, 2)
		if _, err := io.ReadFull(u.conn, got); err != nil || string(got) != "hi" {
			t.Fatalf("read %q, %v", got, err)
		}
		u.conn.Close()
	}
	// A malformed PROXY header from a trusted proxy is a bad header.
	c := rawDial(t, ln)
	io.WriteString(c, "PROXY TCP4 nonsense\r\n"+upgradeRequest("/"))
	if u := next(t, ch); !errors.Is(u.err, transport.ErrBadHeader) {
		t.Errorf("Upgrade after a malformed PROXY header: %v, want transport.ErrBadHeader", u.err)
	}
}

// TestForwardedFor puts an httputil.ReverseProxy in front of a listener: with the proxy
// trusted, the Conn's RemoteAddr is the client its X-Forwarded-For names; otherwise it is
// the proxy's.
func TestForwardedFor(t *testing.T) {
	const client = "198.51.100.7"
	for _, trusted := range []bool{true, false} {
		t.Run(fmt.Sprintf("trusted=%v", trusted), func(t *testing.T) {
			var opts transport.ListenOptions
			if trusted {
				opts.TrustedProxies = []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}
			}
			tr := New(nil)
			ln := listen(t, tr, "/ip4/127.0.0.1/tcp/0/ws", opts)
			ch := serve(t, ln, 5*time.Second)
			_, hostport, _, _ := transport.HostPort(ln.Multiaddr())
			proxy := &httputil.ReverseProxy{Rewrite: func(r *httputil.ProxyRequest) {
				r.SetURL(&url.URL{Scheme: "http", Host: hostport})
				// As if the client had come from afar: the proxy names it.
				r.Out.Header.Set("X-Forwarded-For", client)
			}}
			ps := httptest.NewServer(proxy)
			defer ps.Close()
			pu, _ := url.Parse(ps.URL)
			d, err := tr.Dial(context.Background(), ma.StringCast("/ip4/127.0.0.1/tcp/"+pu.Port()+"/ws"))
			if err != nil {
				t.Fatal(err)
			}
			u := next(t, ch)
			if u.err != nil {
				t.Fatal(u.err)
			}
			defer closeBoth(d, u.conn)
			got := u.conn.RemoteAddr().(*net.TCPAddr)
			if trusted && got.IP.String() != client {
				t.Errorf("RemoteAddr %v behind a trusted proxy, want %s", got, client)
			}
			if !trusted && got.String() != u.raw.RemoteAddr().String() {
				t.Errorf("RemoteAddr %v behind an untrusted proxy, want the proxy's %v", got, u.raw.RemoteAddr())
			}
			exchange(t, d, u.conn, "through the proxy")
			exchange(t, u.conn, d, "and back")
		})
	}
}
