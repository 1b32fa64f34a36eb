package addrbook

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	ma "github.com/multiformats/go-multiaddr"
)

// snapshot lists every entry of the book, sorted, for comparison.
func snapshot(b *Book, now time.Time) []string {
	b.mu.Lock()
	var peers []*entry
	for _, list := range b.peers {
		peers = append(peers, list...)
	}
	b.mu.Unlock()
	var out []string
	for _, e := range peers {
		x := b.export(e)
		out = append(out, fmt.Sprintf("%v %v %v %v %v %v %v %v %d %q %v",
			x.Peer, x.Addr, x.Source, x.FirstSeen.UTC(), x.LastSeen.UTC(), x.LastAttempt.UTC(),
			x.LastSuccess.UTC(), x.Expires.UTC(), x.Failures, x.LastError, x.Tried))
	}
	slices.Sort(out)
	return out
}

// populated returns a book with new and tried entries, failures and several sources.
func populated(t *testing.T) *Book {
	b := newBook(t, nil)
	fillGroups(b, 30, 3)
	for g := range 10 {
		b.Good(t0.Add(time.Minute), peerN(g*100), ip4(11+g, 1, 1, 1))
	}
	b.Failed(t0.Add(2*time.Minute), peerN(101), ip4(12, 1, 1, 2), errors.New("refused"))
	b.Add(t0, peerN(9000), []ma.Multiaddr{addr("/dns/node.example.com/tcp/443/wss")}, FromPeer("ip4:50.1.0.0/16"))
	b.Add(t0, peerN(9001), []ma.Multiaddr{addr("/memory/42")}, Source{Kind: SourceUser})
	return b
}

func TestSaveLoadRoundTrip(t *testing.T) {
	b := populated(t)
	now := t0.Add(time.Hour)
	var buf bytes.Buffer
	if err := b.Save(&buf, now); err != nil {
		t.Fatal(err)
	}
	c := newBook(t, nil)
	n, err := c.Load(bytes.NewReader(buf.Bytes()), now)
	if err != nil {
		t.Fatal(err)
	}
	want, got := snapshot(b, now), snapshot(c, now)
	if n != len(want) || !slices.Equal(got, want) {
		t.Fatalf("loaded %d:\n%s\nwant %d:\n%s", n, strings.Join(got, "\n"), len(want), strings.Join(want, "\n"))
	}
	checkInvariants(t, c)

	// Another key places the entries elsewhere; the bounds still hold.
	other, _ := New(nil, [32]byte{9})
	if _, err := other.Load(bytes.NewReader(buf.Bytes()), now); err != nil {
		t.Fatal(err)
	}
	checkInvariants(t, other)

	// Expired entries are not saved.
	var late bytes.Buffer
	if err := b.Save(&late, t0.Add(b.Config().TriedTTL+time.Hour)); err != nil {
		t.Fatal(err)
	}
	if d := newBook(t, nil); mustLoad(t, d, late.Bytes(), t0) != 0 {
		t.Fatal("expired entries were saved")
	}
}

func mustLoad(t *testing.T, b *Book, data []byte, now time.Time) int {
	t.Helper()
	n, err := b.Load(bytes.NewReader(data), now)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func TestSaveFile(t *testing.T) {
	b := populated(t)
	now := t0.Add(time.Hour)
	dir := t.TempDir()
	path := filepath.Join(dir, "peers.json")
	if err := os.WriteFile(path, []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := b.SaveFile(path, now); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Fatalf("mode %v, want 0600", fi.Mode().Perm())
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Fatalf("%d files in the directory, want 1 (no temporary left)", len(ents))
	}
	c := newBook(t, nil)
	if _, err := c.LoadFile(path, now); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(snapshot(b, now), snapshot(c, now)) {
		t.Fatal("LoadFile(SaveFile) differs")
	}
	if err := b.SaveFile(filepath.Join(dir, "missing", "peers.json"), t0); err == nil {
		t.Fatal("SaveFile into a missing directory succeeded")
	}
	if _, err := c.LoadFile(filepath.Join(dir, "missing.json"), t0); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("LoadFile of a missing file: %v", err)
	}
}

func TestLoadErrors(t *testing.T) {
	small := &Config{NewBuckets: 2, NewSlots: 2, NewBucketsPerSource: 1, TriedBuckets: 1, TriedSlots: 2, TriedBucketsPerGroup: 1}
	entry := `{"peer":"%s","addr":"/ip4/11.1.1.%d/tcp/1","source":"identify","first_seen":"2026-12-04T10:00:00Z","last_seen":"2026-12-04T10:00:00Z"}`
	many := make([]string, 7)
	for i := range many {
		many[i] = fmt.Sprintf(entry, peerN(i), i)
	}
	for _, tc := range []struct {
		name string
		data string
		want error
	}{
		{"empty", "", ErrCorrupt},
		{"garbage", "\x00\xff not json", ErrCorrupt},
		{"wrong shape", `{"version":1,"entries":{"a":1}}`, ErrCorrupt},
		{"trailing data", `{"version":1,"entries":[]} {}`, ErrCorrupt},
		{"truncated", `{"version":1,"entries":[{"peer":`, ErrCorrupt},
		{"version", `{"version":3,"entries":[]}`, ErrVersion},
		{"no version", `{"entries":[]}`, ErrVersion},
		{"too many entries", `{"version":1,"entries":[` + strings.Join(many, ",") + `]}`, ErrFileTooLarge},
		{"too many bytes", `{"version":1,"entries":[],"pad":"` + strings.Repeat("x", 6*bytesPerEntry+6*bytesPerRecord+4096) + `"}`, ErrFileTooLarge},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := newBook(t, small)
			b.Add(t0, peerN(99), []ma.Multiaddr{ip4(11, 1, 1, 1)}, Source{Kind: SourceUser})
			before := snapshot(b, t0)
			n, err := b.Load(strings.NewReader(tc.data), t0)
			var le *LoadError
			if !errors.Is(err, tc.want) || !errors.As(err, &le) || n != 0 {
				t.Fatalf("Load = %d, %v; want a *LoadError wrapping %v", n, err, tc.want)
			}
			if !slices.Equal(before, snapshot(b, t0)) {
				t.Fatal("a failed Load changed the book")
			}
		})
	}
}

// TestLoadHostileEntries: bad entries are skipped, times from the future clamped,
// failures bounded, and the tables' rules apply.
func TestLoadHostileEntries(t *testing.T) {
	future := t0.Add(100 * 365 * 24 * time.Hour).Format(time.RFC3339)
	good := peerN(1).String()
	data := `{"version":1,"entries":[
	{"peer":"nope","addr":"/ip4/11.1.1.1/tcp/1","source":"identify"},
	{"peer":"` + good + `","addr":"/nope/1","source":"identify"},
	{"peer":"` + good + `","addr":"/ip4/11.1.1.1/tcp/1","source":"martian"},
	{"peer":"` + good + `","addr":"/dns/` + strings.Repeat("a", 2000) + `/tcp/1","source":"user"},
	{"peer":"` + good + `","addr":"/ip4/11.1.1.1/tcp/1","source":"identify","first_seen":"` + future + `","last_seen":"` + future + `","last_success":"` + future + `","failures":-5,"tried":true,"last_error":"` + strings.Repeat("e", 5000) + `"},
	{"peer":"` + good + `","addr":"/ip4/11.1.1.1/tcp/1","source":"user"},
	{"peer":"` + peerN(2).String() + `","addr":"/ip4/12.1.1.1/tcp/1","source":"peer","via":"ip4:1.1.0.0/16","failures":1000000,"last_seen":"2026-12-04T09:00:00Z"}
	]}`
	b := newBook(t, nil)
	n, err := b.Load(strings.NewReader(data), t0)
	if err != nil {
		t.Fatal(err)
	}
	if n != 2 {
		t.Fatalf("kept %d entries, want 2", n)
	}
	es := b.Addrs(t0, peerN(1))
	if len(es) != 1 {
		t.Fatalf("peer 1: %+v", es)
	}
	e := es[0]
	if !e.LastSeen.Equal(t0) || !e.LastSuccess.Equal(t0) || !e.FirstSeen.Equal(t0) || e.Failures != 0 ||
		len(e.LastError) != maxErrorLen || !e.Tried || e.Source.Kind != SourceIdentify || !e.Expires.Equal(t0.Add(b.Config().TriedTTL)) {
		t.Fatalf("future entry not clamped: %+v", e)
	}
	es = b.Addrs(t0, peerN(2))
	if len(es) != 1 || es[0].Failures != b.Config().MaxFailuresTried || es[0].Source.Via != "ip4:1.1.0.0/16" {
		t.Fatalf("peer 2: %+v", es)
	}
	checkInvariants(t, b)
}

func FuzzLoad(f *testing.F) {
	b := newBook(f, nil)
	fillGroups(b, 5, 2)
	b.Good(t0, peerN(0), ip4(11, 1, 1, 1))
	var buf bytes.Buffer
	if err := b.Save(&buf, t0); err != nil {
		f.Fatal(err)
	}
	f.Add(buf.Bytes())
	f.Add([]byte(`{"version":1,"entries":[]}`))
	f.Add([]byte(`{"version":1,"entries":[{"peer":"` + peerN(1).String() + `","addr":"/memory/1","source":"peer","via":"x","tried":true,"last_success":"2026-01-01T00:00:00Z"}]}`))
	f.Add([]byte("not json"))
	small := &Config{MaxAddrsPerPeer: 2, MaxPeers: 3, NewBuckets: 2, NewSlots: 2, NewBucketsPerSource: 1, TriedBuckets: 1, TriedSlots: 2, TriedBucketsPerGroup: 1}
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, cfg := range []*Config{nil, small} {
			c := newBook(t, cfg)
			n, err := c.Load(bytes.NewReader(data), t0)
			var le *LoadError
			if err != nil && (!errors.As(err, &le) || n != 0) {
				t.Fatalf("Load = %d, %v: not a *LoadError", n, err)
			}
			checkInvariants(t, c)
			if a, _ := c.Len(); a != n {
				t.Fatalf("Load kept %d, the book holds %d", n, a)
			}
			// What was loaded saves and loads again to the same book.
			var out bytes.Buffer
			if err := c.Save(&out, t0); err != nil {
				t.Fatal(err)
			}
			d := newBook(t, cfg)
			if _, err := d.Load(bytes.NewReader(out.Bytes()), t0); err != nil {
				t.Fatalf("reloading a saved book: %v", err)
			}
			checkInvariants(t, d)
		}
	})
}
