package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/pprof"
	"slices"
	"strings"
	"time"
)

// options are the command-line settings of a run.
type options struct {
	Suite    string
	Runs     int
	Duration time.Duration
	Conns    int
	Only     string
	JSON     bool
	SVG      string
	Quiet    bool
	From     string
	WANMode  bool
	WAN      wanOptions
	Cases    map[string]bool // the transport cases to run (caseNames); empty: all
}

// caseNames are the groups of transport cases -cases selects from.
var caseNames = []string{"bulk", "rtt", "conns", "idle"}

func main() {
	var o options
	flag.StringVar(&o.Suite, "suite", "all", "what to run: transports, crypto or all")
	flag.IntVar(&o.Runs, "runs", 5, "runs of every case; the table shows their median and range")
	flag.DurationVar(&o.Duration, "duration", time.Second, "length of each throughput, round-trip and connection-rate case")
	flag.IntVar(&o.Conns, "conns", 1000, "idle connections established for the memory case")
	flag.StringVar(&o.Only, "only", "", "run only the transports whose name contains this (case-insensitive); tendril AES-128-GCM always runs as the reference")
	flag.BoolVar(&o.JSON, "json", false, "print JSON instead of markdown")
	flag.StringVar(&o.SVG, "svg", "", "also draw a bar chart of the transport results, relative to tendril, to this SVG file")
	flag.BoolVar(&o.Quiet, "q", false, "no progress on stderr")
	flag.StringVar(&o.From, "from", "", "measure nothing: print (and -svg draw) the results of an earlier -json run read from this file")
	cases := flag.String("cases", "", "run only these transport cases, comma-separated: "+strings.Join(caseNames, ", ")+" (default all)")
	flag.BoolVar(&o.WANMode, "wan", false, "the WAN mode: first reply, bulk and loaded round trips through a delay proxy (defaults -runs 3 -duration 2s)")
	rtts := flag.String("wan-rtt", "50ms,100ms", "WAN: the round-trip times measured without a rate cap, comma-separated")
	flag.IntVar(&o.WAN.Replies, "wan-replies", 5, "WAN: first replies timed per run and path")
	rate := flag.Float64("wan-rate", 100, "WAN: the bottleneck's rate, Mbit/s")
	flag.IntVar(&o.WAN.Queue, "wan-queue", 0, "WAN: the bottleneck's queue, bytes (0: one bandwidth-delay product)")
	flag.DurationVar(&o.WAN.BottleneckRTT, "wan-bottleneck-rtt", 50*time.Millisecond, "WAN: the bottleneck path's round-trip time")
	flag.DurationVar(&o.WAN.Warmup, "wan-warmup", time.Second, "WAN: bulk alone on the bottleneck before the probes start")
	flag.DurationVar(&o.WAN.Probe, "wan-probe", 10*time.Millisecond, "WAN: interval between 64-byte probes beside the bulk")
	flag.IntVar(&o.WAN.SocketBuffer, "wan-sockbuf", 64<<10, "WAN: SO_RCVBUF of the proxy's sockets on the bottleneck path (0: the kernel's autotuning)")
	flag.StringVar(&o.WAN.JSONFile, "wan-json", "results-wan.json", "WAN: write the results as JSON to this file (\"\": none)")
	flag.StringVar(&o.WAN.SVGFile, "wan-svg", "wan.svg", "WAN: draw the chart to this file (\"\": none)")
	flag.StringVar(&o.WAN.MDFile, "wan-md", "wan.md", "WAN: write the markdown tables to this file (\"\": none)")
	cpuprofile := flag.String("cpuprofile", "", "write a CPU profile of the whole run to this file (both ends of every connection run in this process)")
	flag.Parse()
	set := map[string]bool{}
	flag.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if o.WANMode {
		if !set["runs"] {
			o.Runs = 3
		}
		if !set["duration"] {
			o.Duration = 2 * time.Second
		}
	}
	o.WAN.Rate = int64(*rate * 1e6)
	if *cases != "" {
		o.Cases = map[string]bool{}
		for _, c := range strings.Split(*cases, ",") {
			c = strings.TrimSpace(c)
			if !slices.Contains(caseNames, c) {
				fmt.Fprintf(os.Stderr, "bench: -cases: %q is not one of %s\n", c, strings.Join(caseNames, ", "))
				os.Exit(2)
			}
			o.Cases[c] = true
		}
	}
	for _, f := range strings.Split(*rtts, ",") {
		d, err := time.ParseDuration(strings.TrimSpace(f))
		if err != nil || d <= 0 {
			fmt.Fprintf(os.Stderr, "bench: -wan-rtt: %q is not a positive duration\n", f)
			os.Exit(2)
		}
		o.WAN.RTTs = append(o.WAN.RTTs, d)
	}
	if *cpuprofile != "" {
		f, err := os.Create(*cpuprofile)
		if err == nil {
			err = pprof.StartCPUProfile(f)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "bench: -cpuprofile:", err)
			os.Exit(1)
		}
	}
	err := run(context.Background(), o, os.Stdout, os.Stderr)
	if *cpuprofile != "" {
		pprof.StopCPUProfile()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

// report is everything a run measured.
type report struct {
	Machine    string      `json:"machine"`
	Command    string      `json:"command"`
	Runs       int         `json:"runs"`
	Duration   string      `json:"duration"`
	Conns      int         `json:"conns"`
	Transports []rowResult `json:"transports,omitempty"`
	Crypto     []rowResult `json:"crypto,omitempty"`
}

func run(ctx context.Context, o options, stdout, stderr io.Writer) error {
	if o.From != "" {
		return replay(o, stdout)
	}
	if o.WANMode {
		return runWAN(ctx, o, stdout, stderr)
	}
	if o.Runs < 1 || o.Duration <= 0 || o.Conns < 1 {
		return errors.New("-runs, -duration and -conns must be positive")
	}
	doTransports := o.Suite == "all" || o.Suite == "transports"
	doCrypto := o.Suite == "all" || o.Suite == "crypto"
	if !doTransports && !doCrypto {
		return fmt.Errorf("unknown -suite %q (transports, crypto or all)", o.Suite)
	}
	if o.Quiet {
		stderr = io.Discard
	}
	rep := report{
		Machine:  machine(),
		Command:  "go run . " + strings.Join(os.Args[1:], " "),
		Runs:     o.Runs,
		Duration: o.Duration.String(),
		Conns:    o.Conns,
	}
	var specs []transportSpec
	for i, t := range transports() {
		if i == 0 || o.Only == "" || strings.Contains(strings.ToLower(t.Name), strings.ToLower(o.Only)) {
			specs = append(specs, t)
		}
	}
	var ccases []cryptoCase
	if doCrypto {
		ccases = cryptoCases()
	}
	p := newProgress(stderr, o, len(specs), len(ccases), doTransports)
	tr := newResults()
	cr := newResults()
	for r := range o.Runs {
		if doTransports {
			for _, t := range specs {
				if err := runTransport(ctx, t, o, tr, p, r); err != nil {
					return fmt.Errorf("%s: %w", t.Name, err)
				}
			}
		}
		for _, c := range ccases {
			p.step(r, c.Group+": "+c.Name)
			v, err := c.Run(o.Duration)
			if err != nil {
				return fmt.Errorf("%s %s: %w", c.Group, c.Name, err)
			}
			cr.add(c.Group, c.Name, v)
		}
	}
	p.done()
	if doTransports {
		rep.Transports = tr.transportRows(specs)
	}
	if doCrypto {
		rep.Crypto = cr.cryptoRows(ccases)
	}
	return output(o, rep, stdout)
}

// replay reports the results of an earlier -json run.
func replay(o options, stdout io.Writer) error {
	b, err := os.ReadFile(o.From)
	if err != nil {
		return err
	}
	var mode struct{ Mode string }
	if err := json.Unmarshal(b, &mode); err != nil {
		return fmt.Errorf("%s: %w", o.From, err)
	}
	if mode.Mode == "wan" {
		var rep wanReport
		if err := json.Unmarshal(b, &rep); err != nil {
			return fmt.Errorf("%s: %w", o.From, err)
		}
		// A replay rewrites only the files asked for.
		o.WAN.JSONFile = ""
		if o.SVG != "" {
			o.WAN.SVGFile = o.SVG
		}
		return wanOutput(o, rep, stdout)
	}
	var rep report
	if err := json.Unmarshal(b, &rep); err != nil {
		return fmt.Errorf("%s: %w", o.From, err)
	}
	return output(o, rep, stdout)
}

func output(o options, rep report, stdout io.Writer) error {
	if o.SVG != "" && len(rep.Transports) > 0 {
		if err := drawSVG(o.SVG, rep); err != nil {
			return err
		}
	}
	if o.JSON {
		return writeJSON(stdout, rep)
	}
	return writeMarkdown(stdout, rep)
}

// runTransport runs every transport case once.
func runTransport(ctx context.Context, t transportSpec, o options, res *results, p *progress, r int) error {
	srv, err := t.Start(ctx)
	if err != nil {
		return err
	}
	defer srv.Close()
	step := func(m metric) { p.step(r, t.Name+": "+m.Label) }
	want := func(c string) bool { return len(o.Cases) == 0 || o.Cases[c] }

	if want("bulk") {
		if err := runBulk(ctx, srv, o, res, t.Name, step); err != nil {
			return err
		}
	}
	if want("rtt") {
		step(metricRTT)
		rtt, err := roundTrips(ctx, srv, o.Duration)
		if err != nil {
			return fmt.Errorf("round trips: %w", err)
		}
		res.add(metricRTT.ID, t.Name, rtt/1e3)
	}
	if want("conns") {
		if err := runConns(ctx, srv, o, res, t.Name, step); err != nil {
			return err
		}
	}
	if want("idle") {
		return runIdle(ctx, srv, o, res, t, step)
	}
	return nil
}

// runBulk measures one and eight bulk streams, and the CPU one stream costs.
func runBulk(ctx context.Context, srv server, o options, res *results, name string, step func(metric)) error {
	step(metricBulk1)
	bps, cpb, err := bulk(ctx, srv, 1, o.Duration)
	if err != nil {
		return fmt.Errorf("bulk: %w", err)
	}
	res.add(metricBulk1.ID, name, bps/1e9)
	res.add(metricCPU.ID, name, cpb*1e9)

	step(metricBulk8)
	bps, _, err = bulk(ctx, srv, 8, o.Duration)
	if err != nil {
		return fmt.Errorf("bulk, 8 streams: %w", err)
	}
	res.add(metricBulk8.ID, name, bps/1e9)
	return nil
}

// runConns measures complete connections per second with one and two dialers.
func runConns(ctx context.Context, srv server, o options, res *results, name string, step func(metric)) error {
	if p, ok := srv.(preparer); ok {
		if err := p.Prepare(64); err != nil {
			return err
		}
	}
	for _, m := range []metric{metricConn1, metricConn2} {
		step(m)
		dialers := 1
		if m == metricConn2 {
			dialers = 2
		}
		cps, cpu, err := connRate(ctx, srv, dialers, o.Duration)
		if err != nil {
			return fmt.Errorf("connections, %d dialers: %w", dialers, err)
		}
		res.add(m.ID, name, cps)
		if m == metricConn2 {
			res.add(metricConnCPU.ID, name, float64(cpu)/float64(time.Microsecond))
		}
	}
	return nil
}

// runIdle measures what idle connections and streams hold.
func runIdle(ctx context.Context, srv server, o options, res *results, t transportSpec, step func(metric)) error {
	step(metricIdleConn)
	cost, err := idle(ctx, srv, o.Conns)
	if err != nil {
		return fmt.Errorf("idle connections: %w", err)
	}
	res.add(metricIdleConn.ID, t.Name, (cost.connHeap+cost.connStack)/1e3)
	res.add(metricIdleHeap.ID, t.Name, cost.connHeap/1e3)
	res.add(metricIdleStack.ID, t.Name, cost.connStack/1e3)
	res.add(metricIdleGoroutines.ID, t.Name, cost.connGoroutines)
	if t.Muxed {
		res.add(metricIdleStream.ID, t.Name, (cost.streamHeap+cost.streamStack)/1e3)
		res.add(metricStreamRoutines.ID, t.Name, cost.streamGoroutines)
	}
	return nil
}

func machine() string {
	return fmt.Sprintf("%s, %d CPUs, %s/%s, %s", cpuModel(), runtime.NumCPU(), runtime.GOOS, runtime.GOARCH, runtime.Version())
}

// cpuModel reads the CPU's name from /proc/cpuinfo where there is one.
func cpuModel() string {
	b, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return "unknown CPU"
	}
	for _, line := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return "unknown CPU"
}

// progress prints what runs, with the elapsed time and an estimate of what is
// left, on stderr.
type progress struct {
	w     io.Writer
	start time.Time
	total int
	n     int
	runs  int
}

func newProgress(w io.Writer, o options, transports, crypto int, doTransports bool) *progress {
	perRun := crypto
	if doTransports {
		perRun += transports * 6
	}
	return &progress{w: w, start: time.Now(), total: perRun * o.Runs, runs: o.Runs}
}

func (p *progress) step(run int, what string) {
	el := time.Since(p.start)
	eta := ""
	if p.n > 0 {
		left := time.Duration(float64(el) / float64(p.n) * float64(p.total-p.n))
		eta = fmt.Sprintf(", about %s left", left.Round(time.Second))
	}
	p.n++
	fmt.Fprintf(p.w, "[run %d/%d, %s%s] %s\n", run+1, p.runs, el.Round(time.Second), eta, what)
}

func (p *progress) done() {
	fmt.Fprintf(p.w, "done in %s\n", time.Since(p.start).Round(time.Second))
}
