//go:build !js

package ws

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	ma "github.com/multiformats/go-multiaddr"

	"github.com/tendril-p2p/tendril/transport"
)

func TestHandles(t *testing.T) {
	cases := map[string]bool{
		"/ip4/127.0.0.1/tcp/80/ws":             true,
		"/ip6/::1/tcp/443/wss":                 true,
		"/dns/example.com/tcp/443/tls/ws":      true,
		"/dns4/example.com/tcp/80/ws":          true,
		"/dns6/example.com/tcp/443/wss":        true,
		"/ip4/127.0.0.1/tcp/80":                false,
		"/ip4/127.0.0.1/tcp/80/ws/p2p-circuit": false,
		"/ip4/127.0.0.1/tcp/80/tls":            false,
		"/ip4/127.0.0.1/tcp/80/tls/wss":        false,
		"/ip4/127.0.0.1/tcp/80/wss/ws":         false,
		"/ip4/127.0.0.1/udp/80/ws":             false,
		"/memory/1":                            false,
	}
	tr := New(nil)
	for s, want := range cases {
		m, err := ma.NewMultiaddr(s)
		if err != nil {
			t.Fatalf("%s: %v", s, err)
		}
		if got := tr.Handles(m); got != want {
			t.Errorf("Handles(%s) = %v, want %v", s, got, want)
		}
	}
	if _, err := tr.Dial(context.Background(), ma.StringCast("/ip4/127.0.0.1/tcp/80")); !errors.Is(err, transport.ErrUnsupported) {
		t.Errorf("Dial of a TCP address: %v, want transport.ErrUnsupported", err)
	}
	if _, err := tr.Listen(context.Background(), ma.StringCast("/ip4/127.0.0.1/tcp/0"), transport.ListenOptions{}); !errors.Is(err, transport.ErrUnsupported) {
		t.Errorf("Listen on a TCP address: %v, want transport.ErrUnsupported", err)
	}
}

func TestConfig(t *testing.T) {
	var nilCfg *Config
	if err := nilCfg.Validate(); err != nil {
		t.Errorf("nil Config: %v", err)
	}
	if err := (&Config{}).Validate(); err != nil {
		t.Errorf("zero Config: %v", err)
	}
	if err := DefaultConfig().Validate(); err != nil {
		t.Errorf("DefaultConfig: %v", err)
	}
	bad := []Config{
		{MaxMessage: MinMessage - 1},
		{MaxMessage: MaxMessageLimit + 1},
		{Path: "p2p"},
		{Path: "/p2p?x=1"},
		{MaxRequestHeader: 100},
		{CloseTimeout: -1},
		{FrameGrace: -1},
		{Backlog: -1},
		{PendingTimeout: -1},
	}
	for _, c := range bad {
		if err := c.Validate(); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("%+v: %v, want ErrInvalidConfig", c, err)
		}
		tr := New(&c)
		if _, err := tr.Dial(context.Background(), ma.StringCast("/ip4/127.0.0.1/tcp/1/ws")); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("Dial with %+v: %v, want ErrInvalidConfig", c, err)
		}
		if _, err := NewHandler(&c, transport.ListenOptions{}, ma.StringCast("/ip4/127.0.0.1/tcp/1/ws")); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("NewHandler with %+v: %v, want ErrInvalidConfig", c, err)
		}
	}
	if _, err := New(nil).Listen(context.Background(), ma.StringCast("/ip4/127.0.0.1/tcp/0/wss"), transport.ListenOptions{}); !errors.Is(err, ErrNoTLS) {
		t.Errorf("/wss listener without TLS: %v, want ErrNoTLS", err)
	}
	if _, err := NewHandler(nil, transport.ListenOptions{}, ma.StringCast("/ip4/127.0.0.1/tcp/1")); !errors.Is(err, transport.ErrUnsupported) {
		t.Errorf("Handler on a TCP address: %v, want transport.ErrUnsupported", err)
	}
}

// TestDialRefusals: dialling what is not a tendril WebSocket endpoint fails with the
// reason.
func TestDialRefusals(t *testing.T) {
	tr := New(nil)
	dial := func(url string) error {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		c, err := tr.Dial(ctx, ma.StringCast("/ip4/127.0.0.1/tcp/"+url[strings.LastIndex(url, ":")+1:]+"/ws"))
		if err == nil {
			c.Close()
		}
		return err
	}

	web := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "no WebSocket here", http.StatusTeapot)
	}))
	defer web.Close()
	if err := dial(web.URL); err == nil || !strings.Contains(err.Error(), "418") || !strings.Contains(err.Error(), "no WebSocket here") {
		t.Errorf("dial of a web server: %v, want its status and message", err)
	}

	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, err := websocket.Accept(w, r, &websocket.AcceptOptions{Subprotocols: []string{"chat"}})
		if err == nil {
			c.CloseNow()
		}
	}))
	defer other.Close()
	if err := dial(other.URL); !errors.Is(err, ErrSubprotocol) {
		t.Errorf("dial of a WebSocket server without the tendril subprotocol: %v, want ErrSubprotocol", err)
	}

	silent, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	cause := errors.New("dial timeout")
	ctx, cancel := context.WithTimeoutCause(context.Background(), 200*time.Millisecond, cause)
	defer cancel()
	start := time.Now()
	addr := ma.StringCast("/ip4/127.0.0.1/tcp/" + silent.Addr().(*net.TCPAddr).AddrPort().String()[len("127.0.0.1:"):] + "/ws")
	if _, err := tr.Dial(ctx, addr); !errors.Is(err, cause) {
		t.Errorf("dial of a server that never answers: %v, want the context's cause", err)
	}
	if el := time.Since(start); el > 2*time.Second {
		t.Errorf("dial returned after %v, want about 200ms", el)
	}
	silent.Close()
	if _, err := tr.Dial(context.Background(), addr); err == nil {
		t.Error("dial of a closed port succeeded")
	}
}
