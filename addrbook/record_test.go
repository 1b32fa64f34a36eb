package addrbook

import (
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"testing"

	ma "github.com/multiformats/go-multiaddr"

	"github.com/tendril-p2p/tendril/peerrecord"
	"github.com/tendril-p2p/tendril/secio"
)

// seedReader yields an endless deterministic stream for key generation.
type seedReader uint64

func (r *seedReader) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = byte(*r >> (8 * (i % 8)))
		if i%8 == 7 {
			*r = *r*6364136223846793005 + 1442695040888963407
		}
	}
	*r++
	return len(p), nil
}

// keyN returns a distinct, reproducible identity key for n.
func keyN(tb testing.TB, n int) *secio.PrivateKey {
	r := seedReader(uint64(n)*0x9e3779b97f4a7c15 + 1)
	k, err := secio.GenerateKeyFrom(&r)
	if err != nil {
		tb.Fatal(err)
	}
	return k
}

func record(tb testing.TB, key *secio.PrivateKey, seq uint64, addrs ...ma.Multiaddr) *peerrecord.Record {
	tb.Helper()
	r, err := peerrecord.New(key, seq, addrs)
	if err != nil {
		tb.Fatal(err)
	}
	return r
}

func TestAddRecord(t *testing.T) {
	b := newBook(t, nil)
	k := keyN(t, 1)
	p := k.PeerID()
	a1, a2, a3 := ip4(11, 1, 1, 1), ip4(12, 1, 1, 1), ip4(13, 1, 1, 1)
	src := Source{Kind: SourceIdentify}

	if n := b.AddRecord(t0, record(t, k, 5, a1, a2), src); n != 2 {
		t.Fatalf("added %d, want 2", n)
	}
	if r := b.Record(p); r == nil || r.Seq() != 5 {
		t.Fatalf("record held: %v", r)
	}
	// An older record is ignored, addresses included.
	if n := b.AddRecord(t0, record(t, k, 4, a3), src); n != 0 || b.Record(p).Seq() != 5 {
		t.Fatalf("an older record added %d addresses or replaced the newer (seq %d)", n, b.Record(p).Seq())
	}
	if es := b.Addrs(t0, p); len(es) != 2 {
		t.Fatalf("%d addresses after an older record", len(es))
	}
	// A newer one replaces it.
	if n := b.AddRecord(t0, record(t, k, 6, a3), src); n != 1 || b.Record(p).Seq() != 6 {
		t.Fatalf("newer record: added %d, seq %d", n, b.Record(p).Seq())
	}
	// The same sequence number with other contents does not replace the held record.
	if b.AddRecord(t0, record(t, k, 6, a1), src); !b.Record(p).Addrs()[0].Equal(a3) {
		t.Fatal("a record of the same sequence number replaced the held one")
	}
	// AddRecordAddrs adds only what the record lists.
	k2 := keyN(t, 2)
	if n := b.AddRecordAddrs(t0, record(t, k2, 1, a1), []ma.Multiaddr{a1, a2}, FromPeer("ip4:50.1.0.0/16")); n != 1 {
		t.Fatalf("AddRecordAddrs added %d, want 1 (a2 is not in the record)", n)
	}
	// A record whose addresses all stay out keeps no record for a peer not in the book.
	k3 := keyN(t, 3)
	if b.AddRecordAddrs(t0, record(t, k3, 1, a1), nil, src); b.Record(k3.PeerID()) != nil {
		t.Fatal("a record kept for a peer with no address in the book")
	}
	if n := b.AddRecord(t0, nil, src); n != 0 {
		t.Fatal("a nil record added addresses")
	}
	if n := b.AddRecord(t0, record(t, k3, 1, a1), Source{}); n != 0 || b.Record(k3.PeerID()) != nil {
		t.Fatal("a record without a source was taken")
	}
	checkInvariants(t, b)
}

// TestRecordLeavesWithPeer: the record goes when the peer's last address goes, however it
// goes, so that records stay bounded by MaxPeers.
func TestRecordLeavesWithPeer(t *testing.T) {
	k := keyN(t, 1)
	src := Source{Kind: SourceIdentify}
	a := ip4(11, 1, 1, 1)

	b := newBook(t, nil)
	b.AddRecord(t0, record(t, k, 1, a), src)
	b.Remove(k.PeerID())
	if b.Record(k.PeerID()) != nil {
		t.Fatal("record kept after Remove")
	}

	b.AddRecord(t0, record(t, k, 1, a), src)
	if n := b.Expire(t0.Add(b.Config().TTL)); n != 1 || b.Record(k.PeerID()) != nil {
		t.Fatalf("Expire removed %d; record kept: %v", n, b.Record(k.PeerID()) != nil)
	}

	// Eviction: the slot's worthless entry gives way to a newcomer.
	one := &Config{NewBuckets: 1, NewSlots: 1, NewBucketsPerSource: 1, TriedBuckets: 1, TriedSlots: 1, TriedBucketsPerGroup: 1}
	b = newBook(t, one)
	b.AddRecord(t0, record(t, k, 1, a), src)
	for range b.Config().MaxFailuresNew {
		b.Failed(t0, k.PeerID(), a, errors.New("refused"))
	}
	if n := b.Add(t0, peerN(7), []ma.Multiaddr{ip4(12, 1, 1, 1)}, Source{Kind: SourceUser}); n != 1 {
		t.Fatalf("newcomer not added in place of a worthless entry")
	}
	if b.Record(k.PeerID()) != nil {
		t.Fatal("record kept after its peer was evicted")
	}
	b.mu.Lock()
	n := len(b.records)
	b.mu.Unlock()
	if n != 0 {
		t.Fatalf("%d records held", n)
	}
}

func TestSampleRecords(t *testing.T) {
	b := newBook(t, nil)
	src := Source{Kind: SourceIdentify}
	// 20 groups of 3 peers with records, and as many peers without.
	for g := range 20 {
		for i := range 3 {
			b.AddRecord(t0, record(t, keyN(t, g*10+i), 1, ip4(11+g, 1, 1, i+1)), src)
			b.Add(t0, peerN(g*10+i), []ma.Multiaddr{ip4(11+g, 2, 1, i+1)}, Source{Kind: SourceUser})
		}
	}
	// A peer whose record has a private address, and one with a user address beside its record's.
	priv := keyN(t, 500)
	b.AddRecord(t0, record(t, priv, 1, ip4(100, 1, 1, 1), addr("/ip4/192.168.1.7/tcp/1")), src)
	mixed := keyN(t, 501)
	b.AddRecord(t0, record(t, mixed, 1, ip4(101, 1, 1, 1)), src)
	b.Add(t0, mixed.PeerID(), []ma.Multiaddr{ip4(102, 1, 1, 1)}, Source{Kind: SourceUser})

	asker := GroupOf(ip4(11, 1, 1, 1))
	recs := b.SampleRecords(t0, 1000, SampleOptions{Asker: asker, OmitLocal: true})
	seen := map[secio.PeerID]bool{}
	askers := 0
	for _, r := range recs {
		if seen[r.Peer()] {
			t.Fatalf("record of %v twice", r.Peer())
		}
		seen[r.Peer()] = true
		if r.Peer() == priv.PeerID() {
			t.Fatal("a record with a private address sampled for a public asker")
		}
		if GroupOf(r.Addrs()[0]) == asker {
			askers++
		}
	}
	// Every record held but the private one (a few of the 62 collided in their
	// buckets), the asker's group at most a quarter of the others.
	b.mu.Lock()
	held := len(b.records)
	b.mu.Unlock()
	if held < 50 || len(recs) != held-1 || askers > (len(recs)-askers)/4 {
		t.Fatalf("%d records of %d held, %d of the asker's group", len(recs), held, askers)
	}
	if !seen[mixed.PeerID()] {
		t.Fatal("the peer with a record and a user address was not sampled")
	}
	if got := b.SampleRecords(t0, 1000, SampleOptions{}); len(got) != held {
		t.Fatalf("%d records without OmitLocal, want all %d", len(got), held)
	}
	if got := b.SampleRecords(t0, 5, SampleOptions{}); len(got) != 5 {
		t.Fatalf("%d records asked 5", len(got))
	}
	// A worthless address is not shared, nor its record.
	for range b.Config().MaxFailuresNew {
		b.Failed(t0, mixed.PeerID(), ip4(101, 1, 1, 1), errors.New("refused"))
	}
	for _, r := range b.SampleRecords(t0, 1000, SampleOptions{}) {
		if r.Peer() == mixed.PeerID() {
			t.Fatal("a record sampled for its worthless address (the user address is not the record's)")
		}
	}
	// Only the asker's group: nothing.
	only := newBook(t, nil)
	for i := range 10 {
		only.AddRecord(t0, record(t, keyN(t, i), 1, ip4(11, 1, 1, i+1)), src)
	}
	if got := only.SampleRecords(t0, 32, SampleOptions{Asker: asker}); len(got) != 0 {
		t.Fatalf("answered the asker with %d records of its own group only", len(got))
	}
}

// TestRecordFloodBuckets: records passed on by one peer land in at most
// NewBucketsPerSource new buckets, however many groups they span, and leave the groups
// already in the book in place.
func TestRecordFloodBuckets(t *testing.T) {
	b := newBook(t, nil)
	fillGroups(b, 100, 2)
	before := groups(b)
	via := FromPeer("ip4:66.6.0.0/16")
	for i := range 2000 {
		b.AddRecord(t0, record(t, keyN(t, 10_000+i), 1, ip4(11+i%150, 100+i/150, 1, 1)), via)
	}
	b.mu.Lock()
	buckets := map[int]bool{}
	for pos, e := range b.newT.slots {
		if e != nil && e.src == via {
			buckets[pos/b.newT.perBucket] = true
		}
	}
	b.mu.Unlock()
	if len(buckets) > b.Config().NewBucketsPerSource {
		t.Fatalf("one source's records reached %d buckets, at most %d", len(buckets), b.Config().NewBucketsPerSource)
	}
	after := groups(b)
	for g := range before {
		if after[g] == 0 {
			t.Fatalf("group %s lost to the flood", g)
		}
	}
	checkInvariants(t, b)
}

func TestSaveLoadRecords(t *testing.T) {
	b := newBook(t, nil)
	src := Source{Kind: SourceIdentify}
	var keys []*secio.PrivateKey
	for i := range 20 {
		k := keyN(t, i)
		keys = append(keys, k)
		b.AddRecord(t0, record(t, k, uint64(i+1), ip4(11+i, 1, 1, 1), ip4(11+i, 2, 2, 2)), src)
	}
	var buf bytes.Buffer
	if err := b.Save(&buf, t0); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(buf.String(), `"version":2`) {
		t.Fatalf("saved as %.40s", buf.String())
	}
	c := newBook(t, nil)
	if _, err := c.Load(bytes.NewReader(buf.Bytes()), t0); err != nil {
		t.Fatal(err)
	}
	for _, k := range keys {
		r, o := c.Record(k.PeerID()), b.Record(k.PeerID())
		if r == nil || !bytes.Equal(r.Bytes(), o.Bytes()) {
			t.Fatalf("record of %v not restored", k.PeerID())
		}
	}
	if got := c.SampleRecords(t0, 100, SampleOptions{}); len(got) != 20 {
		t.Fatalf("%d records shared after Load", len(got))
	}

	// Version 1 (no records) still loads.
	v1 := `{"version":1,"entries":[{"peer":"` + peerN(1).String() +
		`","addr":"/ip4/11.1.1.1/tcp/1","source":"user","first_seen":"2026-12-04T10:00:00Z","last_seen":"2026-12-04T10:00:00Z"}]}`
	if n, err := newBook(t, nil).Load(strings.NewReader(v1), t0); n != 1 || err != nil {
		t.Fatalf("version 1: %d, %v", n, err)
	}
}

// TestLoadHostileRecords: a record in the file is verified, kept only for a peer in the
// book, and the number of records is bounded before any is verified.
func TestLoadHostileRecords(t *testing.T) {
	k := keyN(t, 1)
	good := record(t, k, 1, ip4(11, 1, 1, 1))
	forged := bytes.Clone(good.Bytes())
	forged[len(forged)-1] ^= 1
	stranger := record(t, keyN(t, 2), 1, ip4(12, 1, 1, 1))
	entry := func(p secio.PeerID, a string) string {
		return `{"peer":"` + p.String() + `","addr":"` + a + `","source":"identify","first_seen":"2026-12-04T10:00:00Z","last_seen":"2026-12-04T10:00:00Z"}`
	}
	doc := func(records ...[]byte) string {
		var buf bytes.Buffer
		fmt.Fprintf(&buf, `{"version":2,"entries":[%s],"records":[`, entry(k.PeerID(), "/ip4/11.1.1.1/tcp/4001"))
		for i, r := range records {
			if i > 0 {
				buf.WriteByte(',')
			}
			fmt.Fprintf(&buf, "%q", base64.StdEncoding.EncodeToString(r))
		}
		buf.WriteString("]}")
		return buf.String()
	}
	b := newBook(t, nil)
	if _, err := b.Load(strings.NewReader(doc(forged, stranger.Bytes())), t0); err != nil {
		t.Fatal(err)
	}
	if b.Record(k.PeerID()) != nil || b.Record(stranger.Peer()) != nil {
		t.Fatal("a forged record, or one of a peer not in the book, was kept")
	}
	b = newBook(t, nil)
	if _, err := b.Load(strings.NewReader(doc(good.Bytes())), t0); err != nil || b.Record(k.PeerID()) == nil {
		t.Fatalf("the good record was not kept: %v", err)
	}

	small := &Config{NewBuckets: 1, NewSlots: 2, NewBucketsPerSource: 1, TriedBuckets: 1, TriedSlots: 1, TriedBucketsPerGroup: 1}
	many := make([][]byte, 4)
	for i := range many {
		many[i] = good.Bytes()
	}
	if _, err := newBook(t, small).Load(strings.NewReader(doc(many...)), t0); !errors.Is(err, ErrFileTooLarge) {
		t.Fatalf("4 records for a book of 3 slots: %v, want ErrFileTooLarge", err)
	}
}

// TestNewerRecordResetsFailures: an address the book stopped offering after failed dials
// is offered again when its owner signs a newer record listing it (it restarted, or came
// back), and not when a record of the same age arrives again.
func TestNewerRecordResetsFailures(t *testing.T) {
	b := newBook(t, nil)
	k := keyN(t, 1)
	p := k.PeerID()
	a := ip4(11, 1, 1, 1)
	src := Source{Kind: SourceIdentify}
	b.AddRecord(t0, record(t, k, 5, a), src)
	offered := func() bool { return len(b.Select(t0, 8, nil)) == 1 }
	for range b.Config().MaxFailuresNew {
		b.Attempt(t0, p, a)
		b.Failed(t0, p, a, errors.New("refused"))
	}
	if offered() {
		t.Fatal("still offered after MaxFailuresNew failures")
	}
	if b.AddRecord(t0, record(t, k, 5, a), src); offered() {
		t.Fatal("a record of the same age made the address offered again")
	}
	if b.AddRecord(t0, record(t, k, 6, a), src); !offered() {
		t.Fatal("a newer record did not make the address offered again")
	}
	if es := b.Addrs(t0, p); len(es) != 1 || es[0].Failures != 0 || es[0].LastError != "refused" {
		t.Fatalf("after the newer record: %+v", es)
	}
}
