package mdns

import (
	"net/netip"
	"testing"
	"time"
)

// BenchmarkParse measures what a packet costs the receiver: a genuine response with the
// largest payload, and a spam response with 4 instances (the most parsed per packet).
func BenchmarkParse(b *testing.B) {
	n := testNames("bob")
	full, _ := buildResponse(testNames("alice"), announcement{port: 1, payload: make([]byte, MaxPayload),
		addrs: []netip.Addr{netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("fe80::1")}, ttl: time.Minute})
	for _, c := range []struct {
		name string
		pkt  []byte
	}{{"response1200", full}, {"spam4", spamResponse(make([]byte, 300))}} {
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(int64(len(c.pkt)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := parse(n, c.pkt, time.Minute); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
