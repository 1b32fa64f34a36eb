package main

// The WAN mode: the same transports as the loopback table, dialled through a delay proxy
// (delayproxy.go), so that what a round trip costs shows: the first reply after a dial, bulk
// throughput when a stream's window, not the CPU, is the limit, and the latency of small
// messages beside a bulk transfer through a bottleneck link.

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/tendril-p2p/tendril/cipher/aead"
)

// wanOptions are the settings of a WAN run.
type wanOptions struct {
	RTTs          []time.Duration // paths measured for first reply and bulk throughput
	Replies       int             // first-reply samples per run and path
	Rate          int64           // bottleneck rate, bits/s
	Queue         int             // bottleneck queue, bytes; 0 = one bandwidth-delay product
	BottleneckRTT time.Duration
	Warmup        time.Duration // bulk alone on the bottleneck before probing starts
	Probe         time.Duration // interval between 64-byte probes
	SocketBuffer  int           // the proxy's SO_RCVBUF on the bottleneck path
	JSONFile      string
	SVGFile       string
	MDFile        string
}

// wanReport is everything a WAN run measured, as written to results-wan.json.
type wanReport struct {
	Mode          string            `json:"mode"` // "wan"
	Machine       string            `json:"machine"`
	Command       string            `json:"command"`
	Runs          int               `json:"runs"`
	Duration      string            `json:"duration"`
	RTTs          []string          `json:"rtts"`
	Replies       int               `json:"replies_per_run"`
	RateBits      int64             `json:"bottleneck_bits_per_second"`
	QueueBytes    int               `json:"bottleneck_queue_bytes"`
	BottleneckRTT string            `json:"bottleneck_rtt"`
	Warmup        string            `json:"bottleneck_warmup"`
	Probe         string            `json:"probe_interval"`
	SocketBuffer  int               `json:"proxy_socket_buffer"`
	Kernel        map[string]string `json:"kernel"`
	Metrics       []metric          `json:"metrics"`
	// ProxyLate is how late the delay proxies delivered, over the whole run.
	ProxyLate lateStats   `json:"proxy_lateness"`
	Rows      []rowResult `json:"rows"`
}

// wanTransports are the loopback table's transports that a user would pick, and raw TCP as
// the ceiling of the path. go-libp2p runs with its real yamux defaults (16 MiB windows):
// its window is the point here.
func wanTransports() []transportSpec {
	return []transportSpec{
		{"tendril AES-128-GCM", true, func(ctx context.Context) (server, error) { return startTendril(ctx, aead.AES128GCM, tcpListen) }},
		{"tendril over WebSocket", true, func(ctx context.Context) (server, error) { return startTendril(ctx, aead.AES128GCM, wsListen) }},
		{"crypto/tls 1.3 + yamux", true, func(ctx context.Context) (server, error) { return startStd(ctx, true, true) }},
		{"go-libp2p Noise + yamux", true, func(ctx context.Context) (server, error) { return startLibp2p(ctx, "noise") }},
		{"go-libp2p TLS + yamux", true, func(ctx context.Context) (server, error) { return startLibp2p(ctx, "tls") }},
		{"TCP (no crypto, no mux)", false, func(ctx context.Context) (server, error) { return startStd(ctx, false, false) }},
	}
}

func isLibp2p(name string) bool { return strings.HasPrefix(name, "go-libp2p") }

func rttLabel(d time.Duration) string { return fmt.Sprintf("RTT %d ms", d.Milliseconds()) }

// wanMetrics are the WAN table's columns for the given paths.
func wanMetrics(rtts []time.Duration) []metric {
	var ms []metric
	for _, r := range rtts {
		ms = append(ms, metric{fmt.Sprintf("reply@%s", r), "first reply, " + rttLabel(r), "ms", false, "%.0f"})
	}
	for _, r := range rtts {
		ms = append(ms,
			metric{fmt.Sprintf("bulk1@%s", r), "1 stream, " + rttLabel(r), "MB/s", true, "%.1f"},
			metric{fmt.Sprintf("bulk8@%s", r), "8 streams, " + rttLabel(r), "MB/s", true, "%.1f"})
	}
	return append(ms,
		metric{"loaded-p50", "64 B round trip beside bulk, p50", "ms", false, "%.0f"},
		metric{"loaded-p99", "64 B round trip beside bulk, p99", "ms", false, "%.0f"},
		metric{"loaded-bulk", "bulk beside the probes", "MB/s", true, "%.1f"})
}

func runWAN(ctx context.Context, o options, stdout, stderr io.Writer) error {
	w := o.WAN
	if o.Runs < 1 || o.Duration <= 0 || w.Replies < 1 || len(w.RTTs) == 0 || w.Rate <= 0 ||
		w.BottleneckRTT <= 0 || w.Probe <= 0 || w.Warmup < 0 || w.Queue < 0 {
		return errors.New("-runs, -duration, -wan-replies, -wan-rtt, -wan-rate, -wan-bottleneck-rtt and -wan-probe must be positive")
	}
	if o.Quiet {
		stderr = io.Discard
	}
	queue := w.Queue
	if queue == 0 {
		queue = max(int(float64(w.Rate)/8*w.BottleneckRTT.Seconds()), proxyMinQueue)
	}
	rep := wanReport{
		Mode: "wan", Machine: machine(), Command: "go run . " + strings.Join(os.Args[1:], " "),
		Runs: o.Runs, Duration: o.Duration.String(), Replies: w.Replies,
		RateBits: w.Rate, QueueBytes: queue, BottleneckRTT: w.BottleneckRTT.String(),
		Warmup: w.Warmup.String(), Probe: w.Probe.String(), SocketBuffer: w.SocketBuffer,
		Kernel: kernelTCP(), Metrics: wanMetrics(w.RTTs),
	}
	for _, r := range w.RTTs {
		rep.RTTs = append(rep.RTTs, r.String())
	}
	var specs []transportSpec
	for i, t := range wanTransports() {
		if i == 0 || o.Only == "" || strings.Contains(strings.ToLower(t.Name), strings.ToLower(o.Only)) {
			specs = append(specs, t)
		}
	}
	perRun := len(specs) * (3*len(w.RTTs) + 1)
	p := &progress{w: stderr, start: time.Now(), total: perRun * o.Runs, runs: o.Runs}
	res := newResults()
	// Runs are interleaved across transports, so that a slow minute of the machine
	// falls on all of them.
	for r := range o.Runs {
		for _, t := range specs {
			if err := runWANTransport(ctx, t, o, queue, res, p, r, &rep.ProxyLate); err != nil {
				return fmt.Errorf("%s: %w", t.Name, err)
			}
		}
	}
	p.done()
	rep.Rows = res.wanRows(specs, rep.Metrics)
	return wanOutput(o, rep, stdout)
}

// wanOutput writes the report's files and prints it.
func wanOutput(o options, rep wanReport, stdout io.Writer) error {
	var md strings.Builder
	writeWANMarkdown(&md, rep)
	w := o.WAN
	if w.JSONFile != "" {
		f, err := os.Create(w.JSONFile)
		if err != nil {
			return err
		}
		err = writeJSON(f, rep)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return err
		}
	}
	if w.MDFile != "" {
		if err := os.WriteFile(w.MDFile, []byte(md.String()), 0o644); err != nil {
			return err
		}
	}
	if w.SVGFile != "" {
		if err := drawWANChart(w.SVGFile, rep); err != nil {
			return err
		}
	}
	if o.JSON {
		return writeJSON(stdout, rep)
	}
	_, err := io.WriteString(stdout, md.String())
	return err
}

// runWANTransport runs every WAN case of one transport once.
func runWANTransport(ctx context.Context, t transportSpec, o options, queue int, res *results, p *progress, r int, late *lateStats) error {
	w := o.WAN
	srv, err := t.Start(ctx)
	if err != nil {
		return err
	}
	defer srv.Close()
	rs, ok := srv.(routable)
	if !ok {
		return errors.New("bench: this transport cannot be dialled through a proxy")
	}
	if pr, ok := srv.(preparer); ok {
		// Client identities are made before anything is timed.
		if err := pr.Prepare(w.Replies + 2); err != nil {
			return err
		}
	}
	via := func(cfg proxyConfig, f func() error) error {
		cfg.Target = rs.ListenAddr()
		px, err := startDelayProxy(cfg)
		if err != nil {
			return err
		}
		defer func() {
			px.Close()
			late.merge(px.Lateness())
		}()
		if err := rs.Route(px.Addr()); err != nil {
			return err
		}
		defer rs.Route("")
		return f()
	}
	for _, rtt := range w.RTTs {
		err := via(proxyConfig{Delay: rtt / 2}, func() error {
			id := func(m string) string { return fmt.Sprintf("%s@%s", m, rtt) }
			p.step(r, fmt.Sprintf("%s: first reply, %s", t.Name, rttLabel(rtt)))
			for range w.Replies {
				d, err := firstReply(ctx, srv)
				if err != nil {
					return fmt.Errorf("first reply: %w", err)
				}
				res.add(id("reply"), t.Name, float64(d)/1e6)
			}
			for _, n := range []int{1, 8} {
				p.step(r, fmt.Sprintf("%s: %s, %s", t.Name, map[int]string{1: "1 stream", 8: "8 streams"}[n], rttLabel(rtt)))
				bps, _, err := bulk(ctx, srv, n, o.Duration)
				if err != nil {
					return fmt.Errorf("bulk, %d streams: %w", n, err)
				}
				res.add(id(fmt.Sprintf("bulk%d", n)), t.Name, bps/1e6)
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("%s: %w", rttLabel(rtt), err)
		}
	}
	p.step(r, fmt.Sprintf("%s: 64 B round trips beside bulk, %d Mbit/s, %s", t.Name, w.Rate/1e6, rttLabel(w.BottleneckRTT)))
	cfg := proxyConfig{Delay: w.BottleneckRTT / 2, Rate: w.Rate, Queue: queue, SocketBuffer: w.SocketBuffer}
	return via(cfg, func() error {
		lat, bps, err := loadedRoundTrips(ctx, srv, w.Warmup, o.Duration, w.Probe)
		if err != nil {
			return fmt.Errorf("round trips beside bulk: %w", err)
		}
		res.add("loaded-p50", t.Name, percentile(lat, 0.50))
		res.add("loaded-p99", t.Name, percentile(lat, 0.99))
		res.add("loaded-bulk", t.Name, bps/1e6)
		return nil
	})
}

// firstReply times one complete first exchange: dial, handshake, multiplexer, one stream
// and one 64-byte round trip on it. The connection is closed afterwards, untimed.
func firstReply(ctx context.Context, srv server) (time.Duration, error) {
	t0 := time.Now()
	c, st, err := dialStream(ctx, srv)
	if err != nil {
		return 0, err
	}
	defer c.Close()
	defer st.Close()
	var msg [1 + rttSize]byte
	msg[0] = opEcho
	if _, err := st.Write(msg[:]); err != nil {
		return 0, err
	}
	if _, err := io.ReadFull(st, msg[:rttSize]); err != nil {
		return 0, err
	}
	return time.Since(t0), nil
}

// loadedRoundTrips runs a bulk stream for warmup + d and, after warmup, sends a 64-byte
// probe every interval on a second stream of the same connection, open loop: a probe is
// stamped with the time it was due, not the time its write got through, so a write that
// blocks behind the bulk counts against the transport. It returns every probe's round trip
// in milliseconds and the bulk stream's throughput in bytes per second.
func loadedRoundTrips(ctx context.Context, srv server, warmup, d, interval time.Duration) ([]float64, float64, error) {
	c, probe, err := dialStream(ctx, srv)
	if err != nil {
		return nil, 0, err
	}
	defer c.Close()
	defer probe.Close()
	if _, err := probe.Write([]byte{opEcho}); err != nil {
		return nil, 0, err
	}
	load, err := c.OpenStream(ctx)
	if err != nil {
		return nil, 0, err
	}
	defer load.Close()

	var (
		wg              sync.WaitGroup
		bulkN           int64
		bulkErr         error
		bulkTime        time.Duration
		n               = max(int(d/interval), 1)
		lat             = make([]float64, 0, n)
		readErr         error
		probesRead      = make(chan struct{})
		bulkStart       = time.Now()
		errAbandoned    = errors.New("bench: probes unanswered 30 s after the last was sent")
		abandonDeadline = warmup + d + 30*time.Second
	)
	wg.Go(func() {
		bulkN, bulkErr = sink(load, warmup+d)
		bulkTime = time.Since(bulkStart)
	})
	go func() {
		defer close(probesRead)
		var msg [rttSize]byte
		for range n {
			if _, err := io.ReadFull(probe, msg[:]); err != nil {
				readErr = err
				return
			}
			lat = append(lat, float64(time.Now().UnixNano()-int64(binary.BigEndian.Uint64(msg[:])))/1e6)
		}
	}()
	writeErr := func() error {
		if !sleepCtx(ctx, warmup) {
			return ctx.Err()
		}
		start := time.Now()
		var msg [rttSize]byte
		for i := range n {
			due := start.Add(time.Duration(i) * interval)
			if !sleepCtx(ctx, time.Until(due)) {
				return ctx.Err()
			}
			binary.BigEndian.PutUint64(msg[:], uint64(due.UnixNano()))
			if _, err := probe.Write(msg[:]); err != nil {
				return err
			}
		}
		return nil
	}()
	timer := time.NewTimer(time.Until(bulkStart.Add(abandonDeadline)))
	defer timer.Stop()
	var abandoned error
	select {
	case <-probesRead:
	case <-timer.C:
		abandoned = errAbandoned
	}
	if abandoned != nil || writeErr != nil {
		c.Close() // unblocks the reader and the bulk stream
	}
	<-probesRead
	if err := errors.Join(abandoned, writeErr, readErr); err != nil {
		c.Close()
		wg.Wait()
		return nil, 0, err
	}
	wg.Wait()
	if bulkErr != nil {
		return nil, 0, fmt.Errorf("bulk: %w", bulkErr)
	}
	return lat, float64(bulkN) / bulkTime.Seconds(), nil
}

// percentile returns the q-quantile of v (nearest rank).
func percentile(v []float64, q float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	i := int(float64(len(s))*q+0.5) - 1
	return s[min(max(i, 0), len(s)-1)]
}

// kernelTCP reads the TCP buffer limits that bound a real path (Linux only).
func kernelTCP() map[string]string {
	out := map[string]string{}
	for _, k := range []string{"net/ipv4/tcp_rmem", "net/ipv4/tcp_wmem", "net/core/rmem_max", "net/core/wmem_max", "net/ipv4/tcp_congestion_control"} {
		if b, err := os.ReadFile("/proc/sys/" + k); err == nil {
			out[strings.ReplaceAll(k, "/", ".")] = strings.Join(strings.Fields(string(b)), " ")
		}
	}
	return out
}

func (r *results) wanRows(specs []transportSpec, ms []metric) []rowResult {
	var out []rowResult
	for _, m := range ms {
		byName := r.v[m.ID]
		// The reference is the better of the go-libp2p configurations, by median.
		var best rowResult
		for _, t := range specs {
			if vals := byName[t.Name]; isLibp2p(t.Name) && len(vals) > 0 {
				row := summarize(m.ID, t.Name, m.Unit, m.HigherBetter, vals)
				if best.Name == "" || advantage(row.Median, best.Median, m.HigherBetter) > 1 {
					best = row
				}
			}
		}
		for _, t := range specs {
			vals := byName[t.Name]
			if len(vals) == 0 {
				continue
			}
			row := summarize(m.ID, t.Name, m.Unit, m.HigherBetter, vals)
			if best.Name != "" {
				row.Reference = best.Name
				row.Advantage = advantage(row.Median, best.Median, m.HigherBetter)
			}
			out = append(out, row)
		}
	}
	return out
}

// rttOf returns the path's RTT in milliseconds for a metric measured on one ("reply@50ms").
func rttOf(id string) float64 {
	_, s, ok := strings.Cut(id, "@")
	if !ok {
		return 0
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0
	}
	return float64(d) / 1e6
}

func writeWANMarkdown(b *strings.Builder, rep wanReport) {
	fmt.Fprintf(b, "`%s` on %s; medians of %d runs (min–max), interleaved across transports; %s per bulk case, %d first replies per run and path.\n\n",
		rep.Command, rep.Machine, rep.Runs, rep.Duration, rep.Replies)
	fmt.Fprintf(b, "Paths: a delay proxy on loopback (one-way delay each way, no loss); RTT %s without a rate cap; and a %s Mbit/s bottleneck with a %d KB queue at RTT %s, where 64-byte probes go every %s on a second stream while a bulk stream runs (after %s of bulk alone).\n\n",
		strings.Join(rep.RTTs, " and "), trimFloat(float64(rep.RateBits)/1e6), rep.QueueBytes/1000, rep.BottleneckRTT, rep.Probe, rep.Warmup)
	byKey, names := indexRows(rep.Rows)
	var cols []metric
	for _, m := range rep.Metrics {
		for _, n := range names {
			if _, ok := byKey[m.ID+"\x00"+n]; ok {
				cols = append(cols, m)
				break
			}
		}
	}
	table := func(title string, cell func(metric, rowResult) string, rows []string) {
		b.WriteString(title + "\n\n| transport |")
		for _, m := range cols {
			fmt.Fprintf(b, " %s |", m.Label)
		}
		b.WriteString("\n| --- |")
		for range cols {
			b.WriteString(" ---: |")
		}
		b.WriteString("\n")
		for _, n := range rows {
			fmt.Fprintf(b, "| %s |", n)
			for _, m := range cols {
				r, ok := byKey[m.ID+"\x00"+n]
				if !ok {
					b.WriteString(" n/a |")
					continue
				}
				fmt.Fprintf(b, " %s |", cell(m, r))
			}
			b.WriteString("\n")
		}
		b.WriteString("\n")
	}
	table("Measured (ms ↓, MB/s ↑; first replies also in round trips of the path):", func(m metric, r rowResult) string {
		s := cell(m, r, rep.Runs)
		if rtt := rttOf(m.ID); rtt > 0 && m.Unit == "ms" {
			s = fmt.Sprintf("%.0f = %.2f RTT", r.Median, r.Median/rtt)
			if rep.Runs > 1 || len(r.Values) > 1 {
				s += fmt.Sprintf(" (%.0f–%.0f)", r.Min, r.Max)
			}
		}
		return s
	}, names)
	var ref string
	for _, r := range rep.Rows {
		if r.Reference != "" {
			ref = r.Reference
			break
		}
	}
	if ref != "" {
		table("Against the better go-libp2p configuration in each column (its median over the other's, inverted for ms): above 1, better than go-libp2p.",
			func(m metric, r rowResult) string {
				if r.Advantage == 0 {
					return "n/a"
				}
				return fmt.Sprintf("%.2f×", r.Advantage)
			}, names)
	}
	if l := rep.ProxyLate; l.N > 0 {
		fmt.Fprintf(b, "The proxy's own timing error: it woke for its deadlines %.0f µs late on average (%d wake-ups; %.2f%% more than 1 ms late; worst %.1f ms).\n\n",
			float64(l.Sum)/float64(l.N)/1e3, l.N, 100*float64(l.Over1ms)/float64(l.N), float64(l.Max)/1e6)
	}
	if len(rep.Kernel) > 0 {
		b.WriteString("What this machine's kernel would allow one TCP connection on a real path of that RTT (the proxy does not model it: both of its hops are loopback):\n\n")
		keys := make([]string, 0, len(rep.Kernel))
		for k := range rep.Kernel {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			fmt.Fprintf(b, "- `%s = %s`\n", k, rep.Kernel[k])
		}
		rmem, wmem := sysctlMax(rep.Kernel["net.ipv4.tcp_rmem"]), sysctlMax(rep.Kernel["net.ipv4.tcp_wmem"])
		for _, rs := range rep.RTTs {
			d, err := time.ParseDuration(rs)
			if err != nil || rmem == 0 || wmem == 0 {
				continue
			}
			fmt.Fprintf(b, "- RTT %s: receive buffer max / RTT = %.0f MB/s; send buffer max / RTT = %.0f MB/s (unacknowledged data counts against the send buffer)\n",
				rs, float64(rmem)/d.Seconds()/1e6, float64(wmem)/d.Seconds()/1e6)
		}
		b.WriteString("\n")
	}
}

// sysctlMax returns the last (maximum) field of a three-value TCP buffer sysctl.
func sysctlMax(v string) int64 {
	f := strings.Fields(v)
	if len(f) == 0 {
		return 0
	}
	var n int64
	if _, err := fmt.Sscan(f[len(f)-1], &n); err != nil {
		return 0
	}
	return n
}

func trimFloat(f float64) string {
	return strings.TrimSuffix(strings.TrimRight(fmt.Sprintf("%.3f", f), "0"), ".")
}

// wanChartCap is where the chart's bars are cut: raw TCP reaches many times any transport.
const wanChartCap = 4

// drawWANChart draws each transport's figures relative to the better go-libp2p (= 1; above 1
// is better, for every column, the ms columns inverted).
func drawWANChart(path string, rep wanReport) error {
	byKey, names := indexRows(rep.Rows)
	var ms []metric
	for _, m := range rep.Metrics {
		if m.ID != "loaded-bulk" {
			ms = append(ms, m)
		}
	}
	short := strings.NewReplacer("first reply, ", "reply ", "64 B round trip beside bulk, ", "loaded ", " streams", " str", " stream", " str", "RTT ", "")
	labels := make([]string, len(ms))
	for i, m := range ms {
		labels[i] = short.Replace(m.Label)
	}
	return drawBars(path,
		fmt.Sprintf("WAN: each transport relative to the better go-libp2p (higher is better; bars cut at %d×)", wanChartCap),
		"× the better go-libp2p", names, labels,
		func(n string, j int) float64 {
			if r, ok := byKey[ms[j].ID+"\x00"+n]; ok && r.Advantage > 0 {
				return min(r.Advantage, wanChartCap)
			}
			return 0
		}, 1.6)
}
