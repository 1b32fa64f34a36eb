package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// TestHarness runs every case of both suites for a short time, so that CI
// keeps the harness working, and checks the shape of every output.
func TestHarness(t *testing.T) {
	if testing.Short() {
		t.Skip("runs every transport")
	}
	svg := filepath.Join(t.TempDir(), "chart.svg")
	o := options{Suite: "all", Runs: 2, Duration: 30 * time.Millisecond, Conns: 8, JSON: true, SVG: svg, Quiet: true}
	var out bytes.Buffer
	if err := run(context.Background(), o, &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	var rep report
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		t.Fatalf("-json output: %v", err)
	}
	seen := map[string]bool{}
	for _, r := range rep.Transports {
		seen[r.Group+"/"+r.Name] = true
		if len(r.Values) != o.Runs || r.Min > r.Median || r.Median > r.Max {
			t.Errorf("%s %s: values %v, median %v, range %v-%v", r.Group, r.Name, r.Values, r.Median, r.Min, r.Max)
		}
		switch r.Group {
		case metricBulk1.ID, metricBulk8.ID, metricRTT.ID, metricConn1.ID, metricConn2.ID, metricConnCPU.ID, metricCPU.ID:
			if r.Min <= 0 || r.Advantage <= 0 {
				t.Errorf("%s %s: %v, ratio %v", r.Group, r.Name, r.Values, r.Advantage)
			}
		}
	}
	for _, tr := range transports() {
		for _, m := range metrics {
			if (m == metricIdleStream || m == metricStreamRoutines) && !tr.Muxed {
				continue
			}
			if !seen[m.ID+"/"+tr.Name] {
				t.Errorf("no %s result for %s", m.ID, tr.Name)
			}
		}
	}
	if len(rep.Crypto) != len(cryptoCases()) {
		t.Errorf("%d crypto rows, want %d", len(rep.Crypto), len(cryptoCases()))
	}
	for _, r := range rep.Crypto {
		if r.Min <= 0 {
			t.Errorf("%s %s: %v", r.Group, r.Name, r.Values)
		}
	}
	b, err := os.ReadFile(svg)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(b, []byte("<svg")) {
		t.Errorf("%s is not an SVG", svg)
	}

	// -from replays the -json output as the markdown table.
	from := filepath.Join(t.TempDir(), "results.json")
	if err := os.WriteFile(from, out.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	var md bytes.Buffer
	if err := run(context.Background(), options{From: from}, &md, io.Discard); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"| tendril AES-128-GCM |", "| go-libp2p Noise + yamux |", "| BLAKE3 64 KiB | zeebo/blake3 |", "×"} {
		if !strings.Contains(md.String(), want) {
			t.Errorf("markdown lacks %q:\n%s", want, md.String())
		}
	}
}

func TestRunRejectsBadOptions(t *testing.T) {
	for _, o := range []options{
		{Suite: "nope", Runs: 1, Duration: time.Millisecond, Conns: 1},
		{Suite: "all", Runs: 0, Duration: time.Millisecond, Conns: 1},
		{Suite: "all", Runs: 1, Duration: 0, Conns: 1},
	} {
		if err := run(context.Background(), o, io.Discard, io.Discard); err == nil {
			t.Errorf("%+v: no error", o)
		}
	}
}

func TestSummarize(t *testing.T) {
	r := summarize("g", "n", "u", true, []float64{3, 1, 2, 10})
	if r.Median != 2.5 || r.Min != 1 || r.Max != 10 {
		t.Errorf("median %v min %v max %v", r.Median, r.Min, r.Max)
	}
	if a := advantage(2, 1, true); a != 2 {
		t.Errorf("higher is better: %v", a)
	}
	if a := advantage(2, 1, false); a != 0.5 {
		t.Errorf("lower is better: %v", a)
	}
}

// TestWANHarness runs the WAN mode for a few milliseconds per case on short paths, so that
// CI keeps it working, and checks its files and the replay of its JSON.
func TestWANHarness(t *testing.T) {
	if testing.Short() {
		t.Skip("runs every WAN transport")
	}
	dir := t.TempDir()
	o := options{WANMode: true, Runs: 2, Duration: 60 * time.Millisecond, Quiet: true, WAN: wanOptions{
		RTTs: []time.Duration{4 * time.Millisecond}, Replies: 1, Rate: 100e6, BottleneckRTT: 4 * time.Millisecond,
		Warmup: 20 * time.Millisecond, Probe: 5 * time.Millisecond, SocketBuffer: 64 << 10,
		JSONFile: filepath.Join(dir, "results-wan.json"), SVGFile: filepath.Join(dir, "wan.svg"), MDFile: filepath.Join(dir, "wan.md"),
	}}
	if err := run(context.Background(), o, io.Discard, io.Discard); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(o.WAN.JSONFile)
	if err != nil {
		t.Fatal(err)
	}
	var rep wanReport
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, r := range rep.Rows {
		seen[r.Group+"/"+r.Name] = true
		if len(r.Values) < o.Runs || r.Min <= 0 || r.Min > r.Median || r.Median > r.Max || r.Advantage <= 0 {
			t.Errorf("%s %s: values %v, median %v, range %v-%v, against go-libp2p %v", r.Group, r.Name, r.Values, r.Median, r.Min, r.Max, r.Advantage)
		}
	}
	for _, tr := range wanTransports() {
		for _, m := range wanMetrics(o.WAN.RTTs) {
			if !seen[m.ID+"/"+tr.Name] {
				t.Errorf("no %s result for %s", m.ID, tr.Name)
			}
		}
	}
	for _, r := range rep.Rows {
		// Nothing crosses a 4 ms path and back in less (both directions are delayed).
		if r.Group == "reply@4ms" && r.Min < 4 {
			t.Errorf("%s: first reply in %v ms through a 4 ms path", r.Name, r.Min)
		}
	}
	if svg, err := os.ReadFile(o.WAN.SVGFile); err != nil || !bytes.Contains(svg, []byte("<svg")) {
		t.Errorf("%s: not an SVG (%v)", o.WAN.SVGFile, err)
	}
	md, err := os.ReadFile(o.WAN.MDFile)
	if err != nil {
		t.Fatal(err)
	}
	var replayed bytes.Buffer
	if err := run(context.Background(), options{From: o.WAN.JSONFile}, &replayed, io.Discard); err != nil {
		t.Fatal(err)
	}
	if replayed.String() != string(md) {
		t.Errorf("the replay of the JSON differs from the run's markdown:\n%s\nwant:\n%s", replayed.String(), md)
	}
	for _, want := range []string{"| go-libp2p Noise + yamux |", "| first reply, RTT 4 ms |", " RTT (", "× |"} {
		if !strings.Contains(string(md), want) {
			t.Errorf("markdown lacks %q:\n%s", want, md)
		}
	}
}
