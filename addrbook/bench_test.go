package addrbook

import (
	"bytes"
	"runtime"
	"testing"

	ma "github.com/multiformats/go-multiaddr"
)

// full returns a book filled to MaxPeers with one address per peer, a tenth of them
// tried, across many /16s.
func full(tb testing.TB) *Book {
	b := newBook(tb, nil)
	for i := 0; ; i++ {
		if _, peers := b.Len(); peers >= b.Config().MaxPeers || i > 100_000 {
			break
		}
		p, a := peerN(i), ip4(11+i%150, (i/150)%250, i%7, 1)
		b.Add(t0, p, []ma.Multiaddr{a}, FromPeer(Group(rune('a'+i%26))))
		if i%10 == 0 {
			b.Good(t0, p, a)
		}
	}
	return b
}

// BenchmarkMemory reports the heap a book holds at its peer cap, per 1,000 addresses
// (the tables are allocated up front and counted too).
func BenchmarkMemory(bm *testing.B) {
	var book *Book
	var used uint64
	for bm.Loop() {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		book = full(bm)
		runtime.GC()
		runtime.ReadMemStats(&after)
		used = after.HeapAlloc - before.HeapAlloc
	}
	n, _ := book.Len()
	bm.ReportMetric(float64(used)/float64(n)*1000, "B/1000addrs")
	bm.ReportMetric(float64(n), "addrs")
}

func BenchmarkAdd(bm *testing.B) {
	book := full(bm)
	src := FromPeer("ip4:9.9.0.0/16")
	bm.ReportAllocs()
	i := 0
	for bm.Loop() {
		book.Add(t0, peerN(1_000_000+i), []ma.Multiaddr{ip4(11+i%150, i%250, 9, 9)}, src)
		i++
	}
}

func BenchmarkSelect(bm *testing.B) {
	book := full(bm)
	bm.ReportAllocs()
	for bm.Loop() {
		book.Select(t0, 8, nil)
	}
}

func BenchmarkSample(bm *testing.B) {
	book := full(bm)
	bm.ReportAllocs()
	for bm.Loop() {
		book.Sample(t0, 256, SampleOptions{OmitLocal: true})
	}
}

func BenchmarkLoad(bm *testing.B) {
	var buf bytes.Buffer
	if err := full(bm).Save(&buf, t0); err != nil {
		bm.Fatal(err)
	}
	bm.SetBytes(int64(buf.Len()))
	bm.ReportAllocs()
	for bm.Loop() {
		if _, err := newBook(bm, nil).Load(bytes.NewReader(buf.Bytes()), t0); err != nil {
			bm.Fatal(err)
		}
	}
}
