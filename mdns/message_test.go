package mdns

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/miekg/dns"
)

func testNames(instance string) names {
	return newNames(Config{Instance: instance}.withDefaults())
}

func TestResponseParsesBack(t *testing.T) {
	a, b := testNames("alice"), testNames("bob")
	payload := bytes.Repeat([]byte{0, 1, 2, '\\', '"', 255}, 200)
	addrs := []netip.Addr{netip.MustParseAddr("192.0.2.7"), netip.MustParseAddr("fe80::1%eth0"), netip.MustParseAddr("2001:db8::1")}
	pkt, err := buildResponse(a, announcement{port: 4242, payload: payload, addrs: addrs, ttl: 120 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if len(pkt) > 1500-48 {
		t.Errorf("a response with a 1,200-byte payload is %d bytes: more than one frame", len(pkt))
	}
	p, err := parse(b, pkt, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if p.query || len(p.instances) != 1 {
		t.Fatalf("parse = %+v", p)
	}
	in := p.instances[0]
	want := []netip.Addr{addrs[0], netip.MustParseAddr("fe80::1"), addrs[2]}
	if in.label != "alice" || in.port != 4242 || !bytes.Equal(in.payload, payload) || !sameAddrs(in.addrs, want) || in.goodbye {
		t.Fatalf("instance = %+v", in)
	}
	// Our own response, looped back, is not an instance.
	if p, _ := parse(a, pkt, time.Minute); len(p.instances) != 0 {
		t.Fatalf("own response parsed as %+v", p.instances)
	}
	// A goodbye.
	pkt, _ = buildResponse(a, announcement{port: 1, ttl: 0})
	if p, _ := parse(b, pkt, time.Minute); len(p.instances) != 1 || !p.instances[0].goodbye {
		t.Fatalf("goodbye parsed as %+v", p.instances)
	}
	// An empty payload stays empty.
	pkt, _ = buildResponse(a, announcement{port: 1, ttl: time.Minute})
	if p, _ := parse(b, pkt, time.Minute); len(p.instances) != 1 || p.instances[0].payload != nil {
		t.Fatalf("empty payload parsed as %+v", p.instances)
	}
}

func TestQueryAndKnownAnswers(t *testing.T) {
	a, b := testNames("alice"), testNames("bob")
	q, err := buildQuery(a, []knownAnswer{{a.instance, 120 * time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	if p, _ := parse(b, q, time.Minute); !p.query {
		t.Fatal("bob does not answer alice's query")
	}
	if p, _ := parse(a, q, time.Minute); p.query {
		t.Fatal("alice answers her own query (it lists her as a known answer)")
	}
	// A known answer with less than half its TTL left does not suppress (RFC 6762 7.1).
	q, _ = buildQuery(a, []knownAnswer{{b.instance, 30 * time.Second}})
	if p, _ := parse(b, q, time.Minute); !p.query {
		t.Fatal("a stale known answer suppressed bob's answer")
	}
	// Another service's query is not for us.
	other := newNames(Config{ServiceName: "_other._tcp", Instance: "x"}.withDefaults())
	q, _ = buildQuery(other, nil)
	if p, _ := parse(b, q, time.Minute); p.query {
		t.Fatal("bob answers a query for another service")
	}
	// Direct questions for the instance and the host.
	for _, qq := range []dns.Question{{Name: "BOB._tendril._udp.local.", Qtype: dns.TypeTXT}, {Name: "bob.local.", Qtype: dns.TypeA}} {
		m := &dns.Msg{Question: []dns.Question{qq}}
		pkt, _ := m.Pack()
		if p, _ := parse(b, pkt, time.Minute); !p.query {
			t.Fatalf("bob does not answer %v", qq)
		}
	}
}

func TestParseRejects(t *testing.T) {
	b := testNames("bob")
	if _, err := parse(b, make([]byte, maxPacket+1), 0); !errors.Is(err, errTooLarge) {
		t.Fatalf("oversized: %v", err)
	}
	if _, err := parse(b, []byte{1, 2, 3}, 0); !errors.Is(err, errMalformed) {
		t.Fatalf("short: %v", err)
	}
	hdr := make([]byte, 12)
	binary.BigEndian.PutUint16(hdr[6:], maxRecords+1)
	if _, err := parse(b, hdr, 0); !errors.Is(err, errTooManyRecords) {
		t.Fatalf("too many records: %v", err)
	}
	binary.BigEndian.PutUint16(hdr[6:], 3)
	if _, err := parse(b, append(hdr, 7), 0); !errors.Is(err, errMalformed) {
		t.Fatalf("records missing: %v", err)
	}
	// A non-zero opcode is ignored, not an error.
	a := testNames("alice")
	pkt, _ := buildResponse(a, announcement{port: 1, ttl: time.Minute})
	pkt[2] |= 2 << 3
	if p, err := parse(b, pkt, 0); err != nil || len(p.instances) != 0 {
		t.Fatalf("opcode 2: %+v %v", p, err)
	}
}

// manyInstances packs one response describing n instances completely.
func manyInstances(n int, prefix string) []byte {
	m := &dns.Msg{MsgHdr: dns.MsgHdr{Response: true}, Compress: true}
	for i := range n {
		inst := fmt.Sprintf("%s%d._tendril._udp.local.", prefix, i)
		h := func(name string, t uint16) dns.RR_Header {
			return dns.RR_Header{Name: name, Rrtype: t, Class: dns.ClassINET, Ttl: 120}
		}
		m.Answer = append(m.Answer,
			&dns.SRV{Hdr: h(inst, dns.TypeSRV), Port: 1, Target: "h.local."},
			&dns.TXT{Hdr: h(inst, dns.TypeTXT), Txt: []string{"x"}})
	}
	b, err := m.Pack()
	if err != nil {
		panic(err)
	}
	return b
}

func TestParseBoundsInstancesAndLabels(t *testing.T) {
	b := testNames("bob")
	p, err := parse(b, manyInstances(20, "i"), 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.instances) != maxInstancesPerPacket || p.skipped == 0 {
		t.Fatalf("%d instances, %d skipped", len(p.instances), p.skipped)
	}
	// Labels outside the alphabet (here an escaped dot) are not ours to parse.
	m := &dns.Msg{MsgHdr: dns.MsgHdr{Response: true}}
	h := func(name string, t uint16) dns.RR_Header {
		return dns.RR_Header{Name: name, Rrtype: t, Class: dns.ClassINET, Ttl: 120}
	}
	m.Answer = []dns.RR{
		&dns.SRV{Hdr: h(`a\.b._tendril._udp.local.`, dns.TypeSRV), Target: "h.local."},
		&dns.TXT{Hdr: h(`a\.b._tendril._udp.local.`, dns.TypeTXT), Txt: []string{"x"}},
	}
	pkt, err := m.Pack()
	if err != nil {
		t.Fatal(err)
	}
	if p, _ := parse(b, pkt, 0); len(p.instances) != 0 {
		t.Fatalf("escaped label accepted: %+v", p.instances)
	}
}

func FuzzParse(f *testing.F) {
	a, b := testNames("alice"), testNames("bob")
	r, _ := buildResponse(a, announcement{port: 9, payload: []byte("hello\x00"), addrs: []netip.Addr{netip.MustParseAddr("10.0.0.1")}, ttl: time.Minute})
	q, _ := buildQuery(a, []knownAnswer{{b.instance, time.Minute}})
	f.Add(r)
	f.Add(q)
	f.Add(manyInstances(5, "z"))
	f.Fuzz(func(t *testing.T, pkt []byte) {
		p, err := parse(b, pkt, time.Minute)
		if err != nil {
			return
		}
		if len(p.instances) > maxInstancesPerPacket {
			t.Fatalf("%d instances", len(p.instances))
		}
		for _, in := range p.instances {
			if !validLabel(in.label) || len(in.payload) > MaxPayload || len(in.addrs) > maxAddrsPerInstance || in.label == "bob" {
				t.Fatalf("bad instance %+v", in)
			}
		}
	})
}
