package pex

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	ma "github.com/multiformats/go-multiaddr"

	"github.com/tendril-p2p/tendril"
	"github.com/tendril-p2p/tendril/addrbook"
	"github.com/tendril-p2p/tendril/peerrecord"
	"github.com/tendril-p2p/tendril/transport/memory"
)

// TestThreeNodesLearn: A and C each know only B, and B holds their records (as identify
// would have given it); the automatic loop asks B when A and C connect, and each learns
// the other and can dial it from its book.
func TestThreeNodesLearn(t *testing.T) {
	net := memory.NewNetwork(memory.NetworkConfig{})
	a, b, c := newNode(t, net, Config{}), newNode(t, net, Config{}), newNode(t, net, Config{})
	now := time.Now()
	idf := addrbook.Source{Kind: addrbook.SourceIdentify}
	b.book.AddRecord(now, a.record(t), idf)
	// Two addresses share one of the book's slots about once in 512 books: then take
	// another C, so that B holds both records the test is about.
	for b.book.AddRecord(now, c.record(t), idf); b.book.Record(c.svc.ID()) == nil; b.book.AddRecord(now, c.record(t), idf) {
		c = newNode(t, net, Config{})
	}
	dial(t, a.svc, b.addr)
	dial(t, c.svc, b.addr)
	waitFor(t, "A and C to learn each other", func() bool {
		return a.book.Record(c.svc.ID()) != nil && c.book.Record(a.svc.ID()) != nil
	})
	es := a.book.Addrs(time.Now(), c.svc.ID())
	if len(es) != 1 || !es[0].Addr.Equal(c.addr.Transport) || es[0].Source != addrbook.FromPeer(addrbook.GroupMemory) {
		t.Fatalf("A's book for C: %+v", es)
	}
	if a.book.Record(a.svc.ID()) != nil {
		t.Fatal("A keeps its own record")
	}
	s := dial(t, a.svc, tendril.Addr{Transport: es[0].Addr, Peer: es[0].Peer})
	if s.Peer() != c.svc.ID() {
		t.Fatal("dialled the wrong peer")
	}
	if st := b.pex.Stats(); st.Served != 2 {
		t.Fatalf("B served %d answers, want 2 (one per outbound session)", st.Served)
	}
	// A's Ask of C adds nothing new: C knows A and B, and B's record C has not got.
	if _, err := a.pex.Ask(context.Background(), s); err != nil {
		t.Fatal(err)
	}
}

// TestHostileTooManyRecords: answers with 10,000 records, or with more records than
// asked in few bytes, are refused before a single record is parsed, and the peer is then
// ignored.
func TestHostileTooManyRecords(t *testing.T) {
	net := memory.NewNetwork(memory.NetworkConfig{})
	one := newRecord(t, nil, "/ip4/11.1.1.1/tcp/1").Bytes()
	huge := make([][]byte, 10_000)
	for i := range huge {
		huge[i] = one
	}
	for name, ans := range map[string][]byte{
		"10,000 records": frame(huge...),
		"33 records":     frame(huge[:33]...), // within 32 KiB: the count refuses it
	} {
		t.Run(name, func(t *testing.T) {
			h := newHostile(t, net, func(int) []byte { return ans })
			v := newNode(t, net, manual)
			s := dial(t, v.svc, h.addr)
			added, err := v.pex.Ask(context.Background(), s)
			if !errors.Is(err, ErrAnswerTooLarge) || added != 0 {
				t.Fatalf("Ask = %d, %v; want ErrAnswerTooLarge", added, err)
			}
			st := v.pex.Stats()
			if st.RecordsParsed != 0 || st.AnswersRefused != 1 {
				t.Fatalf("%d records parsed, %d answers refused", st.RecordsParsed, st.AnswersRefused)
			}
			if n, _ := v.book.Len(); n != 0 {
				t.Fatalf("%d addresses added", n)
			}
			if _, err := v.pex.Ask(context.Background(), s); !errors.Is(err, ErrIgnored) || h.requests.Load() != 1 {
				t.Fatalf("second Ask: %v after %d requests; want ErrIgnored without asking", err, h.requests.Load())
			}
		})
	}
}

// TestHostileOneGroup: a peer whose records all have addresses of one /16 fills one
// bucket at most (the flood's 1,000 records in 32 answers), and one whose records span a
// thousand /16s at most NewBucketsPerSource buckets: the book keeps the groups it had.
func TestHostileOneGroup(t *testing.T) {
	net := memory.NewNetwork(memory.NetworkConfig{})
	for _, tc := range []struct {
		name string
		addr func(i int) string
		max  int
	}{
		{"one /16", func(i int) string { return fmt.Sprintf("/ip4/66.6.%d.%d/tcp/4001", i/250, 1+i%250) }, 32},
		{"1,000 /16s", func(i int) string { return fmt.Sprintf("/ip4/%d.%d.7.7/tcp/4001", 11+i%150, 100+i/150) }, 16 * 32},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pool := signed(t, 1000, tc.addr)
			h := newHostile(t, net, func(n int) []byte {
				from := (n - 1) * 32 % len(pool)
				return frame(pool[from:min(from+32, len(pool))]...)
			})
			v := newNode(t, net, manual)
			now := time.Now()
			// 200 groups of the victim's own making first.
			for g := range 200 {
				v.book.AddRecord(now, newRecord(t, nil, fmt.Sprintf("/ip4/%d.%d.1.1/tcp/1", 11+g%150, 1+g/150)), addrbook.Source{Kind: addrbook.SourceIdentify})
			}
			before := groupCount(v.book)
			s := dial(t, v.svc, h.addr)
			total := 0
			for range 32 {
				added, err := v.pex.Ask(context.Background(), s)
				if err != nil {
					t.Fatal(err)
				}
				total += added
			}
			if total > tc.max {
				t.Fatalf("the flood added %d addresses, at most %d", total, tc.max)
			}
			if after := groupCount(v.book); after < before {
				t.Fatalf("%d groups before the flood, %d after", before, after)
			}
			t.Logf("%d groups before, flood added %d addresses", before, total)
		})
	}
}

// groupCount counts the groups of the book's shareable addresses.
func groupCount(b *addrbook.Book) int {
	g := map[addrbook.Group]bool{}
	for _, e := range b.Sample(time.Now(), 1<<20, addrbook.SampleOptions{}) {
		g[e.Group] = true
	}
	return len(g)
}

// TestHostileSelf: the victim's own record (even correctly signed, as a replayed one is)
// is dropped, and the victim's own address in another peer's record too.
func TestHostileSelf(t *testing.T) {
	net := memory.NewNetwork(memory.NetworkConfig{})
	v := newNode(t, net, manual)
	other := newRecord(t, nil, v.addr.Transport.String(), "/memory/999")
	h := newHostile(t, net, func(int) []byte {
		return frame(v.record(t).Bytes(), other.Bytes())
	})
	if _, err := v.pex.Ask(context.Background(), dial(t, v.svc, h.addr)); err != nil {
		t.Fatal(err)
	}
	if es := v.book.Addrs(time.Now(), v.svc.ID()); len(es) != 0 || v.book.Record(v.svc.ID()) != nil {
		t.Fatalf("the victim's own record entered its book: %+v", es)
	}
	es := v.book.Addrs(time.Now(), other.Peer())
	if len(es) != 1 || es[0].Addr.String() != "/memory/999" {
		t.Fatalf("the other peer's addresses: %+v, want /memory/999 only", es)
	}
	if st := v.pex.Stats(); st.RecordsDropped != 1 {
		t.Fatalf("%d records dropped, want 1", st.RecordsDropped)
	}
}

// TestHostilePrivateToPublic: from a peer taken as public, unroutable addresses are
// dropped (the memory transport is made "public" by Config.Public); from a local peer
// they are kept, which shows the test tells the two apart.
func TestHostilePrivateToPublic(t *testing.T) {
	net := memory.NewNetwork(memory.NetworkConfig{})
	bad := []string{"/ip4/127.0.0.1/tcp/1", "/ip4/10.1.2.3/tcp/1", "/ip4/192.168.1.1/tcp/1",
		"/ip4/172.20.0.1/tcp/1", "/ip4/169.254.1.1/tcp/1", "/ip4/0.0.0.0/tcp/1", "/ip6/::1/tcp/1",
		"/ip6/fe80::1/tcp/1", "/ip6/fd12::1/tcp/1", "/ip6/::/tcp/1"}
	recs := [][]byte{newRecord(t, nil, bad...).Bytes(), newRecord(t, nil, append([]string{"/ip4/8.8.8.8/tcp/1"}, bad...)...).Bytes()}
	h := newHostile(t, net, func(int) []byte { return frame(recs...) })
	for _, public := range []bool{true, false} {
		v := newNode(t, net, Config{NoAutoAsk: true, Public: func(ma.Multiaddr) bool { return public }})
		if _, err := v.pex.Ask(context.Background(), dial(t, v.svc, h.addr)); err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, e := range v.book.Sample(time.Now(), 100, addrbook.SampleOptions{}) {
			got = append(got, e.Addr.String())
		}
		switch {
		case public && (len(got) != 1 || got[0] != "/ip4/8.8.8.8/tcp/1"):
			t.Fatalf("from a public peer the book took %v", got)
		case !public && len(got) < 5:
			// Ten unroutable addresses, one group, one source: one bucket, where a few
			// collide.
			t.Fatalf("from a local peer the book took only %v", got)
		}
	}
}

// TestHostileForged: unsigned and forged records are dropped and counted, the good ones
// in the same answer kept; after BadRecordLimit bad records the peer is not asked.
func TestHostileForged(t *testing.T) {
	net := memory.NewNetwork(memory.NetworkConfig{})
	good := newRecord(t, nil, "/ip4/11.1.1.1/tcp/1")
	forged := []byte(string(newRecord(t, nil, "/ip4/12.1.1.1/tcp/1").Bytes()))
	forged[40] ^= 1 // the sequence number or count: the signature no longer covers it
	unsigned := []byte(string(newRecord(t, nil, "/ip4/13.1.1.1/tcp/1").Bytes()))
	clear(unsigned[len(unsigned)-64:])
	garbage := []byte(strings.Repeat("x", 200))
	h := newHostile(t, net, func(int) []byte { return frame(good.Bytes(), forged, unsigned, garbage) })
	v := newNode(t, net, Config{NoAutoAsk: true, BadRecordLimit: 6})
	s := dial(t, v.svc, h.addr)
	added, err := v.pex.Ask(context.Background(), s)
	if !errors.Is(err, ErrBadRecord) || added != 1 {
		t.Fatalf("Ask = %d, %v; want 1 and ErrBadRecord", added, err)
	}
	if st := v.pex.Stats(); st.BadRecords != 3 || st.RecordsParsed != 4 {
		t.Fatalf("%d bad records of %d parsed", st.BadRecords, st.RecordsParsed)
	}
	if _, err := v.pex.Ask(context.Background(), s); !errors.Is(err, ErrBadRecord) {
		t.Fatalf("second Ask: %v", err)
	}
	// Six bad records now: the peer is ignored, not asked.
	if _, err := v.pex.Ask(context.Background(), s); !errors.Is(err, ErrIgnored) || h.requests.Load() != 2 {
		t.Fatalf("third Ask: %v after %d requests; want ErrIgnored and 2 requests", err, h.requests.Load())
	}
	if n, _ := v.book.Len(); n != 1 {
		t.Fatalf("%d addresses in the book, want the good record's one", n)
	}
}

// TestServeRateLimit: a peer flooding requests gets its burst of answers, then typed
// refusals that cost no sample; the asking side reads them as ErrRateLimited.
func TestServeRateLimit(t *testing.T) {
	net := memory.NewNetwork(memory.NetworkConfig{})
	srv := newNode(t, net, manual)
	for i := range 50 {
		srv.book.AddRecord(time.Now(), newRecord(t, nil, fmt.Sprintf("/ip4/%d.1.1.1/tcp/1", 11+i)), addrbook.Source{Kind: addrbook.SourceIdentify})
	}
	// The attacker speaks the protocol without the package's manners.
	att, _, _ := newService(t, net, tendril.Protocol{Name: Protocol, Versions: []string{Version}})
	s := dial(t, att, srv.addr)
	answers, refused := 0, 0
	for range 100 {
		_, err := s.Request(context.Background(), Protocol, appendRequest(nil, 1000))
		var re *tendril.RequestError
		switch {
		case err == nil:
			answers++
		case errors.As(err, &re) && re.Reason == ErrRateLimited.Error():
			refused++
		default:
			t.Fatal(err)
		}
	}
	if answers != 2 || refused != 98 {
		t.Fatalf("%d answers, %d refused; want the burst of 2", answers, refused)
	}
	if st := srv.pex.Stats(); st.Served != 2 || st.Refused != 98 {
		t.Fatalf("stats: %+v", st)
	}
	// A well-behaved asker sees the typed error.
	v := newNode(t, net, manual)
	vs := dial(t, v.svc, srv.addr)
	for range 2 {
		if _, err := v.pex.Ask(context.Background(), vs); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := v.pex.Ask(context.Background(), vs); !errors.Is(err, ErrRateLimited) {
		t.Fatalf("third Ask: %v, want ErrRateLimited", err)
	}
	// Malformed requests are refused after the rate limit, and counted.
	bad, _, _ := newService(t, net, tendril.Protocol{Name: Protocol, Versions: []string{Version}})
	if _, err := dial(t, bad, srv.addr).Request(context.Background(), Protocol, []byte{0x80}); !errors.Is(err, tendril.ErrRequestFailed) {
		t.Fatalf("malformed request: %v", err)
	}
	if st := srv.pex.Stats(); st.BadRequests != 1 {
		t.Fatalf("%d bad requests counted", st.BadRequests)
	}
}

// TestServeGlobalCap: many identities each get their own allowance, and the global
// bucket still bounds the answers.
func TestServeGlobalCap(t *testing.T) {
	net := memory.NewNetwork(memory.NetworkConfig{})
	srv := newNode(t, net, Config{NoAutoAsk: true, MaxAnswersPerSecond: 3})
	start := time.Now()
	const asks = 24
	for range asks {
		att, _, _ := newService(t, net, tendril.Protocol{Name: Protocol, Versions: []string{Version}})
		dial(t, att, srv.addr).Request(context.Background(), Protocol, appendRequest(nil, 1))
	}
	elapsed := time.Since(start)
	st := srv.pex.Stats()
	if limit := 3*globalBurstSeconds + uint64(elapsed.Seconds()*3); st.Served > limit || st.Served+st.Refused != asks {
		t.Fatalf("%d answered, %d refused in %v; at most %d answers", st.Served, st.Refused, elapsed, limit)
	}
}

// TestServeToPublic: a public asker gets no record listing an unroutable address, nor
// its own record.
func TestServeToPublic(t *testing.T) {
	net := memory.NewNetwork(memory.NetworkConfig{})
	srv := newNode(t, net, Config{NoAutoAsk: true, Public: func(ma.Multiaddr) bool { return true }})
	idf := addrbook.Source{Kind: addrbook.SourceIdentify}
	now := time.Now()
	held := 0 // public records the book took (two may collide in one slot of its tables)
	for i := range 10 {
		pub := newRecord(t, nil, fmt.Sprintf("/ip4/%d.1.1.1/tcp/1", 11+i))
		srv.book.AddRecord(now, pub, idf)
		if srv.book.Record(pub.Peer()) != nil {
			held++
		}
		srv.book.AddRecord(now, newRecord(t, nil, fmt.Sprintf("/ip4/%d.1.1.1/tcp/1", 111+i), "/ip4/192.168.0.1/tcp/1"), idf)
		srv.book.AddRecord(now, newRecord(t, nil, fmt.Sprintf("/ip4/127.0.0.%d/tcp/1", 1+i)), idf)
	}
	v := newNode(t, net, manual)
	srv.book.AddRecord(now, v.record(t), idf)
	att, _, _ := newService(t, net, tendril.Protocol{Name: Protocol, Versions: []string{Version}})
	for _, s := range []*tendril.Session{dial(t, v.svc, srv.addr), dial(t, att, srv.addr)} {
		reply, err := s.Request(context.Background(), Protocol, appendRequest(nil, 32))
		if err != nil {
			t.Fatal(err)
		}
		raws, err := splitAnswer(reply, 32, 32<<10)
		if err != nil || len(raws) != held || held < 8 {
			t.Fatalf("%d records, %v; want the %d public ones the book holds", len(raws), err, held)
		}
		for _, raw := range raws {
			rec, err := peerrecord.Parse(raw)
			if err != nil {
				t.Fatal(err)
			}
			if rec.Peer() == s.LocalAddr().Peer || rec.Peer() == v.svc.ID() {
				t.Fatalf("the asker's own record in the answer")
			}
			for _, a := range rec.Addrs() {
				if !addrbook.IsPublic(a) {
					t.Fatalf("a record listing %s sent to a public asker", a)
				}
			}
		}
	}
}

func TestConfigValidate(t *testing.T) {
	if err := (&Config{}).Validate(); err != nil {
		t.Fatal(err)
	}
	for name, c := range map[string]Config{
		"negative":       {ServeBurst: -1},
		"huge answer":    {MaxAnswer: 5000},
		"tiny bytes":     {MaxAnswerBytes: 100},
		"interval order": {AskInterval: time.Hour, MaxAskInterval: time.Minute},
	} {
		if err := c.Validate(); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("%s: %v", name, err)
		}
	}
	net := memory.NewNetwork(memory.NetworkConfig{})
	svc, _, _ := newService(t, net)
	if _, err := New(svc, nil, Config{}); !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("nil book: %v", err)
	}
	p, err := New(svc, newBook(t), Config{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := New(svc, newBook(t), Config{}); err == nil {
		t.Fatal("a second PEX on one Service registered")
	}
	p.Close()
	p.Close()
}

// TestPeriodicAsk: the loop asks a connected peer every AskInterval while the book is
// small, an inbound one when there is no outbound: B, dialled by A, learns from A.
func TestPeriodicAsk(t *testing.T) {
	net := memory.NewNetwork(memory.NetworkConfig{})
	a := newNode(t, net, manual)
	b := newNode(t, net, Config{AskInterval: 50 * time.Millisecond})
	c := newNode(t, net, manual)
	a.book.AddRecord(time.Now(), c.record(t), addrbook.Source{Kind: addrbook.SourceIdentify})
	dial(t, a.svc, b.addr)
	waitFor(t, "B to ask A", func() bool { return b.book.Record(c.svc.ID()) != nil })
	if st := a.pex.Stats(); st.Served == 0 {
		t.Fatal("A served nothing")
	}
}
