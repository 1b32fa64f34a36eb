package main

import (
	"encoding/json"
	"fmt"
	"image/color"
	"io"
	"slices"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
)

// A metric is one column of the transport table.
type metric struct {
	ID           string
	Label        string
	Unit         string
	HigherBetter bool
	Format       string
}

var (
	metricBulk1          = metric{"bulk1", "1 stream", "GB/s", true, "%.2f"}
	metricBulk8          = metric{"bulk8", "8 streams", "GB/s", true, "%.2f"}
	metricCPU            = metric{"cpu", "CPU per GB", "s", false, "%.2f"}
	metricRTT            = metric{"rtt", "64 B round trips", "k/s", true, "%.1f"}
	metricConn1          = metric{"conn1", "conns, 1 dialer", "/s", true, "%.0f"}
	metricConn2          = metric{"conn2", "conns, 2 dialers", "/s", true, "%.0f"}
	metricConnCPU        = metric{"conncpu", "CPU per conn, 2 dialers", "µs", false, "%.0f"}
	metricIdleConn       = metric{"idleconn", "idle conn", "KB", false, "%.1f"}
	metricIdleHeap       = metric{"idleheap", "idle conn heap", "KB", false, "%.1f"}
	metricIdleStack      = metric{"idlestack", "idle conn stacks", "KB", false, "%.1f"}
	metricIdleGoroutines = metric{"idlegoroutines", "goroutines per idle conn", "", false, "%.1f"}
	metricIdleStream     = metric{"idlestream", "idle stream", "KB", false, "%.1f"}
	metricStreamRoutines = metric{"streamgoroutines", "goroutines per idle stream", "", false, "%.1f"}
)

// metrics are the table's columns, in order.
var metrics = []metric{
	metricBulk1, metricBulk8, metricCPU, metricRTT, metricConn1, metricConn2, metricConnCPU,
	metricIdleConn, metricIdleHeap, metricIdleStack, metricIdleGoroutines, metricIdleStream, metricStreamRoutines,
}

// results collects the values of every run, by group (metric) and row name.
type results struct {
	v map[string]map[string][]float64
}

func newResults() *results { return &results{v: map[string]map[string][]float64{}} }

func (r *results) add(group, name string, v float64) {
	if r.v[group] == nil {
		r.v[group] = map[string][]float64{}
	}
	r.v[group][name] = append(r.v[group][name], v)
}

// rowResult is one measured value over all runs.
type rowResult struct {
	Group        string    `json:"group"`
	Name         string    `json:"name"`
	Unit         string    `json:"unit"`
	HigherBetter bool      `json:"higher_is_better"`
	Values       []float64 `json:"values"`
	Median       float64   `json:"median"`
	Min          float64   `json:"min"`
	Max          float64   `json:"max"`
	// Advantage is how many times better the group's reference (tendril, the
	// first row) is than this row: reference/this when higher is better,
	// this/reference when lower is better. Zero when there is no reference.
	Advantage float64 `json:"reference_advantage"`
	Reference string  `json:"reference"`
}

func summarize(group, name, unit string, higher bool, vals []float64) rowResult {
	s := slices.Clone(vals)
	slices.Sort(s)
	med := s[len(s)/2]
	if len(s)%2 == 0 {
		med = (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	return rowResult{Group: group, Name: name, Unit: unit, HigherBetter: higher, Values: vals, Median: med, Min: s[0], Max: s[len(s)-1]}
}

func advantage(ref, this float64, higher bool) float64 {
	if ref == 0 || this == 0 {
		return 0
	}
	if higher {
		return ref / this
	}
	return this / ref
}

func (r *results) transportRows(specs []transportSpec) []rowResult {
	var out []rowResult
	ref := specs[0].Name
	for _, m := range metrics {
		byName := r.v[m.ID]
		for _, t := range specs {
			vals := byName[t.Name]
			if len(vals) == 0 {
				continue
			}
			row := summarize(m.ID, t.Name, m.Unit, m.HigherBetter, vals)
			if refVals := byName[ref]; len(refVals) > 0 {
				row.Reference = ref
				row.Advantage = advantage(summarize("", "", "", false, refVals).Median, row.Median, m.HigherBetter)
			}
			out = append(out, row)
		}
	}
	return out
}

func (r *results) cryptoRows(cases []cryptoCase) []rowResult {
	var out []rowResult
	first := map[string]float64{}
	refName := map[string]string{}
	for _, c := range cases {
		vals := r.v[c.Group][c.Name]
		if len(vals) == 0 {
			continue
		}
		row := summarize(c.Group, c.Name, "GB/s", true, scale(vals, 1e-9))
		if _, ok := first[c.Group]; !ok {
			first[c.Group], refName[c.Group] = row.Median, c.Name
		}
		row.Reference = refName[c.Group]
		row.Advantage = advantage(first[c.Group], row.Median, true)
		out = append(out, row)
	}
	return out
}

func scale(v []float64, f float64) []float64 {
	out := make([]float64, len(v))
	for i, x := range v {
		out[i] = x * f
	}
	return out
}

func writeJSON(w io.Writer, rep any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(rep)
}

func cell(m metric, r rowResult, runs int) string {
	s := fmt.Sprintf(m.Format, r.Median)
	if runs > 1 {
		s += fmt.Sprintf(" ("+m.Format+"–"+m.Format+")", r.Min, r.Max)
	}
	return s
}

func writeMarkdown(w io.Writer, rep report) error {
	var b strings.Builder
	fmt.Fprintf(&b, "`%s` on %s; medians of %d runs (min–max), %s per timed case, %d idle connections.\n\n",
		rep.Command, rep.Machine, rep.Runs, rep.Duration, rep.Conns)
	if len(rep.Transports) > 0 {
		byMetric := map[string]map[string]rowResult{}
		var names []string
		for _, r := range rep.Transports {
			if byMetric[r.Group] == nil {
				byMetric[r.Group] = map[string]rowResult{}
			}
			byMetric[r.Group][r.Name] = r
			if !slices.Contains(names, r.Name) {
				names = append(names, r.Name)
			}
		}
		var cols []metric
		for _, m := range metrics {
			if byMetric[m.ID] != nil {
				cols = append(cols, m)
			}
		}
		header := func(title func(metric) string) {
			b.WriteString("| transport |")
			for _, m := range cols {
				fmt.Fprintf(&b, " %s |", title(m))
			}
			b.WriteString("\n| --- |")
			for range cols {
				b.WriteString(" ---: |")
			}
			b.WriteString("\n")
		}
		b.WriteString("Measured values (both ends of every connection run in this process and are counted):\n\n")
		header(func(m metric) string {
			better := "↑"
			if !m.HigherBetter {
				better = "↓"
			}
			if m.Unit == "" {
				return m.Label + " " + better
			}
			return fmt.Sprintf("%s, %s %s", m.Label, m.Unit, better)
		})
		for _, n := range names {
			fmt.Fprintf(&b, "| %s |", n)
			for _, m := range cols {
				r, ok := byMetric[m.ID][n]
				if !ok {
					b.WriteString(" n/a |")
					continue
				}
				fmt.Fprintf(&b, " %s |", cell(m, r, rep.Runs))
			}
			b.WriteString("\n")
		}
		ref := rep.Transports[0].Reference
		fmt.Fprintf(&b, "\nHow many times better %s is than each (its median over the other's; for ↓ columns the other's over its): above 1, tendril wins.\n\n", ref)
		header(func(m metric) string { return m.Label })
		for _, n := range names[1:] {
			fmt.Fprintf(&b, "| %s |", n)
			for _, m := range cols {
				r, ok := byMetric[m.ID][n]
				if !ok || r.Advantage == 0 {
					b.WriteString(" n/a |")
					continue
				}
				fmt.Fprintf(&b, " %.2f× |", r.Advantage)
			}
			b.WriteString("\n")
		}
	}
	if len(rep.Crypto) > 0 {
		b.WriteString("\nCrypto, one goroutine:\n\n| case | implementation | GB/s | min–max | first row ÷ this |\n| --- | --- | ---: | ---: | ---: |\n")
		for _, r := range rep.Crypto {
			fmt.Fprintf(&b, "| %s | %s | %.2f | %.2f–%.2f | %.2f× |\n", r.Group, r.Name, r.Median, r.Min, r.Max, r.Advantage)
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// chartMetrics are the metrics drawn in the chart.
var chartMetrics = []metric{metricBulk1, metricBulk8, metricCPU, metricRTT, metricConn1, metricConn2, metricIdleConn, metricIdleStream}

// chartCap is where the chart's bars are cut: the unencrypted ceilings reach
// ten times tendril's connection rate, which would flatten everything else.
const chartCap = 4

// chartColors has one color per transport.
var chartColors = []color.Color{
	color.RGBA{0x1f, 0x5f, 0xa8, 0xff}, color.RGBA{0x6b, 0xa3, 0xd6, 0xff},
	color.RGBA{0xd6, 0x3b, 0x2f, 0xff}, color.RGBA{0xe8, 0x8f, 0x2a, 0xff},
	color.RGBA{0xf2, 0xc3, 0x4a, 0xff}, color.RGBA{0x7a, 0x9a, 0x5a, 0xff},
	color.RGBA{0x9b, 0x6f, 0xb5, 0xff}, color.RGBA{0x80, 0x80, 0x80, 0xff},
}

// indexRows returns the rows by group and name (key group+"\x00"+name) and the names in
// their first order.
func indexRows(rows []rowResult) (map[string]rowResult, []string) {
	byKey := map[string]rowResult{}
	var names []string
	for _, r := range rows {
		byKey[r.Group+"\x00"+r.Name] = r
		if !slices.Contains(names, r.Name) {
			names = append(names, r.Name)
		}
	}
	return byKey, names
}

// drawBars draws a grouped bar chart: one group per label, one bar per name in it, of
// height val(name, group index) (0: no bar). The format follows the file name's extension
// (svg, png, pdf).
func drawBars(path, title, yLabel string, names, labels []string, val func(name string, i int) float64, headroom float64) error {
	p := plot.New()
	p.Title.Text = title
	p.Y.Label.Text = yLabel
	w := vg.Points(6)
	top := 1.0
	for i, n := range names {
		vals := make(plotter.Values, len(labels))
		for j := range labels {
			vals[j] = val(n, j)
			top = max(top, vals[j])
		}
		bars, err := plotter.NewBarChart(vals, w)
		if err != nil {
			return err
		}
		bars.LineStyle.Width = 0
		bars.Color = chartColors[i%len(chartColors)]
		bars.Offset = vg.Length(float64(i)-float64(len(names)-1)/2) * w
		p.Add(bars)
		p.Legend.Add(n, bars)
	}
	p.Legend.Top = true
	p.Legend.Left = true
	p.Legend.XOffs = vg.Points(10)
	p.Y.Min, p.Y.Max = 0, top*headroom
	p.NominalX(labels...)
	p.Add(plotter.NewGrid())
	return p.Save(30*vg.Centimeter, 16*vg.Centimeter, path)
}

// drawSVG draws, for every metric, each transport's performance relative to
// the reference (tendril AES-128-GCM = 1; above 1 is better than tendril,
// for every metric, lower-is-better ones inverted).
func drawSVG(path string, rep report) error {
	byKey, names := indexRows(rep.Transports)
	labels := make([]string, len(chartMetrics))
	for i, m := range chartMetrics {
		labels[i] = m.Label
	}
	return drawBars(path,
		fmt.Sprintf("Each transport relative to %s (higher is better; bars cut at %d×)", rep.Transports[0].Reference, chartCap),
		"× tendril", names, labels,
		func(n string, j int) float64 {
			if r, ok := byKey[chartMetrics[j].ID+"\x00"+n]; ok && r.Advantage > 0 {
				return min(1/r.Advantage, chartCap)
			}
			return 0
		}, 1.75)
}
