package identify

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	ma "github.com/multiformats/go-multiaddr"
	"github.com/tendril-p2p/tendril"
	"github.com/tendril-p2p/tendril/peerrecord"
	"github.com/tendril-p2p/tendril/secio"
	"github.com/tendril-p2p/tendril/transport/memory"
)

// attacker is a node that speaks "/tendril/identify" with a handler of its own: it sends
// whatever the test makes it send, and ignores what it gets.
type attacker struct {
	*node
	streams chan *tendril.Context // each stream it opens, once Connected
	ended   chan struct{}         // a value per stream that ended
}

func newAttacker(t testing.TB, network *memory.Network) *attacker {
	t.Helper()
	a := &attacker{streams: make(chan *tendril.Context, 4), ended: make(chan struct{}, 4)}
	a.node = newNode(t, network, tendril.Protocol{
		Name:          ProtocolName,
		Versions:      []string{ProtocolVersion},
		OpenOnConnect: true,
		Handler: tendril.HandlerFuncs{
			OnConnected:    func(c *tendril.Context, _ string) { a.streams <- c },
			OnDisconnected: func(*tendril.Context) { a.ended <- struct{}{} },
		},
	})
	return a
}

// attack dials the victim and returns the identify stream the attacker opened.
func (a *attacker) attack(t testing.TB, victim *node) (*tendril.Session, *tendril.Context) {
	t.Helper()
	sess := dial(t, a.node, victim)
	select {
	case c := <-a.streams:
		return sess, c
	case <-time.After(5 * time.Second):
		t.Fatal("identify stream not opened")
		return nil, nil
	}
}

func (a *attacker) waitEnded(t testing.TB, what string) {
	t.Helper()
	select {
	case <-a.ended:
	case <-time.After(5 * time.Second):
		t.Fatalf("the victim did not close the stream after %s", what)
	}
}

// update encodes an identify message with a record of key's, numbered seq.
func update(t testing.TB, key *secio.PrivateKey, seq uint64) []byte {
	t.Helper()
	rec, err := peerrecord.New(key, seq, []ma.Multiaddr{ma.StringCast("/ip4/198.51.100.66/tcp/4001")})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := (&message{record: rec.Bytes(), agent: "evil/1", protocols: []ProtoVersions{{Name: "/x", Versions: []string{"1"}}}}).appendTo(nil)
	return b
}

// TestHostileMessages: each bad message closes the attacker's identify stream with its
// typed error, and only that stream: the session stays, and so does everything else.
func TestHostileMessages(t *testing.T) {
	network := memory.NewNetwork(memory.NetworkConfig{})
	victim := newIdentified(t, network, Config{})
	stranger, err := secio.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		msg  func(a *attacker) []byte
		want []error
	}{
		{"garbage", func(*attacker) []byte { return []byte("GET / HTTP/1.1\r\n\r\n") }, []error{ErrMalformed}},
		{"oversized", func(*attacker) []byte { return make([]byte, MaxMessageSize+1) }, []error{ErrTooLarge}},
		{"another key's record", func(*attacker) []byte { return update(t, stranger, 1) }, []error{ErrWrongPeer}},
		{"forged signature", func(a *attacker) []byte {
			b := update(t, a.key, 1)
			// The record ends with its signature; the message goes on with the observed
			// address (empty), the agent and the protocols.
			b[len(b)-len("evil/1")-1-1-1-len("/x")-1-1-1-len("1")-2] ^= 1
			return b
		}, []error{ErrBadRecord, peerrecord.ErrBadSignature}},
	}
	for k, c := range cases {
		a := newAttacker(t, network)
		sess, stream := a.attack(t, victim.node)
		if err := stream.Send(c.msg(a)); err != nil {
			t.Fatal(err)
		}
		a.waitEnded(t, c.name)
		// The victim closes the stream, then reports why: the attacker may see the end first.
		errs := victim.errors()
		for end := time.Now().Add(5 * time.Second); len(errs) <= k && time.Now().Before(end); errs = victim.errors() {
			time.Sleep(time.Millisecond)
		}
		if len(errs) != k+1 {
			t.Fatalf("%s: victim reported %v", c.name, errs)
		}
		for _, w := range c.want {
			if !errors.Is(errs[k], w) {
				t.Errorf("%s: error %v, want %v", c.name, errs[k], w)
			}
		}
		if _, ok := victim.id.Info(a.svc.ID()); ok {
			t.Errorf("%s: the attacker has an Info", c.name)
		}
		select {
		case <-sess.Done():
			t.Errorf("%s: the session was closed, not the stream", c.name)
		default:
		}
	}
	if s := victim.id.Stats(); s.Rejected != uint64(len(cases)) || s.Accepted != 0 {
		t.Errorf("stats: %+v", s)
	}
}

// TestStaleIgnored: a record not newer than the one accepted is ignored, without closing
// anything; the same record again is accepted without a second verification.
func TestStaleIgnored(t *testing.T) {
	network := memory.NewNetwork(memory.NetworkConfig{})
	victim := newIdentified(t, network, Config{})
	a := newAttacker(t, network)
	_, stream := a.attack(t, victim.node)
	for _, seq := range []uint64{100, 50, 100, 100} {
		if err := stream.Send(update(t, a.key, seq)); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, 5*time.Second, "four messages received", func() bool { return victim.id.Stats().Received == 4 })
	info, ok := victim.id.Info(a.svc.ID())
	if !ok || info.Record.Seq() != 100 {
		t.Fatalf("info %v, %v", info.Record, ok)
	}
	// 100 verified, 50 verified and stale, 100 again: a new signature (Ed25519 here is
	// deterministic, so the same bytes) needs none; the fourth the same.
	if s := victim.id.Stats(); s.Stale != 1 || s.Verified != 2 || s.Accepted != 3 || s.Rejected != 0 {
		t.Errorf("stats: %+v", s)
	}
}

// TestHostileFlood: a peer sending valid-looking updates (each a freshly signed record)
// 1,000 times a second for 3 s makes the victim verify at most its bucket's allowance,
// has its identify stream closed with ErrFlood, cannot get a fresh allowance by opening
// the stream again, and leaves the victim's other sessions unaffected: an honest peer's
// push arrives during the flood. With the cut-off disabled (as if the attacker ignored
// the stream's close and kept sending), the 3,000 updates still cost at most the
// bucket's verifications.
func TestHostileFlood(t *testing.T) {
	t.Run("cut off", func(t *testing.T) { testFlood(t, Config{}) })
	t.Run("kept open", func(t *testing.T) { testFlood(t, Config{MaxDropped: 1 << 30}) })
}

func testFlood(t *testing.T, cfg Config) {
	network := memory.NewNetwork(memory.NetworkConfig{})
	victim := newIdentified(t, network, cfg)
	cutOff := cfg.MaxDropped == 0
	honest := newIdentified(t, network, Config{})
	dial(t, honest.node, victim.node)
	waitFor(t, 5*time.Second, "the honest peer identified", func() bool { _, ok := victim.id.Info(honest.svc.ID()); return ok })
	before := victim.id.Stats()

	a := newAttacker(t, network)
	sess, stream := a.attack(t, victim.node)
	start := time.Now()
	seq := uint64(1)
	sent := 0
	pushed := false
	for tick := time.NewTicker(10 * time.Millisecond); time.Since(start) < 3*time.Second; <-tick.C {
		for range 10 {
			if stream.Send(update(t, a.key, seq)) == nil {
				sent++
			}
			seq++
		}
		if !pushed && time.Since(start) > time.Second {
			pushed = true
			if err := honest.svc.AddProtocol(tendril.Protocol{Name: "/during", Versions: []string{"1"}, Handler: tendril.HandlerFuncs{}}); err != nil {
				t.Fatal(err)
			}
		}
	}
	if cutOff {
		a.waitEnded(t, "the flood")
	} else {
		waitFor(t, 5*time.Second, "every update received", func() bool {
			return victim.id.Stats().Received-before.Received >= uint64(sent)
		})
	}
	after := victim.id.Stats()
	allowance := uint64(victim.id.cfg.UpdateBurst) + uint64(3*time.Second/victim.id.cfg.UpdateInterval) + 1
	if v := after.Verified - before.Verified; v > allowance {
		t.Errorf("the flood made the victim verify %d records, allowance %d", v, allowance)
	}
	info, _ := victim.id.Info(honest.svc.ID())
	if !hasProto(info.Protocols, "/during") {
		t.Error("the honest peer's push made during the flood did not arrive")
	}
	t.Logf("attacker sent %d updates; victim: %+v", sent, after)
	errs := victim.errors()
	if !cutOff {
		// Signing every update is the attacker's cost: under the race detector on a loaded
		// machine it sends fewer than 3,000, and a thousand make the point.
		if len(errs) != 0 || sent < 1000 {
			t.Fatalf("kept open: %d sent, errors %v", sent, errs)
		}
		return
	}
	if len(errs) != 1 || !errors.Is(errs[0], ErrFlood) {
		t.Fatalf("victim reported %v, want ErrFlood", errs)
	}

	// Opening the stream again gives no new allowance: it is closed at once, unread.
	if err := sess.OpenProtocol(context.Background(), ProtocolName); err != nil {
		t.Fatal(err)
	}
	stream = <-a.streams
	_ = stream.Send(update(t, a.key, seq+1))
	a.waitEnded(t, "the stream was opened again")
	if v := victim.id.Stats().Verified; v != after.Verified {
		t.Errorf("a reopened stream got %d more verifications", v-after.Verified)
	}
	if _, ok := victim.id.Info(a.svc.ID()); ok {
		t.Error("the flooder has an Info")
	}
	if n := len(victim.id.Record().Addrs()); n != 1 || !slices.ContainsFunc(victim.id.Record().Addrs(), victim.addr.Transport.Equal) {
		t.Errorf("victim's own record changed: %v", victim.id.Record())
	}
}
