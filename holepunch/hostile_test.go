package holepunch

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"os"
	"testing"
	"time"

	ma "github.com/multiformats/go-multiaddr"

	"github.com/tendril-p2p/tendril"
	"github.com/tendril-p2p/tendril/relay"
)

// attackerOn returns C's relayed session with B, C speaking the protocol by hand (no
// Puncher), and B's Puncher, whose own punches to C find no protocol there.
func attackerOn(t *testing.T, cfg Config) (*trio, *tendril.Session, *Puncher) {
	t.Helper()
	tr := newTrio(t)
	victim := newPuncher(t, tr.b, cfg)
	if err := tr.c.svc.AddProtocol(tendril.Protocol{Name: ProtocolName, Versions: []string{ProtocolVersion}}); err != nil {
		t.Fatal(err)
	}
	s, err := relay.Dial(ctxT(t, 10*time.Second), tr.c.svc, tr.res.Addr())
	if err != nil {
		t.Fatal(err)
	}
	return tr, s, victim
}

// exchange opens a stream on s, writes msgs, and returns what it reads back until the
// victim closes the stream.
func exchange(t *testing.T, s *tendril.Session, msgs ...[]byte) []byte {
	t.Helper()
	st, _, err := s.OpenStream(ctxT(t, 5*time.Second), ProtocolName)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	st.SetDeadline(time.Now().Add(5 * time.Second))
	for _, m := range msgs {
		if _, err := st.Write(m); err != nil {
			break
		}
	}
	var got []byte
	br := bufio.NewReader(st)
	for {
		b, err := br.ReadByte()
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				t.Fatal("the victim kept the stream open")
			}
			return got
		}
		got = append(got, b)
	}
}

// TestHostileRequests: what a peer sends on a relayed session costs the victim no dial
// unless it is a well-formed request with allowed addresses, and each bad request ends
// with its typed error in the report.
func TestHostileRequests(t *testing.T) {
	public := ma.StringCast("/ip4/198.51.100.7/tcp/4001")
	many := make([]ma.Multiaddr, 40)
	for i := range many {
		many[i] = ma.StringCast(fmt.Sprintf("/ip4/198.51.100.%d/tcp/4001", i+1))
	}
	tooMany := appendConnect(nil, connectMsg{addrs: many}, 40)
	sync := appendMsg(nil, []byte{msgSync})
	cases := []struct {
		name string
		msgs [][]byte
		want error
	}{
		{"unknown type", [][]byte{{3, 9, 9, 9}}, ErrMalformed},
		{"stalled", [][]byte{[]byte("GET / HTTP/1.1\r\n\r\n")}, os.ErrDeadlineExceeded}, // waits for 71 bytes
		{"zero length", [][]byte{{0}}, ErrMalformed},
		{"oversized", [][]byte{appendMsg(nil, make([]byte, maxMessage+1))}, ErrMalformed},
		{"too many addresses", [][]byte{tooMany, sync}, ErrMalformed},
		{"no SYNC", [][]byte{appendConnect(nil, connectMsg{addrs: []ma.Multiaddr{public}}, 8), appendConnect(nil, connectMsg{}, 8)}, ErrMalformed},
		{"loopback and private only", [][]byte{appendConnect(nil, connectMsg{addrs: []ma.Multiaddr{
			ma.StringCast("/ip4/127.0.0.1/tcp/1"), ma.StringCast("/ip4/10.0.0.1/tcp/1"), ma.StringCast("/ip4/192.168.1.1/tcp/22"),
		}}, 8), sync}, ErrNoAddrs},
		{"not TCP", [][]byte{appendConnect(nil, connectMsg{addrs: []ma.Multiaddr{ma.StringCast("/ip4/198.51.100.7/udp/53"), ma.StringCast("/dns/example.com/tcp/80")}}, 8), sync}, ErrNoAddrs},
	}
	// The victim's default Allow (public IPs only), with a window that lets every case in.
	tr, s, victim := attackerOn(t, Config{MaxAttempts: 3, AttemptWindow: time.Nanosecond, StreamTimeout: time.Second, Allow: publicOnly})
	// The victim's own punch of the relayed session (it has no public address to give)
	// ends first, so that the report is the answering side's.
	waitFor(t, "the victim's own punch to end", 15*time.Second, func() bool { return victim.Stats().Failed == 1 })
	for _, c := range cases {
		exchange(t, s, c.msgs...)
		waitFor(t, c.name+": the victim's report", 5*time.Second, func() bool {
			r, _ := victim.PeerReport(tr.c.svc.ID())
			return r.Role == RoleResponder && r.Err != nil && errors.Is(r.Err, c.want)
		})
	}
	if st := victim.Stats(); st.Dials != 0 {
		t.Fatalf("the victim dialled %d times: %+v", st.Dials, st)
	}
}

// publicOnly is the default Allow, restored after newPuncher set loopbackOK.
func publicOnly(a ma.Multiaddr) bool { return Config{}.withDefaults().Allow(a) }

// TestRefusedOffRelay: a request on a direct session is refused unread: there is nothing
// to punch, and no reason to dial what the peer names.
func TestRefusedOffRelay(t *testing.T) {
	a, b := newNode(t), newNode(t)
	victim := newPuncher(t, a, Config{})
	if err := b.svc.AddProtocol(tendril.Protocol{Name: ProtocolName, Versions: []string{ProtocolVersion}}); err != nil {
		t.Fatal(err)
	}
	s, err := b.svc.Dial(ctxT(t, 5*time.Second), a.addr)
	if err != nil {
		t.Fatal(err)
	}
	got := exchange(t, s, appendConnect(nil, connectMsg{addrs: []ma.Multiaddr{b.addr.Transport}}, 8), appendMsg(nil, []byte{msgSync}))
	if len(got) != 0 {
		t.Fatalf("the victim answered %d bytes", len(got))
	}
	if st := victim.Stats(); st.Refused != 1 || st.Served != 0 || st.Dials != 0 {
		t.Fatalf("stats %+v", st)
	}
}

// TestAttemptLimit: a peer gets MaxAttempts attempts per window; the next ones are refused
// unread, so that a relayed peer cannot make this node dial without end.
func TestAttemptLimit(t *testing.T) {
	tr, s, victim := attackerOn(t, Config{MaxAttempts: 2, AttemptTimeout: 200 * time.Millisecond})
	// Each request names an address nobody listens on: a dial that fails at once.
	req := appendConnect(nil, connectMsg{addrs: []ma.Multiaddr{ma.StringCast("/ip4/127.0.0.1/tcp/1")}}, 8)
	sync := appendMsg(nil, []byte{msgSync})
	for i := range 5 {
		got := exchange(t, s, req, sync)
		if answered := len(got) > 0; answered != (i < 2) {
			t.Fatalf("request %d: answered %v", i+1, answered)
		}
	}
	st := victim.Stats()
	if st.Served != 2 || st.Refused != 3 {
		t.Fatalf("stats %+v", st)
	}
	_ = tr
}

// TestBusyRefused: with every slot taken, a request is refused unread rather than queued.
func TestBusyRefused(t *testing.T) {
	_, s, victim := attackerOn(t, Config{MaxConcurrent: 1})
	victim.slot <- struct{}{} // the one slot, as a punch in flight would hold it
	defer func() { <-victim.slot }()
	got := exchange(t, s, appendConnect(nil, connectMsg{addrs: []ma.Multiaddr{ma.StringCast("/ip4/127.0.0.1/tcp/1")}}, 8), appendMsg(nil, []byte{msgSync}))
	if len(got) != 0 {
		t.Fatalf("a busy node answered %d bytes", len(got))
	}
	if st := victim.Stats(); st.Served != 0 || st.Dials != 0 || st.Refused == 0 {
		t.Fatalf("stats %+v", st)
	}
}

// TestGlobalAttemptRate: past the global burst, requests are refused unread whatever
// peer asks (identities cost nothing, so the per-peer limit alone does not bound them).
func TestGlobalAttemptRate(t *testing.T) {
	_, s, victim := attackerOn(t, Config{MaxAttempts: 100, AttemptWindow: time.Nanosecond,
		AttemptRate: 1, AttemptBurst: 3, AttemptTimeout: 100 * time.Millisecond})
	// The victim's own punch (refused: the attacker does not serve the protocol) takes one.
	waitFor(t, "the victim's own punch to end", 10*time.Second, func() bool { return victim.Stats().Failed == 1 })
	req := appendConnect(nil, connectMsg{addrs: []ma.Multiaddr{ma.StringCast("/ip4/127.0.0.1/tcp/1")}}, 8)
	sync := appendMsg(nil, []byte{msgSync})
	served := 0
	for range 6 {
		if len(exchange(t, s, req, sync)) > 0 {
			served++
		}
	}
	// 2 tokens left of the burst, and at most one more from a second's refill.
	if served < 2 || served > 3 {
		t.Fatalf("%d of 6 requests served, want 2 or 3: %+v", served, victim.Stats())
	}
}
