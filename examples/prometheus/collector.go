package main

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/tendril-p2p/tendril"
)

// Collector exports a Service's Stats as Prometheus metrics. It reads Stats once per scrape,
// so it costs nothing between scrapes.
type Collector struct {
	svc *tendril.Service

	bytes, messages, streams, sessions, handshakes, failed *prometheus.Desc
	streamsOpen, sessionsOpen                              *prometheus.Desc
}

// NewCollector returns a Collector for svc.
func NewCollector(svc *tendril.Service) *Collector {
	d := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc("tendril_"+name, help, labels, nil)
	}
	return &Collector{
		svc:          svc,
		bytes:        d("bytes_total", "Mux bytes to and from the secure connections, before encryption.", "direction"),
		messages:     d("messages_total", "Protocol messages sent and received.", "direction"),
		streams:      d("streams_total", "Protocol streams opened by this node or accepted from peers.", "by"),
		streamsOpen:  d("streams_open", "Protocol streams open now."),
		sessions:     d("sessions_total", "Sessions established, by direction.", "direction"),
		sessionsOpen: d("sessions_open", "Sessions open now, by direction.", "direction"),
		handshakes:   d("handshakes_completed_total", "Handshakes that succeeded."),
		failed:       d("handshakes_failed_total", "Handshakes that failed, by reason.", "reason"),
	}
}

// Describe implements prometheus.Collector.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.bytes, c.messages, c.streams, c.streamsOpen, c.sessions, c.sessionsOpen, c.handshakes, c.failed} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	st := c.svc.Stats()
	counter := func(d *prometheus.Desc, v uint64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), labels...)
	}
	gauge := func(d *prometheus.Desc, v int, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, float64(v), labels...)
	}
	counter(c.bytes, st.BytesSent, "sent")
	counter(c.bytes, st.BytesReceived, "received")
	counter(c.messages, st.MessagesSent, "sent")
	counter(c.messages, st.MessagesReceived, "received")
	counter(c.streams, st.StreamsOpened, "local")
	counter(c.streams, st.StreamsAccepted, "peer")
	gauge(c.streamsOpen, st.StreamsOpen)
	counter(c.sessions, st.InboundTotal, "inbound")
	counter(c.sessions, st.OutboundTotal, "outbound")
	gauge(c.sessionsOpen, st.InboundOpen, "inbound")
	gauge(c.sessionsOpen, st.OutboundOpen, "outbound")
	counter(c.handshakes, st.HandshakesCompleted)
	f := st.HandshakesFailed
	for _, r := range []struct {
		reason string
		n      uint64
	}{
		{"timeout", f.Timeout}, {"peer_id_mismatch", f.PeerIDMismatch}, {"no_common_suite", f.NoCommonSuite},
		{"not_tendril", f.NotTendril}, {"bad_peer", f.BadPeer}, {"aborted", f.Aborted}, {"other", f.Other},
	} {
		counter(c.failed, r.n, r.reason)
	}
}
