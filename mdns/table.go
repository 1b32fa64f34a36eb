package mdns

import (
	"bytes"
	"net/netip"
	"slices"
	"strings"
	"time"
)

// Found describes a peer instance seen on the LAN. Everything in it came from the network
// unauthenticated: anyone on the link can claim any instance, payload and address, so
// treat the payload as untrusted until its signature (or whatever it carries) is checked.
type Found struct {
	// Instance is the peer's instance label.
	Instance string
	// Payload is the peer's TXT payload, reassembled; at most MaxPayload bytes.
	Payload []byte
	// Addrs are the addresses announced in the peer's A and AAAA records, then the
	// packet's source address if not among them. IPv6 link-local addresses carry the
	// receiving interface as zone.
	Addrs []netip.Addr
	// Port is the port from the peer's SRV record.
	Port int
	// Interface is the name of the interface the answer arrived on.
	Interface string
}

// entry is what the table remembers of one instance.
type entry struct {
	payload    []byte
	port       int
	addrs      []netip.Addr // announced addresses only: the change test ignores the source
	seen       time.Time
	reported   time.Time
	knownUntil time.Time // zero: not offered as a known answer
}

// table remembers instances, bounded: at most max entries, the least recently seen
// evicted first, each forgotten ttl after it was last seen. It decides when an
// observation is worth a report: new, changed, or unreported for refresh.
type table struct {
	max     int
	ttl     time.Duration
	refresh time.Duration
	entries map[string]*entry // key: lower-cased instance label
	evicted uint64
}

func newTable(max int, ttl, refresh time.Duration) *table {
	return &table{max: max, ttl: ttl, refresh: refresh, entries: map[string]*entry{}}
}

// observe records an instance seen at now and reports whether to report it. A goodbye
// forgets the instance, so that its return is reported at once.
func (t *table) observe(now time.Time, p parsedInstance) bool {
	key := strings.ToLower(p.label)
	if p.goodbye {
		delete(t.entries, key)
		return false
	}
	e := t.entries[key]
	if e == nil {
		if len(t.entries) >= t.max {
			t.evictOldest()
		}
		e = &entry{}
		t.entries[key] = e
	}
	e.seen = now
	e.knownUntil = now.Add(t.ttl / 2)
	changed := e.reported.IsZero() || e.port != p.port || !bytes.Equal(e.payload, p.payload) || !sameAddrs(e.addrs, p.addrs)
	if !changed && now.Sub(e.reported) < t.refresh {
		return false
	}
	e.payload = append(e.payload[:0], p.payload...)
	e.port = p.port
	e.addrs = append(e.addrs[:0], p.addrs...)
	e.reported = now
	return true
}

// evictOldest drops the least recently seen entry. A linear scan: the table is small and
// this runs once per new instance, which already cost a packet parse.
func (t *table) evictOldest() {
	var oldest string
	var at time.Time
	for k, e := range t.entries {
		if oldest == "" || e.seen.Before(at) {
			oldest, at = k, e.seen
		}
	}
	delete(t.entries, oldest)
	t.evicted++
}

// expire forgets every instance not seen for ttl.
func (t *table) expire(now time.Time) {
	for k, e := range t.entries {
		if now.Sub(e.seen) >= t.ttl {
			delete(t.entries, k)
		}
	}
}

// known lists up to limit instances seen recently enough to send as known answers, with
// the TTL they have left; those seen most recently first.
func (t *table) known(now time.Time, n names, limit int) []knownAnswer {
	type kv struct {
		k string
		e *entry
	}
	var fresh []kv
	for k, e := range t.entries {
		if now.Before(e.knownUntil) {
			fresh = append(fresh, kv{k, e})
		}
	}
	slices.SortFunc(fresh, func(a, b kv) int { return b.e.seen.Compare(a.e.seen) })
	var out []knownAnswer
	for _, f := range fresh[:min(len(fresh), limit)] {
		out = append(out, knownAnswer{instance: f.k + "." + n.service, ttl: t.ttl - now.Sub(f.e.seen)})
	}
	return out
}

func sameAddrs(a, b []netip.Addr) bool {
	if len(a) != len(b) {
		return false
	}
	for _, x := range b {
		if !slices.Contains(a, x) {
			return false
		}
	}
	return true
}
