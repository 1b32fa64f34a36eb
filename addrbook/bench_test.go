package addrbook

import (
	"bytes"
	"fmt"
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

// fullWithRecords is full with each peer's address given by its signed record, so that
// the book holds MaxPeers records too. Each record lists extra more addresses than the
// one the book takes (AddRecordAddrs), which makes it larger, as a record of a node
// listening on many addresses is.
func fullWithRecords(tb testing.TB, extra int) *Book {
	b := newBook(tb, nil)
	for i := 0; ; i++ {
		if _, peers := b.Len(); peers >= b.Config().MaxPeers || i > 100_000 {
			break
		}
		a := ip4(11+i%150, (i/150)%250, i%7, 1)
		addrs := []ma.Multiaddr{a}
		for j := range extra {
			addrs = append(addrs, addr(fmt.Sprintf("/dns/n%08d-%02d.example-node-name.com/tcp/4001/wss", i, j)))
		}
		r := record(tb, keyN(tb, i), 1, addrs...)
		b.AddRecordAddrs(t0, r, addrs[:1], FromPeer(Group(rune('a'+i%26))))
		if i%10 == 0 {
			b.Good(t0, r.Peer(), a)
		}
	}
	return b
}

// BenchmarkMemoryRecords is BenchmarkMemory with a signed record held for every peer: the
// heap per 1,000 addresses at the peer cap, records included. "1addr" records list the one
// address (about 110 bytes), "max" records are near peerrecord.MaxSize (the worst a peer
// can make the book hold).
func BenchmarkMemoryRecords(bm *testing.B) {
	for _, c := range []struct {
		name  string
		extra int
	}{{"1addr", 0}, {"max", 15}} {
		bm.Run(c.name, func(bm *testing.B) {
			var book *Book
			var used uint64
			for bm.Loop() {
				var before, after runtime.MemStats
				runtime.GC()
				runtime.ReadMemStats(&before)
				book = fullWithRecords(bm, c.extra)
				runtime.GC()
				runtime.ReadMemStats(&after)
				used = after.HeapAlloc - before.HeapAlloc
			}
			n, peers := book.Len()
			size := 0
			for _, r := range book.SampleRecords(t0, 1, SampleOptions{}) {
				size = len(r.Bytes())
			}
			bm.ReportMetric(float64(used)/float64(n)*1000, "B/1000addrs")
			bm.ReportMetric(float64(n), "addrs")
			bm.ReportMetric(float64(peers), "records")
			bm.ReportMetric(float64(size), "B/record")
		})
	}
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
