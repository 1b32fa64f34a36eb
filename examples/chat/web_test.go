//go:build !js

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/tendril-p2p/tendril"
	"github.com/tendril-p2p/tendril/internal/testutil"
	"github.com/tendril-p2p/tendril/transport"
	"github.com/tendril-p2p/tendril/transport/ws"
)

func TestIsWebSocketUpgrade(t *testing.T) {
	for _, tc := range []struct {
		conn, upgrade string
		want          bool
	}{
		{"Upgrade", "websocket", true},
		{"keep-alive, Upgrade", "WebSocket", true}, // Firefox sends both tokens
		{"upgrade", "h2c, websocket", true},
		{"keep-alive", "websocket", false},
		{"Upgrade", "h2c", false},
		{"", "", false},
		{"Upgrades", "websocket", false},
	} {
		r := httptest.NewRequest("GET", "/", nil)
		if tc.conn != "" {
			r.Header.Set("Connection", tc.conn)
		}
		if tc.upgrade != "" {
			r.Header.Set("Upgrade", tc.upgrade)
		}
		if got := isWebSocketUpgrade(r); got != tc.want {
			t.Errorf("Connection %q, Upgrade %q: %v, want %v", tc.conn, tc.upgrade, got, tc.want)
		}
	}
}

// TestWebHandlerRoutes: on the one port, upgrades (at any path) reach the node's
// WebSocket handler and nothing else does; the page, its script, node.json, the wasm
// (with the type instantiateStreaming requires) and wasm_exec.js are served beside it.
func TestWebHandlerRoutes(t *testing.T) {
	bp := &browserPeer{wasm: []byte("\x00asm\x01\x00\x00\x00"), wasmExec: []byte("// wasm_exec"), built: time.Now()}
	var upgrades int
	ws := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		upgrades++
		io.WriteString(w, "ws handler")
	})
	h := webHandler(ws, nodeInfo{ID: "PEERID"}, bp)
	get := func(path string, upgrade bool) *httptest.ResponseRecorder {
		r := httptest.NewRequest("GET", path, nil)
		if upgrade {
			r.Header.Set("Connection", "Upgrade")
			r.Header.Set("Upgrade", "websocket")
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w
	}

	for _, path := range []string{"/", "/other"} {
		if w := get(path, true); w.Body.String() != "ws handler" {
			t.Errorf("upgrade at %s: %d %q, want the WebSocket handler", path, w.Code, w.Body)
		}
	}
	if upgrades != 2 {
		t.Fatalf("the WebSocket handler saw %d requests, want 2", upgrades)
	}

	for _, tc := range []struct{ path, ctype, body string }{
		{"/", "text/html", `<script src="page.js"`},
		{"/page.js", "text/javascript", "node.json"},
		{"/style.css", "text/css", "#log"},
		{"/wasm_exec.js", "text/javascript", "// wasm_exec"},
		{"/chat.wasm", "application/wasm", "\x00asm"},
	} {
		w := get(tc.path, false)
		if w.Code != http.StatusOK || !strings.HasPrefix(w.Header().Get("Content-Type"), tc.ctype) || !strings.Contains(w.Body.String(), tc.body) {
			t.Errorf("GET %s: %d %q, body %.60q; want 200 %s with %q", tc.path, w.Code, w.Header().Get("Content-Type"), w.Body, tc.ctype, tc.body)
		}
		if csp := w.Header().Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'self'") {
			t.Errorf("GET %s: Content-Security-Policy %q", tc.path, csp)
		}
	}
	if upgrades != 2 {
		t.Errorf("the WebSocket handler saw plain requests")
	}

	w := get("/node.json", false)
	var got nodeInfo
	if err := json.Unmarshal(w.Body.Bytes(), &got); err != nil || got.ID != "PEERID" {
		t.Errorf("node.json: %q (%v), want the peer ID", w.Body, err)
	}
	if w.Header().Get("Cache-Control") != "no-store" || !strings.HasPrefix(w.Header().Get("Content-Type"), "application/json") {
		t.Errorf("node.json headers: %v", w.Header())
	}
	if w := get("/missing", false); w.Code != http.StatusNotFound {
		t.Errorf("GET /missing: %d", w.Code)
	}
	r := httptest.NewRequest("POST", "/node.json", nil)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, r)
	if rec.Code != http.StatusMethodNotAllowed {
		t.Errorf("POST /node.json: %d", rec.Code)
	}
}

func TestPageURL(t *testing.T) {
	for _, tc := range []struct {
		addr net.Addr
		want string
	}{
		{&net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 8080}, "http://127.0.0.1:8080/"},
		{&net.TCPAddr{IP: net.IPv6unspecified, Port: 8080}, "http://localhost:8080/"},
		{&net.TCPAddr{IP: net.IPv4zero, Port: 80}, "http://localhost:80/"},
		{&net.TCPAddr{IP: net.IPv6loopback, Port: 8080}, "http://[::1]:8080/"},
	} {
		if got := pageURL(tc.addr); got != tc.want {
			t.Errorf("%v: %s, want %s", tc.addr, got, tc.want)
		}
	}
}

// TestBuildBrowserPeer builds the browser peer as -web does: a wasm binary, and the
// wasm_exec.js that goes with it.
func TestBuildBrowserPeer(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the browser peer for GOOS=js GOARCH=wasm")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var out bytes.Buffer
	bp, err := buildBrowserPeer(ctx, &out)
	if err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	if !bytes.HasPrefix(bp.wasm, []byte("\x00asm")) {
		t.Errorf("the browser peer is not WebAssembly: %.8q", bp.wasm)
	}
	if !bytes.Contains(bp.wasmExec, []byte("globalThis.Go")) {
		t.Errorf("wasm_exec.js does not define Go: %.80q", bp.wasmExec)
	}
	if !strings.Contains(out.String(), "built the browser peer (") {
		t.Errorf("no word of the build and its time:\n%s", out.String())
	}
	t.Log(strings.TrimSpace(out.String()))
}

// TestServeWeb runs -web's server with a real node: on its one port, the page is served
// and a peer with the WebSocket transport only, as the browser peer has, dials the
// announced address (the same port, path "/"), chats, and everything ends on close.
func TestServeWeb(t *testing.T) {
	var outA, outB testutil.SyncBuffer
	a := newNode("alice", &outA)
	svcA, err := newChatService(a, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer svcA.Close()
	bp := &browserPeer{wasm: []byte("\x00asm\x01\x00\x00\x00"), wasmExec: []byte("// wasm_exec"), built: time.Now()}
	w, err := serveWeb(svcA, "127.0.0.1:0", bp)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := w.close(); err != nil {
			t.Errorf("closing the web server: %v", err)
		}
	}()
	if !strings.HasSuffix(w.addr.Transport.String(), "/ws") || w.addr.Peer != svcA.ID() {
		t.Fatalf("announced %s, want a /ws address with the node's ID", w.addr)
	}

	resp, err := http.Get(w.url + "node.json")
	if err != nil {
		t.Fatal(err)
	}
	var info nodeInfo
	err = json.NewDecoder(resp.Body).Decode(&info)
	resp.Body.Close()
	if err != nil || info.ID != svcA.ID().String() {
		t.Fatalf("node.json from %s: %+v, %v", w.url, info, err)
	}

	b := newNode("bob", &outB)
	svcB, err := tendril.New(tendril.Config{
		Transports: []transport.Transport{ws.New(nil)},
		Protocols:  []tendril.Protocol{chatProtocol(b)},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer svcB.Close()
	b.svc = svcB
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := svcB.Dial(ctx, w.addr); err != nil {
		t.Fatalf("dialling %s: %v", w.addr, err)
	}
	if n := b.say("over the web port"); n != 1 {
		t.Fatalf("bob's line went to %d peers", n)
	}
	waitOutput(t, &outA, "[alice] <bob> over the web port")
	if peers := b.connected(); len(peers) != 1 || peers[0].id != svcA.ID().String() {
		t.Errorf("bob's peers: %+v, want alice", peers)
	}
}
