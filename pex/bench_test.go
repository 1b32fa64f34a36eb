package pex

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/tendril-p2p/tendril/addrbook"
	"github.com/tendril-p2p/tendril/protocol"
	"github.com/tendril-p2p/tendril/transport/memory"
)

// hostileAnswers are the answers a peer can send, by what they cost the receiver.
func hostileAnswers(b *testing.B) map[string][]byte {
	forged := make([][]byte, 32)
	valid := make([][]byte, 32)
	for i := range forged {
		r := newRecord(b, nil, fmt.Sprintf("/ip4/%d.1.1.1/tcp/1", 11+i))
		valid[i] = r.Bytes()
		f := []byte(string(r.Bytes()))
		f[len(f)-1] ^= 1 // well formed: the signature check runs, and fails
		forged[i] = f
	}
	over := make([][]byte, 33)
	for i := range over {
		over[i] = valid[0]
	}
	return map[string][]byte{
		"forged32":   frame(forged...),
		"valid32":    frame(valid...),
		"count33":    frame(over...),
		"oversize1M": frame(make([]byte, 1<<20)),
	}
}

// BenchmarkReceive measures what one hostile answer costs the receiver once the root
// package has read it: the checks, the parses and the book. ns/op divided by the bytes
// (SetBytes) is the CPU per attacker byte.
func BenchmarkReceive(b *testing.B) {
	net := memory.NewNetwork(memory.NetworkConfig{})
	v := newNode(b, net, manual)
	peer := peerN(1)
	remote := v.addr.Transport
	for name, ans := range hostileAnswers(b) {
		b.Run(name, func(b *testing.B) {
			b.SetBytes(int64(len(ans)))
			b.ReportAllocs()
			for b.Loop() {
				v.pex.receive(peer, remote, ans)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(len(ans)), "ns/byte")
		})
	}
}

// BenchmarkHostileAnswerEndToEnd measures a hostile answer over the in-memory transport:
// the request, the root package reading the reply (decryption included; an answer above
// MaxAnswerBytes is refused by the protocol's MaxMessageSize as its length arrives), and
// receive.
// Both ends run in this process, so the CPU is both ends'.
func BenchmarkHostileAnswerEndToEnd(b *testing.B) {
	answers := hostileAnswers(b)
	for _, name := range []string{"forged32", "oversize1M"} {
		b.Run(name, func(b *testing.B) {
			net := memory.NewNetwork(memory.NetworkConfig{})
			ans := answers[name]
			h := newHostile(b, net, func(int) []byte { return ans })
			v := newNode(b, net, manual)
			s := dial(b, v.svc, h.addr)
			b.SetBytes(int64(len(ans)))
			for b.Loop() {
				reply, err := s.Request(context.Background(), Protocol, appendRequest(nil, 32))
				if errors.Is(err, protocol.ErrMessageTooLarge) {
					continue // refused by the protocol's MaxMessageSize as it arrived
				}
				if err != nil {
					b.Fatal(err)
				}
				v.pex.receive(s.Peer(), s.RemoteAddr().Transport, reply)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(len(ans)), "ns/byte")
		})
	}
}

// BenchmarkServe compares a refused request (the rate limit, all it costs) with an
// answer from a full book (sample and encoding).
func BenchmarkServe(b *testing.B) {
	c := DefaultConfig()
	b.Run("refused", func(b *testing.B) {
		s := newServeLimiter(t0, &c)
		p := peerN(1)
		s.allow(t0, p)
		s.allow(t0, p)
		b.ReportAllocs()
		for b.Loop() {
			if s.allow(t0, p) {
				b.Fatal("allowed")
			}
		}
	})
	b.Run("answered", func(b *testing.B) {
		book := newBook(b)
		now := time.Now()
		for i := range 4096 {
			rec := newRecord(b, nil, fmt.Sprintf("/ip4/%d.%d.%d.1/tcp/4001", 11+i%150, (i/150)%250, i%7))
			book.AddRecord(now, rec, addrbook.FromPeer(addrbook.Group(rune('a'+i%26))))
		}
		_, peers := book.Len()
		b.ReportAllocs()
		for b.Loop() {
			appendAnswer(nil, book.SampleRecords(now, 33, addrbook.SampleOptions{OmitLocal: true}), peerN(1), 32, c.MaxAnswerBytes)
		}
		b.ReportMetric(float64(peers), "records")
	})
}
