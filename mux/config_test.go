package mux

import (
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"
)

func TestConfigDefaults(t *testing.T) {
	d := DefaultConfig()
	if d.MaxStreamWindow != 1<<20 || d.MaxStreams != 1024 || d.AcceptBacklog != 64 ||
		d.KeepAliveInterval != 30*time.Second || d.ConnectionWriteTimeout != 10*time.Second ||
		d.StreamOpenTimeout != 30*time.Second || d.StreamCloseTimeout != 5*time.Minute || d.Logger != nil {
		t.Fatalf("DefaultConfig = %+v", d)
	}
	if err := d.Validate(); err != nil {
		t.Fatal(err)
	}
	var nilCfg *Config
	if err := nilCfg.Validate(); err != nil {
		t.Fatal(err)
	}
	if err := (&Config{}).Validate(); err != nil {
		t.Fatalf("zero Config: %v", err)
	}
	p, _ := (&Config{MaxStreams: 7, KeepAliveInterval: -1}).populate()
	if p.MaxStreams != 7 || p.AcceptBacklog != 64 || p.MaxStreamWindow != 1<<20 || p.KeepAliveInterval != -1 {
		t.Fatalf("populate = %+v", p)
	}
	y := p.yamuxConfig()
	if y.EnableKeepAlive || y.AcceptBacklog != 64 || y.MaxStreamWindowSize != 1<<20 || y.Logger != (discardLogger{}) {
		t.Fatalf("yamux config = %+v", y)
	}
	if MaxFrameSize(nil) != 1<<20+12 || MaxFrameSize(&Config{MaxStreamWindow: 4 << 20}) != 4<<20+12 {
		t.Fatal("MaxFrameSize")
	}
}

func TestConfigValidate(t *testing.T) {
	bad := []*Config{
		{MaxStreamWindow: MinStreamWindow - 1},
		{MaxStreamWindow: MaxStreamWindowLimit + 1},
		{MaxStreams: -1},
		{AcceptBacklog: -1},
		{ConnectionWriteTimeout: -1},
	}
	for _, c := range bad {
		if err := c.Validate(); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("Validate(%+v) = %v", c, err)
		}
		a, b := tcpPair(t)
		if _, err := Client(a, c); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("Client(%+v) = %v", c, err)
		}
		a.Close()
		b.Close()
	}
}

// TestConfigNotMutated checks that a session does not change its Config.
func TestConfigNotMutated(t *testing.T) {
	cfg := &Config{MaxStreams: 3}
	before := *cfg
	a, b := tcpPair(t)
	sessionPair(t, a, b, cfg, cfg)
	if *cfg != before {
		t.Fatalf("config changed: %+v -> %+v", before, *cfg)
	}
}

func TestLogAdapter(t *testing.T) {
	var buf strings.Builder
	l := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	a := slogAdapter{l}
	a.Printf("[ERR] yamux: bad %d", 1)
	a.Printf("[WARN] yamux: odd")
	a.Println("plain")
	out := buf.String()
	for _, want := range []string{"level=WARN msg=\"yamux: bad 1\"", "level=DEBUG msg=\"yamux: odd\"", "level=INFO msg=plain", "component=mux"} {
		if !strings.Contains(out, want) {
			t.Errorf("log output lacks %q:\n%s", want, out)
		}
	}
	buf.Reset()
	quiet := slogAdapter{slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelError}))}
	quiet.Printf("[WARN] yamux: %v", "x")
	if buf.Len() != 0 {
		t.Fatalf("disabled level logged: %s", buf.String())
	}
}
