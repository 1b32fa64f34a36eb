//go:build !js

package main

// -web: one HTTP port serves the browser peer (the page, its wasm binary and the
// toolchain's wasm_exec.js) and the node's WebSocket listener, on the same "/", so that the
// page dials the very host and port it came from: /ip4/HOST/tcp/PORT/ws/p2p/ID.

import (
	"bytes"
	"context"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	ma "github.com/multiformats/go-multiaddr"

	"github.com/tendril-p2p/tendril"
	"github.com/tendril-p2p/tendril/transport"
	"github.com/tendril-p2p/tendril/transport/ws"
)

// webFiles is the page: HTML, CSS and the script that starts the wasm.
//
//go:embed web
var webFiles embed.FS

// contentSecurityPolicy lets the page run only its own scripts and the wasm, and connect
// only to its own origin (the node's WebSocket included): the browser peer's key lives in
// the page's memory, where an injected script could reach it.
const contentSecurityPolicy = "default-src 'self'; script-src 'self' 'wasm-unsafe-eval'; style-src 'self'; img-src 'self' data:"

// browserPeer is the build of the browser peer that the page runs: the wasm binary, and
// the wasm_exec.js of the toolchain that built it (the two must be of the same Go
// release: the script implements the imports that the binary's runtime calls).
type browserPeer struct {
	wasm     []byte
	wasmExec []byte
	built    time.Time
}

// buildBrowserPeer builds this package for GOOS=js GOARCH=wasm, from its source (where it
// was compiled from), with the go command: -web needs the Go toolchain, which `go run`
// implies. It reports on stdout what it does and how long the build took. The binary is
// built anew at every start rather than kept in git; the build cache makes later starts
// quick.
func buildBrowserPeer(ctx context.Context, stdout io.Writer) (*browserPeer, error) {
	src, err := sourceDir()
	if err != nil {
		return nil, err
	}
	goTool, err := findGo()
	if err != nil {
		return nil, err
	}
	tmp, err := os.MkdirTemp("", "tendril-chat-wasm-")
	if err != nil {
		return nil, fmt.Errorf("-web: %w", err)
	}
	defer os.RemoveAll(tmp)

	fmt.Fprintf(stdout, "building the browser peer (GOOS=js GOARCH=wasm %s build %s)\n", goTool, src)
	start := time.Now()
	out := filepath.Join(tmp, "chat.wasm")
	// -s -w: symbols and DWARF serve no-one in a browser, which downloads every byte.
	build := exec.CommandContext(ctx, goTool, "build", "-o", out, "-ldflags=-s -w", ".")
	build.Dir = src
	build.Env = append(os.Environ(), "GOOS=js", "GOARCH=wasm")
	if msg, err := build.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("-web: building the browser peer: %w\n%s", err, msg)
	}
	wasm, err := os.ReadFile(out)
	if err != nil {
		return nil, fmt.Errorf("-web: %w", err)
	}
	took := time.Since(start)

	wasmExec, err := readWasmExec(ctx, goTool)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(stdout, "built the browser peer (%.1f MB) in %.1fs\n", float64(len(wasm))/1e6, took.Seconds())
	return &browserPeer{wasm: wasm, wasmExec: wasmExec, built: time.Now()}, nil
}

// sourceDir returns the directory of this package's source, as this binary was compiled
// from it: the browser peer is the same package built for the browser.
func sourceDir() (string, error) {
	_, file, _, ok := runtime.Caller(0)
	dir := filepath.Dir(file)
	if ok && filepath.IsAbs(file) {
		if _, err := os.Stat(filepath.Join(dir, "browser.go")); err == nil {
			return dir, nil
		}
	}
	return "", fmt.Errorf("-web builds the browser peer from the chat's source, and the source this binary was built from (%s) is not there: run it from a tendril checkout, as `go run ./examples/chat -web 127.0.0.1:8080`, without -trimpath", dir)
}

// findGo returns the go command: the one on PATH, else $GOROOT/bin/go.
func findGo() (string, error) {
	if p, err := exec.LookPath("go"); err == nil {
		return p, nil
	}
	if root := os.Getenv("GOROOT"); root != "" {
		p := filepath.Join(root, "bin", "go")
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	return "", errors.New("-web builds the browser peer with the Go toolchain, and there is no go command on PATH (nor in $GOROOT/bin)")
}

// readWasmExec returns the wasm_exec.js of goTool's toolchain.
func readWasmExec(ctx context.Context, goTool string) ([]byte, error) {
	root, err := exec.CommandContext(ctx, goTool, "env", "GOROOT").Output()
	if err != nil {
		return nil, fmt.Errorf("-web: %s env GOROOT: %w", goTool, err)
	}
	path := filepath.Join(strings.TrimSpace(string(root)), "lib", "wasm", "wasm_exec.js")
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("-web: the browser peer needs the Go toolchain's wasm_exec.js: %w", err)
	}
	return b, nil
}

// nodeInfo is what the page learns from node.json: the peer ID to dial (and to verify in
// the handshake) at the page's own host and port.
type nodeInfo struct {
	ID string `json:"id"`
}

// webHandler routes the requests of the -web port: WebSocket upgrades, at any path, to
// wsHandler (the node's listener, which answers those not at its path itself); everything
// else to the page's files.
func webHandler(wsHandler http.Handler, node nodeInfo, bp *browserPeer) http.Handler {
	static, err := fs.Sub(webFiles, "web")
	if err != nil {
		panic(err) // the directory is embedded: it is there
	}
	files := http.NewServeMux()
	files.Handle("GET /", http.FileServerFS(static))
	files.HandleFunc("GET /node.json", func(w http.ResponseWriter, r *http.Request) {
		// A restarted node has a new ID (unless -key): never serve a stale one.
		w.Header().Set("Cache-Control", "no-store")
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(node)
	})
	files.HandleFunc("GET /chat.wasm", func(w http.ResponseWriter, r *http.Request) {
		// WebAssembly.instantiateStreaming requires this type.
		w.Header().Set("Content-Type", "application/wasm")
		http.ServeContent(w, r, "chat.wasm", bp.built, bytes.NewReader(bp.wasm))
	})
	files.HandleFunc("GET /wasm_exec.js", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/javascript; charset=utf-8")
		http.ServeContent(w, r, "wasm_exec.js", bp.built, bytes.NewReader(bp.wasmExec))
	})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if isWebSocketUpgrade(r) {
			wsHandler.ServeHTTP(w, r)
			return
		}
		w.Header().Set("Content-Security-Policy", contentSecurityPolicy)
		files.ServeHTTP(w, r)
	})
}

// isWebSocketUpgrade reports whether r asks to become a WebSocket (RFC 6455 4.1): both
// headers are token lists, compared without regard to case.
func isWebSocketUpgrade(r *http.Request) bool {
	return headerHasToken(r.Header, "Connection", "upgrade") && headerHasToken(r.Header, "Upgrade", "websocket")
}

func headerHasToken(h http.Header, name, token string) bool {
	for _, v := range h.Values(name) {
		for t := range strings.SplitSeq(v, ",") {
			if strings.EqualFold(strings.TrimSpace(t), token) {
				return true
			}
		}
	}
	return false
}

// webServer is the running -web port.
type webServer struct {
	addr   tendril.Addr // the node's WebSocket address there, with its peer ID
	url    string       // the page's
	srv    *http.Server
	served chan error // Serve's return
}

// serveWeb listens on hostport, adds the node's WebSocket listener there to svc and serves
// the page beside it until close.
func serveWeb(svc *tendril.Service, hostport string, bp *browserPeer) (*webServer, error) {
	ln, err := net.Listen("tcp", hostport)
	if err != nil {
		return nil, fmt.Errorf("-web: %w", err)
	}
	tcpAddr := transport.FromNetAddr(ln.Addr())
	if tcpAddr == nil {
		ln.Close()
		return nil, fmt.Errorf("-web: listening on %v: no multiaddr for it", ln.Addr())
	}
	// No trusted proxies: the chat is reached directly, so every client's address is its own.
	h, err := ws.NewHandler(nil, transport.ListenOptions{}, tcpAddr.Encapsulate(ma.StringCast("/ws")))
	if err != nil {
		ln.Close()
		return nil, fmt.Errorf("-web: %w", err)
	}
	addr, err := svc.AddListener(h)
	if err != nil {
		ln.Close()
		return nil, fmt.Errorf("-web: %w", err)
	}
	w := &webServer{
		addr: addr,
		url:  pageURL(ln.Addr()),
		srv: &http.Server{
			Handler:           webHandler(h, nodeInfo{ID: svc.ID().String()}, bp),
			ReadHeaderTimeout: 10 * time.Second,
		},
		served: make(chan error, 1),
	}
	go func() { w.served <- w.srv.Serve(ln) }()
	return w, nil
}

// close stops serving: the page's requests in progress get a few seconds to end. The
// WebSocket connections are the Service's, which closes them.
func (w *webServer) close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := w.srv.Shutdown(ctx)
	if serr := <-w.served; !errors.Is(serr, http.ErrServerClosed) {
		err = errors.Join(err, serr)
	}
	return err
}

// pageURL is the URL to open for a server listening on a: on an unspecified address,
// localhost's.
func pageURL(a net.Addr) string {
	ta, ok := a.(*net.TCPAddr)
	if !ok {
		return "http://" + a.String() + "/"
	}
	host := ta.IP.String()
	if ta.IP.IsUnspecified() {
		host = "localhost"
	}
	return "http://" + net.JoinHostPort(host, strconv.Itoa(ta.Port)) + "/"
}
