package mdns

import (
	"bytes"
	"errors"
	"testing"

	"github.com/miekg/dns"
)

func TestTXTRoundTripEveryByte(t *testing.T) {
	all := make([]byte, 256)
	for i := range all {
		all[i] = byte(i)
	}
	for _, n := range []int{0, 1, 254, 255, 256, 511, MaxPayload} {
		p := bytes.Repeat(all, 5)[:n]
		txt := splitTXT(p)
		// Through miekg/dns and back, as on the wire.
		rr := &dns.TXT{Hdr: dns.RR_Header{Name: "a.local.", Rrtype: dns.TypeTXT, Class: dns.ClassINET}, Txt: txt}
		m := &dns.Msg{Answer: []dns.RR{rr}}
		b, err := m.Pack()
		if err != nil {
			t.Fatalf("n=%d: pack: %v", n, err)
		}
		var back dns.Msg
		if err := back.Unpack(b); err != nil {
			t.Fatalf("n=%d: unpack: %v", n, err)
		}
		got, ok := joinTXT(back.Answer[0].(*dns.TXT).Txt)
		if !ok || !bytes.Equal(got, p) {
			t.Fatalf("n=%d: round trip gave %d bytes, ok=%v", n, len(got), ok)
		}
		for _, s := range back.Answer[0].(*dns.TXT).Txt {
			if len(s) == 0 && n > 0 {
				t.Fatalf("n=%d: empty string in a non-empty payload", n)
			}
		}
	}
}

func TestJoinTXTBounds(t *testing.T) {
	big := make([]string, 10)
	for i := range big {
		big[i] = string(bytes.Repeat([]byte{'x'}, 200))
	}
	if _, ok := joinTXT(big); ok {
		t.Fatal("joinTXT accepted 2,000 bytes")
	}
	if _, ok := joinTXT([]string{`\999`}); ok {
		t.Fatal(`joinTXT accepted \999`)
	}
	if got, ok := joinTXT([]string{`a\"b\\`, `\000`}); !ok || string(got) != "a\"b\\\x00" {
		t.Fatalf("joinTXT = %q, %v", got, ok)
	}
	if err := checkPayload(make([]byte, MaxPayload+1)); !errors.Is(err, ErrPayloadTooLarge) {
		t.Fatalf("checkPayload(1201) = %v", err)
	}
	if err := checkPayload(make([]byte, MaxPayload)); err != nil {
		t.Fatalf("checkPayload(1200) = %v", err)
	}
}
