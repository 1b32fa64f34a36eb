package identify

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	ma "github.com/multiformats/go-multiaddr"
	"github.com/tendril-p2p/tendril"
	"github.com/tendril-p2p/tendril/peerrecord"
	"github.com/tendril-p2p/tendril/secio"
)

func testRecord(t testing.TB) *peerrecord.Record {
	t.Helper()
	key, err := secio.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	rec, err := peerrecord.New(key, 7, []ma.Multiaddr{ma.StringCast("/ip4/198.51.100.7/tcp/4001")})
	if err != nil {
		t.Fatal(err)
	}
	return rec
}

func testMessage(t testing.TB) message {
	return message{
		record:   testRecord(t).Bytes(),
		observed: ma.StringCast("/ip4/203.0.113.9/tcp/55123"),
		agent:    "test/1",
		protocols: []ProtoVersions{
			{Name: "/chat", Versions: []string{"1.0", "1.1"}},
			{Name: "/file", Versions: []string{"2"}},
		},
	}
}

func TestMessageRoundTrip(t *testing.T) {
	m := testMessage(t)
	b, n := m.appendTo(nil)
	if n != 2 {
		t.Fatalf("listed %d protocols, want 2", n)
	}
	got, err := parseMessage(b)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got.record, m.record) || !got.observed.Equal(m.observed) || got.agent != m.agent ||
		len(got.protocols) != 2 || got.protocols[0].Name != "/chat" || got.protocols[0].Versions[1] != "1.1" ||
		got.protocols[1].Versions[0] != "2" {
		t.Fatalf("round trip changed the message: %+v", got)
	}
	// No observed address, no protocols.
	m.observed, m.protocols = nil, nil
	b, _ = m.appendTo(nil)
	if got, err := parseMessage(b); err != nil || got.observed != nil || got.protocols != nil {
		t.Fatalf("minimal message: %+v, %v", got, err)
	}
}

// TestMessageFits: a node with the most protocols identify lists, each with long names
// and every version, still sends a message within MaxMessageSize that parses.
func TestMessageFits(t *testing.T) {
	m := testMessage(t)
	m.agent = strings.Repeat("a", MaxAgent)
	m.protocols = nil
	for i := range MaxProtocols {
		p := ProtoVersions{Name: "/" + strings.Repeat(string(rune('a'+i%26)), MaxProtocolName-3) + string(rune('A'+i/26)) + string(rune('A'+i%26))}
		for range MaxVersions {
			p.Versions = append(p.Versions, strings.Repeat("9", MaxVersionLen))
		}
		m.protocols = append(m.protocols, p)
	}
	b, n := m.appendTo(nil)
	if len(b) > MaxMessageSize || n == 0 || n == MaxProtocols {
		t.Fatalf("%d bytes listing %d protocols", len(b), n)
	}
	got, err := parseMessage(b)
	if err != nil || len(got.protocols) != n {
		t.Fatalf("parse: %d protocols, %v", len(got.protocols), err)
	}
}

func TestMessageRefused(t *testing.T) {
	good, _ := func() ([]byte, int) { m := testMessage(t); return m.appendTo(nil) }()
	enc := func(edit func(*message)) []byte {
		m := testMessage(t)
		edit(&m)
		b, _ := m.appendTo(nil)
		return b
	}
	// raw builds a message by hand, for what appendTo would never write.
	raw := func(protos ...[]byte) []byte {
		m := testMessage(t)
		m.protocols = nil
		b, _ := m.appendTo(nil)
		b = b[:len(b)-1] // the protocol count
		b = append(b, byte(len(protos)))
		for _, p := range protos {
			b = append(b, p...)
		}
		return b
	}
	proto := func(name string, versions ...string) []byte {
		b := appendBytes(nil, []byte(name))
		b = append(b, byte(len(versions)))
		for _, v := range versions {
			b = appendBytes(b, []byte(v))
		}
		return b
	}
	tooMany := make([][]byte, MaxProtocols+1)
	for i := range tooMany {
		tooMany[i] = proto("/p" + string(rune('A'+i)))
	}
	cases := []struct {
		name string
		b    []byte
		want error
	}{
		{"empty", nil, ErrMalformed},
		{"version", append([]byte{2}, good[1:]...), ErrMalformed},
		{"truncated", good[:len(good)-1], ErrMalformed},
		{"trailing", append(bytes.Clone(good), 0), ErrMalformed},
		{"oversized", append(bytes.Clone(good), make([]byte, MaxMessageSize)...), ErrTooLarge},
		{"no record", enc(func(m *message) { m.record = nil }), ErrMalformed},
		{"record too long", enc(func(m *message) { m.record = make([]byte, peerrecord.MaxSize+1) }), ErrTooLarge},
		{"agent too long", enc(func(m *message) { m.agent = strings.Repeat("a", MaxAgent+1) }), ErrTooLarge},
		{"agent not UTF-8", enc(func(m *message) { m.agent = "\xff" }), ErrMalformed},
		{"observed garbage", func() []byte {
			b := []byte{wireVersion}
			b = appendBytes(b, testRecord(t).Bytes())
			b = appendBytes(b, []byte{0xff, 0xff, 0x03})
			return append(b, 0, 0)
		}(), ErrMalformed},
		{"observed too long", func() []byte {
			b := []byte{wireVersion}
			b = appendBytes(b, testRecord(t).Bytes())
			b = appendBytes(b, make([]byte, MaxObservedAddr+1))
			return append(b, 0, 0)
		}(), ErrTooLarge},
		{"too many protocols", raw(tooMany...), ErrTooLarge},
		{"name without slash", raw(proto("chat", "1")), ErrMalformed},
		{"name too long", raw(proto("/"+strings.Repeat("n", MaxProtocolName), "1")), ErrTooLarge},
		{"name twice", raw(proto("/a", "1"), proto("/a", "2")), ErrMalformed},
		{"too many versions", raw(proto("/a", "1", "2", "3", "4", "5", "6", "7", "8", "9")), ErrTooLarge},
		{"empty version", raw(proto("/a", "")), ErrMalformed},
		{"version too long", raw(proto("/a", strings.Repeat("1", MaxVersionLen+1))), ErrTooLarge},
	}
	for _, c := range cases {
		if _, err := parseMessage(c.b); !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want %v", c.name, err, c.want)
		}
	}
	if _, err := parseMessage(good); err != nil {
		t.Fatalf("the good message: %v", err)
	}
}

// FuzzParseMessage: whatever the bytes, parsing returns a typed error or a message that
// encodes back to the same bytes.
func FuzzParseMessage(f *testing.F) {
	m := testMessage(f)
	b, _ := m.appendTo(nil)
	f.Add(b)
	f.Add([]byte{1, 0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := parseMessage(b)
		if err != nil {
			if !errors.Is(err, ErrMalformed) && !errors.Is(err, ErrTooLarge) {
				t.Fatalf("untyped error %v", err)
			}
			return
		}
		again, _ := m.appendTo(nil)
		if !bytes.Equal(again, b) {
			t.Fatalf("%x encodes back as %x", b, again)
		}
	})
}

// TestAdvertisedServedOnly: a protocol registered with no handler (this node only opens
// it, and refuses peers that open it) is not advertised as if this node served it.
func TestAdvertisedServedOnly(t *testing.T) {
	got := advertised([]tendril.Protocol{
		{Name: "/served", Versions: []string{"1"}, RequestHandler: tendril.RequestHandlerFunc(nil)},
		{Name: "/opener", Versions: []string{"1"}},
	})
	if len(got) != 1 || got[0].Name != "/served" {
		t.Fatalf("advertised %+v", got)
	}
}
