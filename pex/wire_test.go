package pex

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"

	ma "github.com/multiformats/go-multiaddr"

	"github.com/tendril-p2p/tendril/peerrecord"
	"github.com/tendril-p2p/tendril/secio"
)

func newRecord(tb testing.TB, key *secio.PrivateKey, addrs ...string) *peerrecord.Record {
	tb.Helper()
	if key == nil {
		var err error
		if key, err = secio.GenerateKey(); err != nil {
			tb.Fatal(err)
		}
	}
	var as []ma.Multiaddr
	for _, a := range addrs {
		as = append(as, ma.StringCast(a))
	}
	r, err := peerrecord.New(key, 1, as)
	if err != nil {
		tb.Fatal(err)
	}
	return r
}

func TestRequest(t *testing.T) {
	for _, tc := range []struct {
		req  []byte
		want int
		err  error
	}{
		{appendRequest(nil, 5), 5, nil},
		{appendRequest(nil, 0), 32, nil},
		{appendRequest(nil, 1<<40), 32, nil},
		{nil, 0, ErrBadRequest},
		{[]byte{0x80}, 0, ErrBadRequest},
		{[]byte{5, 0}, 0, ErrBadRequest},
	} {
		got, err := parseRequest(tc.req, 32)
		if got != tc.want || !errors.Is(err, tc.err) {
			t.Errorf("parseRequest(%x) = %d, %v; want %d, %v", tc.req, got, err, tc.want, tc.err)
		}
	}
}

func TestAnswerRoundTrip(t *testing.T) {
	asker, _ := secio.GenerateKey()
	var recs []*peerrecord.Record
	for range 5 {
		recs = append(recs, newRecord(t, nil, "/ip4/11.1.1.1/tcp/1"))
	}
	recs = append(recs[:2], append([]*peerrecord.Record{newRecord(t, asker, "/ip4/12.1.1.1/tcp/1")}, recs[2:]...)...)
	ans := appendAnswer(nil, recs, asker.PeerID(), 4, 32<<10)
	raws, err := splitAnswer(ans, 32, 32<<10)
	if err != nil || len(raws) != 4 {
		t.Fatalf("split: %d records, %v", len(raws), err)
	}
	for i, raw := range raws {
		want := recs[i]
		if i >= 2 {
			want = recs[i+1] // the asker's own record was left out
		}
		if !bytes.Equal(raw, want.Bytes()) {
			t.Fatalf("record %d differs", i)
		}
	}
	// The byte cap: big records stop the answer short of it.
	var big []*peerrecord.Record
	for i := range 40 {
		var addrs []string
		for j := range 16 {
			addrs = append(addrs, "/dns/"+string(rune('a'+i%26))+string(rune('a'+j))+"-a-rather-long-host-name.example.com/tcp/4001/ws")
		}
		big = append(big, newRecord(t, nil, addrs...))
	}
	ans = appendAnswer(nil, big, secio.PeerID{}, 32, 16<<10)
	if len(ans) > 16<<10 {
		t.Fatalf("answer of %d bytes above the cap", len(ans))
	}
	if raws, err := splitAnswer(ans, 32, 16<<10); err != nil || len(raws) < 16 || len(raws) == 32 {
		t.Fatalf("capped answer: %d records, %v (records of %d bytes)", len(raws), err, len(big[0].Bytes()))
	}
}

func TestSplitAnswerRefuses(t *testing.T) {
	rec := newRecord(t, nil, "/ip4/11.1.1.1/tcp/1").Bytes()
	frame := func(count int, recs ...[]byte) []byte {
		b := binary.AppendUvarint(nil, uint64(count))
		for _, r := range recs {
			b = binary.AppendUvarint(b, uint64(len(r)))
			b = append(b, r...)
		}
		return b
	}
	many := make([][]byte, 33)
	for i := range many {
		many[i] = rec
	}
	for name, tc := range map[string]struct {
		ans []byte
		err error
	}{
		"oversize":          {append(frame(1, rec), make([]byte, 32<<10)...), ErrAnswerTooLarge},
		"too many":          {frame(33, many...), ErrAnswerTooLarge},
		"count claims many": {frame(1<<30, rec), ErrAnswerTooLarge},
		"empty":             {nil, ErrMalformedAnswer},
		"short":             {frame(2, rec), ErrMalformedAnswer},
		"trailing":          {append(frame(1, rec), 0), ErrMalformedAnswer},
		"zero length":       {frame(1, []byte{}), ErrMalformedAnswer},
		"over MaxSize":      {frame(1, make([]byte, peerrecord.MaxSize+1)), ErrMalformedAnswer},
		"length past end":   {append(binary.AppendUvarint([]byte{1}, 500), rec...), ErrMalformedAnswer},
	} {
		if raws, err := splitAnswer(tc.ans, 32, 32<<10); !errors.Is(err, tc.err) || raws != nil {
			t.Errorf("%s: %d records, %v; want %v", name, len(raws), err, tc.err)
		}
	}
	if raws, err := splitAnswer(frame(0), 32, 32<<10); err != nil || len(raws) != 0 {
		t.Errorf("an empty answer: %v", err)
	}
}
