package mdns

import (
	"fmt"
	"net/netip"
	"testing"
	"time"
)

func TestTableReportsNewChangedAndRefresh(t *testing.T) {
	tb := newTable(4, 120*time.Second, 60*time.Second)
	in := parsedInstance{label: "Peer", payload: []byte("p1"), port: 1, addrs: []netip.Addr{netip.MustParseAddr("10.0.0.1")}}
	if !tb.observe(t0, in) {
		t.Fatal("new instance not reported")
	}
	if tb.observe(t0.Add(time.Second), in) {
		t.Fatal("unchanged instance reported again")
	}
	in.addrs = []netip.Addr{netip.MustParseAddr("10.0.0.1")} // same set, new slice
	if tb.observe(t0.Add(2*time.Second), in) {
		t.Fatal("same addresses reported as a change")
	}
	in.payload = []byte("p2")
	if !tb.observe(t0.Add(3*time.Second), in) {
		t.Fatal("payload change not reported")
	}
	in.label = "PEER" // labels compare case-insensitively
	if tb.observe(t0.Add(4*time.Second), in) {
		t.Fatal("case change reported")
	}
	if !tb.observe(t0.Add(64*time.Second), in) {
		t.Fatal("not reported again after the refresh interval")
	}
	if tb.observe(t0.Add(65*time.Second), parsedInstance{label: "peer", goodbye: true}) || len(tb.entries) != 0 {
		t.Fatal("goodbye did not forget")
	}
	if !tb.observe(t0.Add(66*time.Second), in) {
		t.Fatal("return after goodbye not reported")
	}
	tb.expire(t0.Add(66*time.Second + 119*time.Second))
	if len(tb.entries) != 1 {
		t.Fatal("expired early")
	}
	tb.expire(t0.Add(66*time.Second + 120*time.Second))
	if len(tb.entries) != 0 {
		t.Fatal("not expired after TTL")
	}
}

func TestTableIsBounded(t *testing.T) {
	tb := newTable(4, 120*time.Second, 60*time.Second)
	tb.observe(t0, parsedInstance{label: "legit"})
	for i := range 1000 {
		now := t0.Add(time.Duration(i+1) * time.Millisecond)
		if i%100 == 0 { // the legitimate peer keeps answering
			tb.observe(now, parsedInstance{label: "legit"})
		}
		tb.observe(now, parsedInstance{label: fmt.Sprintf("spam%d", i)})
		if len(tb.entries) > 4 {
			t.Fatalf("%d entries", len(tb.entries))
		}
	}
	if tb.evicted == 0 {
		t.Fatal("nothing evicted")
	}
	// An evicted instance is reported again when seen: it is never lost for good.
	if !tb.observe(t0.Add(2*time.Second), parsedInstance{label: "legit"}) {
		t.Fatal("legit instance not reported after eviction")
	}
}

func TestTableKnownAnswers(t *testing.T) {
	n := testNames("me")
	tb := newTable(8, 120*time.Second, 60*time.Second)
	tb.observe(t0, parsedInstance{label: "old"})
	tb.observe(t0.Add(50*time.Second), parsedInstance{label: "new"})
	k := tb.known(t0.Add(70*time.Second), n, 8)
	if len(k) != 1 || k[0].instance != "new."+n.service || k[0].ttl != 100*time.Second {
		t.Fatalf("known = %+v", k)
	}
	tb.observe(t0.Add(60*time.Second), parsedInstance{label: "third"})
	if k := tb.known(t0.Add(61*time.Second), n, 1); len(k) != 1 || k[0].instance != "third."+n.service {
		t.Fatalf("limited known = %+v", k)
	}
}
