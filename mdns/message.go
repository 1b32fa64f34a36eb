package mdns

import (
	"encoding/binary"
	"net/netip"
	"strings"
	"time"

	"github.com/miekg/dns"
)

// Wire bounds on what a peer's packet can make this package parse and hold.
const (
	// maxPacket is the largest datagram read (RFC 6762 section 17 allows up to 9,000 bytes);
	// a longer one arrives truncated and is dropped.
	maxPacket = 9000
	// maxRecords caps questions plus records a packet may announce in its header. The
	// header is checked before parsing, so a packet costs at most this many record parses
	// (miekg/dns parses exactly the counts given, and no more).
	maxRecords = 64
	// maxInstancesPerPacket caps the instances one response may report: a genuine
	// responder sends its own, one per packet.
	maxInstancesPerPacket = 4
	// maxAddrsPerInstance caps the addresses reported for one instance.
	maxAddrsPerInstance = 8
	// maxKnownAnswers caps the known answers this Service puts in a query (RFC 6762 7.1).
	maxKnownAnswers = 32
)

// cacheFlush is the top bit of an mDNS record's class: the record is unique to its owner,
// and receivers replace what they cached (RFC 6762 section 10.2).
const cacheFlush = 1 << 15

// names holds the fully qualified, lower-cased names a Service answers for.
type names struct {
	service  string // "_tendril._udp.local."
	instance string // "<label>._tendril._udp.local."
	host     string // "<label>.local."
	label    string // the instance label as configured
}

func newNames(c Config) names {
	svc := strings.ToLower(c.ServiceName + "." + c.Domain + ".")
	return names{
		service:  svc,
		instance: strings.ToLower(c.Instance) + "." + svc,
		host:     strings.ToLower(c.Instance + "." + c.Domain + "."),
		label:    c.Instance,
	}
}

// announcement is what a Service says about itself on one link.
type announcement struct {
	port    uint16
	payload []byte
	addrs   []netip.Addr // the interface's addresses, both families (RFC 6762 section 6.2)
	ttl     time.Duration
}

// buildResponse packs the full answer about ourselves: the PTR in the answer section and
// SRV, TXT, A and AAAA as additional records, so one packet is enough to be found. A zero
// ttl makes it a goodbye (RFC 6762 section 10.1).
func buildResponse(n names, a announcement) ([]byte, error) {
	ttl := uint32(a.ttl / time.Second)
	hdr := func(name string, t uint16, flush bool) dns.RR_Header {
		class := uint16(dns.ClassINET)
		if flush {
			class |= cacheFlush
		}
		return dns.RR_Header{Name: name, Rrtype: t, Class: class, Ttl: ttl}
	}
	m := &dns.Msg{MsgHdr: dns.MsgHdr{Response: true, Authoritative: true}, Compress: true}
	m.Answer = []dns.RR{&dns.PTR{Hdr: hdr(n.service, dns.TypePTR, false), Ptr: n.instance}}
	m.Extra = []dns.RR{
		&dns.SRV{Hdr: hdr(n.instance, dns.TypeSRV, true), Port: a.port, Target: n.host},
		&dns.TXT{Hdr: hdr(n.instance, dns.TypeTXT, true), Txt: splitTXT(a.payload)},
	}
	for i, ad := range a.addrs {
		if i == maxAddrsPerInstance {
			break
		}
		if ad.Is4() || ad.Is4In6() {
			m.Extra = append(m.Extra, &dns.A{Hdr: hdr(n.host, dns.TypeA, true), A: ad.Unmap().AsSlice()})
		} else {
			m.Extra = append(m.Extra, &dns.AAAA{Hdr: hdr(n.host, dns.TypeAAAA, true), AAAA: ad.WithZone("").AsSlice()})
		}
	}
	return m.Pack()
}

// knownAnswer is a PTR this Service already holds, sent with a query so its owner need not
// answer (RFC 6762 section 7.1).
type knownAnswer struct {
	instance string // fully qualified
	ttl      time.Duration
}

// buildQuery packs a PTR query for the service with known answers. This Service always
// lists itself first, so it never answers its own query when it loops back.
func buildQuery(n names, known []knownAnswer) ([]byte, error) {
	m := &dns.Msg{Compress: true}
	m.Question = []dns.Question{{Name: n.service, Qtype: dns.TypePTR, Qclass: dns.ClassINET}}
	for i, k := range known {
		if i == maxKnownAnswers {
			break
		}
		m.Answer = append(m.Answer, &dns.PTR{
			Hdr: dns.RR_Header{Name: n.service, Rrtype: dns.TypePTR, Class: dns.ClassINET, Ttl: uint32(k.ttl / time.Second)},
			Ptr: k.instance,
		})
	}
	return m.Pack()
}

// packet is what parse learned from one datagram.
type packet struct {
	query     bool             // a query that asks for us (and does not already know our answer)
	instances []parsedInstance // from a response: at most maxInstancesPerPacket
	skipped   int              // instances or records ignored as incomplete, foreign or over a bound
}

// parsedInstance is one instance described in a response.
type parsedInstance struct {
	label   string
	payload []byte
	port    int
	addrs   []netip.Addr // from A and AAAA records, at most maxAddrsPerInstance
	goodbye bool         // its TTL was zero
}

// parse decodes one datagram. Every byte is hostile: the size and record count are checked
// before miekg/dns sees the packet, names are compared only in the restricted alphabet
// that validLabel accepts, and everything kept is bounded. The error is one of the
// sentinels errTooLarge, errTooManyRecords or errMalformed; a packet that parses but is
// not for us (another service, a non-zero opcode or rcode) returns a zero packet and nil.
func parse(n names, b []byte, minKnownTTL time.Duration) (packet, error) {
	var p packet
	if len(b) > maxPacket {
		return p, errTooLarge
	}
	if len(b) < 12 {
		return p, errMalformed
	}
	total := 0
	for i := 4; i < 12; i += 2 {
		total += int(binary.BigEndian.Uint16(b[i:]))
	}
	if total > maxRecords {
		return p, errTooManyRecords
	}
	var m dns.Msg
	if err := m.Unpack(b); err != nil {
		return p, errMalformed
	}
	// RFC 6762 section 18.3 and 18.11: other opcodes and rcodes are silently ignored.
	if m.Opcode != dns.OpcodeQuery || m.Rcode != dns.RcodeSuccess {
		return p, nil
	}
	if !m.Response {
		p.query = asksForUs(n, &m, minKnownTTL)
		return p, nil
	}
	p.instances, p.skipped = instancesOf(n, &m)
	return p, nil
}

// asksForUs reports whether a query asks for one of our records and does not list our PTR
// as a known answer with at least minKnownTTL left.
func asksForUs(n names, m *dns.Msg, minKnownTTL time.Duration) bool {
	asked := false
	for _, q := range m.Question {
		name := strings.ToLower(q.Name)
		t := q.Qtype
		switch {
		case name == n.service && (t == dns.TypePTR || t == dns.TypeANY),
			name == n.instance && (t == dns.TypeSRV || t == dns.TypeTXT || t == dns.TypeANY),
			name == n.host && (t == dns.TypeA || t == dns.TypeAAAA || t == dns.TypeANY):
			asked = true
		}
	}
	if !asked {
		return false
	}
	for _, rr := range m.Answer {
		if ptr, ok := rr.(*dns.PTR); ok && strings.ToLower(ptr.Hdr.Name) == n.service &&
			strings.ToLower(ptr.Ptr) == n.instance && time.Duration(ptr.Hdr.Ttl)*time.Second >= minKnownTTL {
			return false
		}
	}
	return true
}

// instancesOf gathers the instances of our service type that a response describes
// completely (SRV and TXT in the same packet; the PTR is optional, since an answer to an
// SRV or TXT query carries none). Our own instance is skipped.
func instancesOf(n names, m *dns.Msg) ([]parsedInstance, int) {
	type partial struct {
		srv     *dns.SRV
		txt     *dns.TXT
		goodbye bool
	}
	var order []string // instance labels (lower-cased) in first-seen order
	byLabel := map[string]*partial{}
	hosts := map[string][]netip.Addr{}
	skipped := 0
	get := func(owner string) *partial {
		label, ok := instanceLabel(n, owner)
		if !ok {
			skipped++
			return nil
		}
		key := strings.ToLower(label)
		if key == strings.ToLower(n.label) {
			return nil
		}
		if p := byLabel[key]; p != nil {
			return p
		}
		if len(order) == maxInstancesPerPacket {
			skipped++
			return nil
		}
		p := &partial{}
		byLabel[key] = p
		order = append(order, key)
		return p
	}
	// Records live in the answer and additional sections; the authority section of a
	// response carries nothing mDNS uses.
	for _, sect := range [][]dns.RR{m.Answer, m.Extra} {
		for _, rr := range sect {
			h := rr.Header()
			switch r := rr.(type) {
			case *dns.PTR:
				if strings.ToLower(h.Name) != n.service {
					continue
				}
				if p := get(r.Ptr); p != nil && h.Ttl == 0 {
					p.goodbye = true
				}
			case *dns.SRV:
				if p := get(h.Name); p != nil && p.srv == nil {
					p.srv = r
				}
			case *dns.TXT:
				if p := get(h.Name); p != nil && p.txt == nil {
					p.txt = r
				}
			case *dns.A:
				name := strings.ToLower(h.Name)
				if ad, ok := netip.AddrFromSlice(r.A); ok && len(hosts[name]) < maxAddrsPerInstance && len(hosts) <= maxRecords {
					hosts[name] = append(hosts[name], ad.Unmap())
				}
			case *dns.AAAA:
				name := strings.ToLower(h.Name)
				if ad, ok := netip.AddrFromSlice(r.AAAA); ok && len(hosts[name]) < maxAddrsPerInstance && len(hosts) <= maxRecords {
					hosts[name] = append(hosts[name], ad)
				}
			}
		}
	}
	var out []parsedInstance
	for _, key := range order {
		p := byLabel[key]
		label, _ := instanceLabel(n, firstOwner(p.srv, p.txt, key+"."+n.service))
		if p.goodbye {
			out = append(out, parsedInstance{label: label, goodbye: true})
			continue
		}
		if p.srv == nil || p.txt == nil {
			skipped++
			continue
		}
		payload, ok := joinTXT(p.txt.Txt)
		if !ok {
			skipped++
			continue
		}
		if len(p.txt.Txt) == 1 && p.txt.Txt[0] == "" {
			payload = nil
		}
		out = append(out, parsedInstance{
			label:   label,
			payload: payload,
			port:    int(p.srv.Port),
			addrs:   hosts[strings.ToLower(p.srv.Target)],
			goodbye: p.srv.Hdr.Ttl == 0 || p.txt.Hdr.Ttl == 0,
		})
	}
	return out, skipped
}

// firstOwner returns the owner name of the SRV or TXT record, which keeps the label's case
// as the peer sent it, or else fallback.
func firstOwner(srv *dns.SRV, txt *dns.TXT, fallback string) string {
	switch {
	case srv != nil:
		return srv.Hdr.Name
	case txt != nil:
		return txt.Hdr.Name
	}
	return fallback
}

// instanceLabel returns the instance label of "<label>.<service>", accepting only labels in
// validLabel's alphabet: anything else (escapes, dots, other services) is not ours to parse.
func instanceLabel(n names, owner string) (string, bool) {
	if len(owner) <= len(n.service)+1 || !strings.EqualFold(owner[len(owner)-len(n.service):], n.service) {
		return "", false
	}
	label := owner[:len(owner)-len(n.service)-1]
	if owner[len(label)] != '.' || !validLabel(label) {
		return "", false
	}
	return label, true
}
