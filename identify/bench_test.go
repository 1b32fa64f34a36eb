package identify

import (
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/tendril-p2p/tendril"
	"github.com/tendril-p2p/tendril/transport/memory"
)

// BenchmarkFlood measures what a peer flooding identify updates (1,000 a second for 3 s,
// each a valid message with a freshly signed, newer record, signed before the clock
// starts) costs in CPU per attacker byte, side by side:
//
//   - discard: the victim serves "/tendril/identify" with a handler that drops every
//     message: the Service's own cost (both ends, as both run in this process).
//   - identify: identify with its default rate limit, the cut-off (MaxDropped) disabled
//     so that every message goes through the rate check, as it would for an attacker
//     that ignores the stream's close.
//   - unlimited: identify with no effective rate limit: every message parsed and its
//     record verified; what the limit saves.
//
// Run: go test -run XXX -bench Flood -benchtime 1x ./identify/
// cpu-ns/B is the process's CPU time (user+system) over the flood divided by the bytes
// of the messages the attacker sent; verifies/op the victim's signature verifications.
func BenchmarkFlood(b *testing.B) {
	cases := []struct {
		name string
		cfg  *Config // nil: the discarding handler
	}{
		{"discard", nil},
		{"identify", &Config{MaxDropped: 1 << 30}},
		{"unlimited", &Config{MaxDropped: 1 << 30, UpdateBurst: 1 << 30}},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			var cpu time.Duration
			var bytes, verifies uint64
			for range b.N {
				d, n, v := flood(b, c.cfg, 1000, 3*time.Second)
				cpu += d
				bytes += n
				verifies += v
			}
			b.ReportMetric(float64(cpu.Nanoseconds())/float64(bytes), "cpu-ns/B")
			b.ReportMetric(float64(verifies)/float64(b.N), "verifies/op")
			b.ReportMetric(float64(bytes)/float64(b.N), "attacker-B/op")
		})
	}
}

// flood runs one flood against a fresh victim and returns the process CPU time it took,
// the bytes sent and the victim's verifications.
func flood(b *testing.B, cfg *Config, perSecond int, d time.Duration) (time.Duration, uint64, uint64) {
	network := memory.NewNetwork(memory.NetworkConfig{})
	var received atomic.Uint64
	var victim *node
	var id *identified
	if cfg == nil {
		victim = newNode(b, network, tendril.Protocol{Name: ProtocolName, Versions: []string{ProtocolVersion},
			Handler: tendril.HandlerFuncs{OnReceived: func(*tendril.Context, []byte) { received.Add(1) }}})
	} else {
		id = newIdentified(b, network, *cfg)
		victim = id.node
	}
	a := newAttacker(b, network)
	_, stream := a.attack(b, victim)
	total := perSecond * int(d/time.Second)
	msgs := make([][]byte, total)
	var bytes uint64
	for k := range msgs {
		msgs[k] = update(b, a.key, uint64(k+1))
		bytes += uint64(len(msgs[k]))
	}
	base := received.Load()
	if id != nil {
		base = id.id.Stats().Received
	}
	got := func() uint64 {
		if id != nil {
			return id.id.Stats().Received - base
		}
		return received.Load() - base
	}
	before := cpuTime()
	start := time.Now()
	const batch = 10
	tick := time.NewTicker(time.Second * batch / time.Duration(perSecond))
	for k := 0; k < total; k += batch {
		for _, m := range msgs[k:min(k+batch, total)] {
			if err := stream.Send(m); err != nil {
				b.Fatal(err)
			}
		}
		<-tick.C
	}
	tick.Stop()
	for got() < uint64(total) {
		if time.Since(start) > d+10*time.Second {
			b.Fatalf("victim received %d of %d", got(), total)
		}
		time.Sleep(time.Millisecond)
	}
	used := cpuTime() - before
	var v uint64
	if id != nil {
		v = id.id.Stats().Verified
	}
	return used, bytes, v
}

// cpuTime returns the process's user and system CPU time.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
