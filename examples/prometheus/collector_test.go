package main

import (
	"context"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/tendril-p2p/tendril"
)

// TestCollector: one session between two nodes shows in the exported metrics.
func TestCollector(t *testing.T) {
	ctx := context.Background()
	a, err := tendril.New(tendril.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := tendril.New(tendril.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	addr, err := b.Listen(ctx, tendril.MustParseAddr("/ip4/127.0.0.1/tcp/0"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Dial(ctx, addr); err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(NewCollector(a))
	want := `
# HELP tendril_handshakes_completed_total Handshakes that succeeded.
# TYPE tendril_handshakes_completed_total counter
tendril_handshakes_completed_total 1
# HELP tendril_sessions_open Sessions open now, by direction.
# TYPE tendril_sessions_open gauge
tendril_sessions_open{direction="inbound"} 0
tendril_sessions_open{direction="outbound"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "tendril_handshakes_completed_total", "tendril_sessions_open"); err != nil {
		t.Error(err)
	}
}
