package peerrecord

import (
	"bytes"
	"errors"
	"fmt"
	"testing"
	"time"

	ma "github.com/multiformats/go-multiaddr"
	"github.com/tendril-p2p/tendril/secio"
)

func testKey(t testing.TB) *secio.PrivateKey {
	t.Helper()
	k, err := secio.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func addrs(t testing.TB, ss ...string) []ma.Multiaddr {
	t.Helper()
	out := make([]ma.Multiaddr, len(ss))
	for i, s := range ss {
		a, err := ma.NewMultiaddr(s)
		if err != nil {
			t.Fatal(err)
		}
		out[i] = a
	}
	return out
}

func TestRoundTrip(t *testing.T) {
	k := testKey(t)
	in := addrs(t, "/ip4/198.51.100.7/tcp/4001", "/ip6/2001:db8::1/tcp/4001/ws", "/dns/example.com/tcp/443/wss")
	r, err := New(k, 42, in)
	if err != nil {
		t.Fatal(err)
	}
	got, err := Parse(r.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	if got.Peer() != k.PeerID() || got.Seq() != 42 || len(got.Addrs()) != 3 {
		t.Fatalf("parsed %v", got)
	}
	for i, a := range got.Addrs() {
		if !a.Equal(in[i]) {
			t.Fatalf("address %d: %s, want %s", i, a, in[i])
		}
	}
	if !bytes.Equal(got.Bytes(), r.Bytes()) {
		t.Fatal("re-encoding differs")
	}
	empty, err := New(k, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Parse(empty.Bytes()); err != nil {
		t.Fatalf("record without addresses: %v", err)
	}
}

// TestEveryFlippedBitIsRefused: no single-bit change anywhere in a record is accepted.
func TestEveryFlippedBitIsRefused(t *testing.T) {
	r, err := New(testKey(t), 7, addrs(t, "/ip4/198.51.100.7/tcp/4001"))
	if err != nil {
		t.Fatal(err)
	}
	b := r.Bytes()
	for i := range len(b) * 8 {
		c := bytes.Clone(b)
		c[i/8] ^= 1 << (i % 8)
		if _, err := Parse(c); err == nil {
			t.Fatalf("bit %d flipped: accepted", i)
		} else if !errors.Is(err, ErrMalformed) && !errors.Is(err, ErrBadSignature) && !errors.Is(err, ErrTooLarge) {
			t.Fatalf("bit %d flipped: untyped error %v", i, err)
		}
	}
}

// TestForgedRecords: a record claiming one key and signed by another, one with its address
// replaced, and one cut or extended, are refused.
func TestForgedRecords(t *testing.T) {
	owner, forger := testKey(t), testKey(t)
	r, err := New(owner, 7, addrs(t, "/ip4/198.51.100.7/tcp/4001"))
	if err != nil {
		t.Fatal(err)
	}
	f, err := New(forger, 7, addrs(t, "/ip4/203.0.113.9/tcp/4001"))
	if err != nil {
		t.Fatal(err)
	}
	// The owner's key with the forger's body and signature.
	forged := bytes.Clone(f.Bytes())
	copy(forged[1:1+keySize], owner.Public().Bytes())
	if _, err := Parse(forged); !errors.Is(err, ErrBadSignature) {
		t.Fatalf("forged key: %v, want ErrBadSignature", err)
	}
	for name, b := range map[string][]byte{
		"truncated": r.Bytes()[:len(r.Bytes())-1],
		"trailing":  append(bytes.Clone(r.Bytes()), 0),
		"empty":     nil,
	} {
		if _, err := Parse(b); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func TestLimits(t *testing.T) {
	k := testKey(t)
	many := make([]string, MaxAddrs+1)
	for i := range many {
		many[i] = fmt.Sprintf("/ip4/198.51.100.%d/tcp/4001", i)
	}
	if _, err := New(k, 1, addrs(t, many[:MaxAddrs]...)); err != nil {
		t.Fatalf("%d addresses: %v", MaxAddrs, err)
	}
	if _, err := New(k, 1, addrs(t, many...)); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("%d addresses: %v, want ErrTooLarge", len(many), err)
	}
	long := make([]string, MaxAddrs)
	for i := range long {
		long[i] = fmt.Sprintf("/dns/%060d.example/tcp/443/wss", i)
	}
	if _, err := New(k, 1, addrs(t, long...)); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("%d long addresses: %v, want ErrTooLarge", len(long), err)
	}
	if _, err := New(k, 1, addrs(t, many[0], many[0])); !errors.Is(err, ErrMalformed) {
		t.Fatalf("duplicate address: %v, want ErrMalformed", err)
	}
	if _, err := Parse(make([]byte, MaxSize+1)); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("oversized: %v, want ErrTooLarge", err)
	}
}

func TestSupersedes(t *testing.T) {
	a, b := testKey(t), testKey(t)
	a1, _ := New(a, 1, nil)
	a2, _ := New(a, 2, nil)
	b3, _ := New(b, 3, nil)
	switch {
	case !a2.Supersedes(a1), a1.Supersedes(a2), a1.Supersedes(a1):
		t.Fatal("order within one peer")
	case b3.Supersedes(a2):
		t.Fatal("another peer's record superseded")
	case !a1.Supersedes(nil):
		t.Fatal("a record does not supersede none")
	}
}

func TestNextSeq(t *testing.T) {
	now := time.Unix(1000, 5)
	if got := NextSeq(now, 0); got != 1000_000_000_005 {
		t.Fatalf("NextSeq = %d", got)
	}
	if got := NextSeq(now, 2000_000_000_000); got != 2000_000_000_001 {
		t.Fatalf("NextSeq after a later record = %d", got)
	}
}

func FuzzParse(f *testing.F) {
	k, _ := secio.GenerateKey()
	r, _ := New(k, 9, addrs(f, "/ip4/198.51.100.7/tcp/4001", "/memory/3"))
	f.Add(r.Bytes())
	f.Add([]byte{1})
	f.Fuzz(func(t *testing.T, b []byte) {
		got, err := Parse(b)
		if err != nil {
			return
		}
		if !bytes.Equal(got.Bytes(), b) {
			t.Fatal("accepted bytes differ from the record's encoding")
		}
		again, err := New(k, got.Seq(), got.Addrs())
		if err == nil && got.Peer() == k.PeerID() && !bytes.Equal(again.Bytes()[:len(b)-sigSize], b[:len(b)-sigSize]) {
			t.Fatal("re-signing the parsed record gives another body")
		}
	})
}

func BenchmarkParse(b *testing.B) {
	r, _ := New(testKey(b), 9, addrs(b, "/ip4/198.51.100.7/tcp/4001", "/ip4/198.51.100.7/tcp/4002/ws"))
	raw := r.Bytes()
	b.SetBytes(int64(len(raw)))
	for b.Loop() {
		if _, err := Parse(raw); err != nil {
			b.Fatal(err)
		}
	}
}

func TestLists(t *testing.T) {
	in := addrs(t, "/ip4/198.51.100.7/tcp/4001", "/memory/3")
	r, err := New(testKey(t), 1, in)
	if err != nil {
		t.Fatal(err)
	}
	p, err := Parse(r.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	for _, rec := range []*Record{r, p} {
		for _, a := range in {
			if !rec.Lists(a.Bytes()) {
				t.Errorf("%v does not list %s", rec, a)
			}
		}
		if rec.Lists(addrs(t, "/ip4/198.51.100.7/tcp/4002")[0].Bytes()) {
			t.Errorf("%v lists an address it does not have", rec)
		}
	}
}
