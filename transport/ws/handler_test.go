//go:build !js

package ws

import (
	"bufio"
	"context"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	ma "github.com/multiformats/go-multiaddr"

	"github.com/tendril-p2p/tendril/transport"
)

// handlerServer runs a Handler with cfg and opts on an httptest.Server (TLS if tls),
// both closed by t.Cleanup, and returns them with the address to dial.
func handlerServer(t *testing.T, cfg *Config, opts transport.ListenOptions, tls bool) (*Handler, *httptest.Server, ma.Multiaddr) {
	t.Helper()
	srv := httptest.NewUnstartedServer(nil)
	port := srv.Listener.Addr().(*net.TCPAddr).Port
	kind := "ws"
	if tls {
		kind = "wss"
	}
	addr := ma.StringCast("/ip4/127.0.0.1/tcp/" + strconv.Itoa(port) + "/" + kind)
	h, err := NewHandler(cfg, opts, addr)
	if err != nil {
		t.Fatal(err)
	}
	srv.Config.Handler = h
	if tls {
		srv.StartTLS()
	} else {
		srv.Start()
	}
	t.Cleanup(func() {
		h.Close()
		srv.Close()
	})
	return h, srv, addr
}

func TestHandler(t *testing.T) {
	for _, tls := range []bool{false, true} {
		name := "ws"
		if tls {
			name = "wss"
		}
		t.Run(name, func(t *testing.T) {
			h, srv, addr := handlerServer(t, nil, transport.ListenOptions{}, tls)
			ch := serve(t, h, 5*time.Second)
			var cfg Config
			if tls {
				pool := x509.NewCertPool()
				pool.AddCert(srv.Certificate())
				cfg.ClientTLS = clientTLS(pool)
			}
			d, err := New(&cfg).Dial(context.Background(), addr)
			if err != nil {
				t.Fatal(err)
			}
			u := next(t, ch)
			if u.err != nil {
				t.Fatal(u.err)
			}
			defer closeBoth(d, u.conn)
			if u.raw.RemoteAddr().String() != d.LocalAddr().String() || u.conn.RemoteAddr().String() != d.LocalAddr().String() {
				t.Errorf("Accept's RemoteAddr %v, the Conn's %v, want the dialler's %v", u.raw.RemoteAddr(), u.conn.RemoteAddr(), d.LocalAddr())
			}
			if got := u.conn.(*Conn).RemoteMultiaddr().String(); !strings.HasSuffix(got, "/"+name) {
				t.Errorf("RemoteMultiaddr %s, want .../%s", got, name)
			}
			exchange(t, d, u.conn, "hello handler")
			exchange(t, u.conn, d, "hello dialler")
			if !h.Multiaddr().Equal(addr) {
				t.Errorf("Multiaddr %s, want %s", h.Multiaddr(), addr)
			}
		})
	}
}

// TestHandlerRefusals: requests that are not upgrades are answered by ServeHTTP and never
// reach Accept.
func TestHandlerRefusals(t *testing.T) {
	h, srv, _ := handlerServer(t, nil, transport.ListenOptions{}, false)
	for path, want := range map[string]int{"/": 426, "/other": 404} {
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("GET %s: %d, want %d", path, resp.StatusCode, want)
		}
	}
	c, err := net.Dial("tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	io.WriteString(c, strings.Replace(upgradeRequest("/"), "tendril", "other", 1))
	if resp, err := http.ReadResponse(bufio.NewReader(c), nil); err != nil || resp.StatusCode != 400 {
		t.Errorf("wrong subprotocol: %v %v, want 400", resp, err)
	}
	if n := len(h.backlog); n != 0 {
		t.Errorf("%d requests held for Accept, want none", n)
	}
}

// dialStatus dials addr and returns the HTTP status in the error, 0 if the dial
// succeeded.
func dialStatus(t *testing.T, addr ma.Multiaddr) (net.Conn, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := New(nil).Dial(ctx, addr)
	if err != nil {
		return nil, err.Error()
	}
	return c, ""
}

// TestHandlerBacklog: beyond Config.Backlog requests waiting for Accept, requests are
// answered 503 at once; those held are answered 503 after PendingTimeout, or when the
// Handler is closed.
func TestHandlerBacklog(t *testing.T) {
	h, _, addr := handlerServer(t, &Config{Backlog: 1, PendingTimeout: 500 * time.Millisecond}, transport.ListenOptions{}, false)
	held := make(chan string, 1)
	go func() {
		_, status := dialStatus(t, addr)
		held <- status
	}()
	for len(h.backlog) == 0 {
		time.Sleep(time.Millisecond)
	}
	start := time.Now()
	if _, status := dialStatus(t, addr); !strings.Contains(status, "503") || time.Since(start) > 400*time.Millisecond {
		t.Errorf("dial beyond the backlog: %q after %v, want 503 at once", status, time.Since(start))
	}
	if status := <-held; !strings.Contains(status, "503") || time.Since(start) < 300*time.Millisecond {
		t.Errorf("dial held beyond PendingTimeout: %q after %v, want 503 after 500ms", status, time.Since(start))
	}
	// Accept skips the request that was given up.
	go func() {
		time.Sleep(100 * time.Millisecond)
		h.Close()
	}()
	if c, err := h.Accept(); !errors.Is(err, net.ErrClosed) {
		t.Errorf("Accept: %v, %v; want net.ErrClosed once closed", c, err)
	}
}

// TestHandlerClose: Close answers held requests 503 and stops Accept.
func TestHandlerClose(t *testing.T) {
	h, _, addr := handlerServer(t, nil, transport.ListenOptions{}, false)
	held := make(chan string, 1)
	go func() {
		_, status := dialStatus(t, addr)
		held <- status
	}()
	for len(h.backlog) == 0 {
		time.Sleep(time.Millisecond)
	}
	h.Close()
	if status := <-held; !strings.Contains(status, "503") {
		t.Errorf("dial held at Close: %q, want 503", status)
	}
	if _, err := h.Accept(); !errors.Is(err, net.ErrClosed) {
		t.Errorf("Accept after Close: %v, want net.ErrClosed", err)
	}
	if _, status := dialStatus(t, addr); !strings.Contains(status, "503") {
		t.Errorf("dial after Close: %q, want 503", status)
	}
}

// TestHandlerRefusedByService: closing what Accept returned, as the Service does when its
// admission refuses the client, answers the request 503; Upgrade of it then fails.
func TestHandlerRefusedByService(t *testing.T) {
	h, _, addr := handlerServer(t, nil, transport.ListenOptions{}, false)
	status := make(chan string, 1)
	go func() {
		_, s := dialStatus(t, addr)
		status <- s
	}()
	c, err := h.Accept()
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	if s := <-status; !strings.Contains(s, "503") {
		t.Errorf("dial refused by the Service: %q, want 503", s)
	}
	if _, err := h.Upgrade(context.Background(), c); err == nil {
		t.Error("Upgrade of a refused request succeeded")
	}
}

// TestHandlerClientGone: a request whose client leaves before Accept is not returned by
// Accept, and one that Upgrade is given after its wait ended fails.
func TestHandlerClientGone(t *testing.T) {
	h, srv, _ := handlerServer(t, nil, transport.ListenOptions{}, false)
	c, err := net.Dial("tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	io.WriteString(c, upgradeRequest("/"))
	for len(h.backlog) == 0 {
		time.Sleep(time.Millisecond)
	}
	p := <-h.backlog
	c.Close()
	for p.state.Load() == pendingWaiting {
		time.Sleep(time.Millisecond)
	}
	if _, err := h.Upgrade(context.Background(), p); err == nil {
		t.Error("Upgrade of a request whose client left succeeded")
	}
	if _, err := h.Upgrade(context.Background(), &net.TCPConn{}); err == nil {
		t.Error("Upgrade of a connection the Handler did not accept succeeded")
	}
}

// TestHandlerForwardedFor: with the HTTP server's client a trusted proxy, what Accept
// returns already has the client that X-Forwarded-For names as its RemoteAddr, and so
// has the Conn.
func TestHandlerForwardedFor(t *testing.T) {
	for _, trusted := range []bool{true, false} {
		var opts transport.ListenOptions
		if trusted {
			opts.TrustedProxies = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}
		}
		h, srv, _ := handlerServer(t, nil, opts, false)
		c, err := net.Dial("tcp", srv.Listener.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		io.WriteString(c, upgradeRequest("/", "X-Forwarded-For: 192.0.2.44"))
		p, err := h.Accept()
		if err != nil {
			t.Fatal(err)
		}
		want := c.LocalAddr().String()
		if trusted {
			want = "192.0.2.44:0"
		}
		if got := p.RemoteAddr().String(); got != want {
			t.Errorf("trusted=%v: Accept's RemoteAddr %s, want %s", trusted, got, want)
		}
		up, err := h.Upgrade(context.Background(), p)
		if err != nil {
			t.Fatal(err)
		}
		if got := up.RemoteAddr().String(); got != want {
			t.Errorf("trusted=%v: Conn's RemoteAddr %s, want %s", trusted, got, want)
		}
		c.Close() // the raw client answers no close frame: do not wait for one
		up.Close()
	}
}

// TestHandlerPath serves the endpoint under a path of an HTTP server's mux.
func TestHandlerPath(t *testing.T) {
	srv := httptest.NewUnstartedServer(nil)
	u, _ := url.Parse("http://" + srv.Listener.Addr().String())
	addr := ma.StringCast("/ip4/127.0.0.1/tcp/" + u.Port() + "/ws")
	cfg := &Config{Path: "/p2p"}
	h, err := NewHandler(cfg, transport.ListenOptions{}, addr)
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/p2p", h)
	mux.HandleFunc("/", func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "the web app") })
	srv.Config.Handler = mux
	srv.Start()
	defer srv.Close()
	defer h.Close()
	ch := serve(t, h, 5*time.Second)
	d, err := New(cfg).Dial(context.Background(), addr)
	if err != nil {
		t.Fatal(err)
	}
	up := next(t, ch)
	if up.err != nil {
		t.Fatal(up.err)
	}
	defer closeBoth(d, up.conn)
	exchange(t, d, up.conn, "under /p2p")
	if _, err := New(nil).Dial(context.Background(), addr); err == nil || !strings.Contains(err.Error(), "200") {
		t.Errorf("dial of \"/\", the web app's: %v, want a refusal naming its 200", err)
	}
}
