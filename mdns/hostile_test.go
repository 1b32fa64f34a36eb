package mdns

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"
	"golang.org/x/net/ipv4"
)

// A flood of queries, garbage, oversized packets, packets announcing too many records and
// responses full of new instances: the victim's memory and instance table stay bounded, its
// responses stay at one per second, and a legitimate peer that starts mid-flood is found.
func TestHostileFlood(t *testing.T) { inNetns(t, "TestInnerHostileFlood") }

func TestInnerHostileFlood(t *testing.T) {
	inner(t)
	lo, err := net.InterfaceByName("lo")
	if err != nil {
		t.Fatal(err)
	}
	// The sniffer counts the victim's responses on the wire.
	sniff := listenGroup(t, lo)
	var victimSends atomic.Int64
	var wg sync.WaitGroup
	defer wg.Wait()
	defer sniff.Close()
	snifferNames := testNames("sniffer")
	wg.Go(func() {
		buf := make([]byte, maxPacket+1)
		for {
			n, _, _, err := sniff.ReadFrom(buf)
			if err != nil {
				return
			}
			if p, err := parse(snifferNames, buf[:n], 0); err == nil {
				for _, in := range p.instances {
					if in.label == "victim" && !in.goodbye {
						victimSends.Add(1)
					}
				}
			}
		}
	})

	legitFound := make(chan Found, 1)
	var foundAt atomic.Pointer[time.Time]
	victim := start(t, Config{Instance: "victim", MaxInstances: 256, OnFound: func(f Found) {
		if f.Instance == "legit" {
			now := time.Now()
			foundAt.CompareAndSwap(nil, &now)
			select {
			case legitFound <- f:
			default:
			}
		}
	}})
	time.Sleep(100 * time.Millisecond)
	var before runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)

	// The attacker speaks from port 5353, as anyone on the link can.
	atk := listenGroup(t, lo)
	defer atk.Close()
	group := net.UDPAddrFromAddrPort(group4)
	query, _ := buildQuery(testNames("attacker"), nil)
	garbage := make([]byte, 600) // a header with small counts, then noise: parsed, and rejected
	oversized := make([]byte, maxPacket+500)
	tooMany := make([]byte, 12)
	tooMany[7] = maxRecords + 1
	big := make([]byte, MaxPayload)
	rand.Read(big)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Second)
	defer cancel()
	floodStart := time.Now()
	var sent int
	var legitAt time.Time

	for i := 0; ctx.Err() == nil; i++ {
		var b []byte
		switch i % 5 {
		case 0:
			b = query
		case 1:
			rand.Read(garbage)
			copy(garbage[4:], []byte{0, 1, 0, 2, 0, 0, 0, 1})
			b = garbage
		case 2:
			b = oversized
		case 3:
			b = tooMany
		case 4:
			b = spamResponse(big)
		}
		if _, err := atk.WriteTo(b, nil, group); err == nil {
			sent++
		}
		if i%50 == 0 {
			time.Sleep(time.Millisecond) // leave the two cores some air
		}
		if legitAt.IsZero() && time.Since(floodStart) > time.Second {
			legitAt = time.Now()
			start(t, Config{Instance: "legit", Payload: []byte("the real one")})
		}
	}
	flood := time.Since(floodStart)
	var f Found
	select {
	case f = <-legitFound:
	case <-time.After(3 * time.Second):
		t.Fatalf("legitimate peer not found during the flood; stats %+v", victim.Stats())
	}
	if foundAt.Load().After(floodStart.Add(flood)) {
		t.Errorf("legitimate peer found only after the flood")
	}
	if string(f.Payload) != "the real one" {
		t.Fatalf("legit found with %q", f.Payload)
	}
	var after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&after)
	st := victim.Stats()
	t.Logf("sent %d packets in %v; victim sent %d responses; legit found %v after it started; heap %d -> %d KB; stats %+v",
		sent, flood, victimSends.Load(), foundAt.Load().Sub(legitAt), before.HeapAlloc>>10, after.HeapAlloc>>10, st)
	if st.Instances > 256 || st.Evicted == 0 {
		t.Errorf("instances %d, evicted %d", st.Instances, st.Evicted)
	}
	if st.Malformed == 0 || st.Oversized == 0 || st.TooManyRecords == 0 || st.QueriesForUs == 0 {
		t.Errorf("drops not counted: %+v", st)
	}
	// One response per second of flood, plus the start-up announcements and slack.
	if limit := int64(flood/time.Second) + 4; victimSends.Load() > limit {
		t.Errorf("victim sent %d responses in %v of query flood, more than %d", victimSends.Load(), flood, limit)
	}
	if grew := int64(after.HeapAlloc) - int64(before.HeapAlloc); grew > 8<<20 {
		t.Errorf("heap grew %d KB", grew>>10)
	}
}

// listenGroup opens a socket on port 5353 joined to the IPv4 group on ifi, sending there.
func listenGroup(t *testing.T, ifi *net.Interface) *ipv4.PacketConn {
	t.Helper()
	lc := net.ListenConfig{Control: reusePort}
	c, err := lc.ListenPacket(context.Background(), "udp4", "0.0.0.0:5353")
	if err != nil {
		t.Fatal(err)
	}
	p := ipv4.NewPacketConn(c)
	if err := firstErr(p.JoinGroup(ifi, net.UDPAddrFromAddrPort(group4)), p.SetMulticastInterface(ifi), p.SetMulticastLoopback(true)); err != nil {
		t.Fatal(err)
	}
	return p
}

// spamResponse is a response describing maxInstancesPerPacket new random instances, each
// with the largest payload allowed.
func spamResponse(payload []byte) []byte {
	m := &dns.Msg{MsgHdr: dns.MsgHdr{Response: true}, Compress: true}
	for range maxInstancesPerPacket {
		var r [6]byte
		rand.Read(r[:])
		inst := "spam" + hex.EncodeToString(r[:]) + "._tendril._udp.local."
		h := func(name string, t uint16) dns.RR_Header {
			return dns.RR_Header{Name: name, Rrtype: t, Class: dns.ClassINET, Ttl: 120}
		}
		m.Answer = append(m.Answer,
			&dns.SRV{Hdr: h(inst, dns.TypeSRV), Port: 1, Target: "h.local."},
			&dns.TXT{Hdr: h(inst, dns.TypeTXT), Txt: splitTXT(payload[:300])})
	}
	b, err := m.Pack()
	if err != nil {
		panic(err)
	}
	return b
}
