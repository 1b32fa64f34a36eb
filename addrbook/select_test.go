package addrbook

import (
	"slices"
	"testing"
	"time"

	ma "github.com/multiformats/go-multiaddr"

	"github.com/tendril-p2p/tendril/secio"
)

// fillGroups adds perGroup peers in each of n /16s, each with one address.
func fillGroups(b *Book, n, perGroup int) {
	for g := range n {
		for i := range perGroup {
			b.Add(t0, peerN(g*100+i), []ma.Multiaddr{ip4(11+g, 1, 1, i+1)}, Source{Kind: SourceIdentify})
		}
	}
}

func TestSelectDiversity(t *testing.T) {
	b := newBook(t, nil)
	fillGroups(b, 50, 4)
	// Addresses of one group told by one source share a bucket, so a few collide.
	total, _ := b.Len()
	if total < 180 {
		t.Fatalf("%d addresses of 200", total)
	}
	avail := groups(b)
	sel := b.Select(t0, 20, nil)
	if len(sel) != 20 {
		t.Fatalf("selected %d, want 20", len(sel))
	}
	seen := map[Group]bool{}
	for _, e := range sel {
		if seen[e.Group] {
			t.Fatalf("two selected in %s while other groups had candidates", e.Group)
		}
		seen[e.Group] = true
	}
	// Asking for more than the groups: each group gives one before any gives two, and
	// each peer is offered once.
	sel = b.Select(t0, 120, nil)
	perGroup := map[Group]int{}
	peers := map[secio.PeerID]bool{}
	for _, e := range sel {
		perGroup[e.Group]++
		if peers[e.Peer] {
			t.Fatalf("peer %v selected twice", e.Peer)
		}
		peers[e.Peer] = true
	}
	least := 1 << 30
	for g, n := range avail {
		if perGroup[g] < n {
			least = min(least, perGroup[g])
		}
	}
	for g, n := range perGroup {
		if n > least+1 {
			t.Fatalf("group %s selected %d times while another with candidates left was selected %d", g, n, least)
		}
	}
	if len(b.Select(t0, 1000, nil)) != total {
		t.Fatal("Select did not return every peer when asked for more")
	}
	if b.Select(t0, 0, nil) != nil {
		t.Fatal("Select(0) returned addresses")
	}
}

func TestSelectMixesTriedAndNew(t *testing.T) {
	b := newBook(t, nil)
	fillGroups(b, 40, 1)
	for g := range 20 {
		b.Good(t0, peerN(g*100), ip4(11+g, 1, 1, 1))
	}
	tried, fresh := 0, 0
	for range 50 {
		for _, e := range b.Select(t0, 10, nil) {
			if e.Tried {
				tried++
			} else {
				fresh++
			}
		}
	}
	// About half each; a fixed key makes the draw reproducible.
	if tried < 150 || fresh < 150 {
		t.Fatalf("over 50 selections of 10: %d tried, %d new", tried, fresh)
	}
}

func TestSelectExcludeAndBestAddr(t *testing.T) {
	b := newBook(t, nil)
	p := peerN(1)
	b.Add(t0, p, []ma.Multiaddr{ip4(11, 1, 1, 1), ip4(12, 1, 1, 1)}, Source{Kind: SourceIdentify})
	b.Good(t0, p, ip4(12, 1, 1, 1))
	b.Add(t0, peerN(2), []ma.Multiaddr{ip4(13, 1, 1, 1)}, Source{Kind: SourceIdentify})
	sel := b.Select(t0, 10, func(id secio.PeerID) bool { return id == peerN(2) })
	if len(sel) != 1 || sel[0].Peer != p || !sel[0].Addr.Equal(ip4(12, 1, 1, 1)) {
		t.Fatalf("Select = %+v, want peer 1 at its tried address", sel)
	}
}

func TestSelectUnavoidableRepeat(t *testing.T) {
	b := newBook(t, nil)
	fillGroups(b, 3, 2)
	sel := b.Select(t0, 6, nil)
	if len(sel) != 6 {
		t.Fatalf("selected %d of 6", len(sel))
	}
	first := map[Group]bool{}
	for _, e := range sel[:3] {
		first[e.Group] = true
	}
	if len(first) != 3 {
		t.Fatalf("the first three selected cover %d groups", len(first))
	}
}

func TestSample(t *testing.T) {
	b := newBook(t, &Config{MaxSample: 50})
	fillGroups(b, 20, 5)
	for i := range 10 {
		b.Add(t0, peerN(5000+i), []ma.Multiaddr{addr("/ip4/192.168.1.1/tcp/1"), addr("/memory/9")}, Source{Kind: SourceMDNS})
	}
	asker := GroupOf(ip4(11, 1, 1, 1))
	s := b.Sample(t0, 1000, SampleOptions{Asker: asker, OmitLocal: true})
	if len(s) != 50 {
		t.Fatalf("sample of %d, want MaxSample 50", len(s))
	}
	askers := 0
	perGroup := map[Group]int{}
	for _, e := range s {
		if e.Group == GroupLocal || e.Group == GroupMemory {
			t.Fatalf("a local address in a sample with OmitLocal: %v", e.Addr)
		}
		if e.Group == asker {
			askers++
		}
		perGroup[e.Group]++
	}
	if askers > (len(s)-askers)/4 {
		t.Fatalf("%d of %d sampled addresses in the asker's group", askers, len(s))
	}
	for g, n := range perGroup {
		if n > 3 {
			t.Fatalf("group %s has %d of 50 sampled from 20 groups", g, n)
		}
	}
	// Small sample: a quarter of the others from the asker's group at most.
	s = b.Sample(t0, 8, SampleOptions{Asker: asker})
	for _, e := range s {
		if e.Group == asker && len(s) < 5 {
			t.Fatalf("asker's group in a sample of %d", len(s))
		}
	}
	// A book of the asker's group only answers nothing.
	only := newBook(t, nil)
	fillGroups(only, 1, 5)
	if s := only.Sample(t0, 10, SampleOptions{Asker: asker}); len(s) != 0 {
		t.Fatalf("answered the asker with its own group only: %+v", s)
	}
	if s := b.Sample(t0, 10, SampleOptions{}); len(s) != 10 {
		t.Fatalf("sample without an asker: %d", len(s))
	}
	withLocal := b.Sample(t0, 50, SampleOptions{})
	local := 0
	for _, e := range withLocal {
		if e.Group == GroupLocal || e.Group == GroupMemory {
			local++
		}
	}
	if local == 0 {
		t.Fatal("no local address in a sample without OmitLocal")
	}
	_ = time.Second
}

// TestSelectReproducible: one key, one history, one draw, whatever the map order.
func TestSelectReproducible(t *testing.T) {
	draw := func() []string {
		b := newBook(t, nil)
		fillGroups(b, 30, 3)
		var out []string
		for _, e := range b.Select(t0, 40, nil) {
			out = append(out, e.Addr.String())
		}
		for _, e := range b.Sample(t0, 40, SampleOptions{}) {
			out = append(out, e.Addr.String())
		}
		return out
	}
	first := draw()
	for range 5 {
		if got := draw(); !slices.Equal(got, first) {
			t.Fatalf("two books with one key and one history drew differently:\n%v\n%v", first, got)
		}
	}
}
