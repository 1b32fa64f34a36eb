package mux

import (
	"errors"
	"testing"
	"time"

	"github.com/tendril-p2p/tendril/internal/testutil"
)

func TestConfigDefaults(t *testing.T) {
	d := DefaultConfig()
	if d.MaxStreamWindow != 32<<20 || d.MaxDataFrame != 64<<10 || d.MaxSessionMemory != 64<<20 ||
		d.MaxStreams != 1024 || d.AcceptBacklog != 64 ||
		d.KeepAliveInterval != 30*time.Second || d.ConnectionWriteTimeout != 10*time.Second ||
		d.StreamOpenTimeout != 30*time.Second || d.Logger != nil || d.Memory != nil {
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
	p, _ := (&Config{MaxStreams: 7, KeepAliveInterval: -1}).withDefaults()
	if p.MaxStreams != 7 || p.AcceptBacklog != 64 || p.MaxStreamWindow != 32<<20 || p.KeepAliveInterval != -1 {
		t.Fatalf("withDefaults = %+v", p)
	}
	// The largest Write: a batch of stream data in 64 KiB frames and the control frames in
	// front of it.
	if got, want := MaxFrameSize(nil), writeBatch+4*FrameHeaderSize+maxControlBytes; got != want {
		t.Fatalf("MaxFrameSize(nil) = %d, want %d", got, want)
	}
	if got, want := MaxFrameSize(&Config{MaxDataFrame: 1 << 20}), 1<<20+FrameHeaderSize+maxControlBytes; got != want {
		t.Fatalf("MaxFrameSize(1 MiB frames) = %d, want %d", got, want)
	}
}

func TestConfigValidate(t *testing.T) {
	bad := []*Config{
		{MaxStreamWindow: MinStreamWindow - 1},
		{MaxStreamWindow: MaxStreamWindowLimit + 1},
		{MaxDataFrame: MinDataFrame - 1},
		{MaxDataFrame: MaxDataFrameLimit + 1},
		{MaxSessionMemory: InitialStreamWindow},
		{MaxStreams: -1},
		{AcceptBacklog: -1},
		{ConnectionWriteTimeout: -1},
	}
	for _, c := range bad {
		if err := c.Validate(); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("Validate(%+v) = %v", c, err)
		}
		a, b := testutil.TCPPair(t)
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
	a, b := testutil.TCPPair(t)
	sessionPair(t, a, b, cfg, cfg)
	if *cfg != before {
		t.Fatalf("config changed: %+v -> %+v", before, *cfg)
	}
}
