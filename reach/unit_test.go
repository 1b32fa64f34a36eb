package reach

import (
	"errors"
	"net/netip"
	"testing"
	"time"

	ma "github.com/multiformats/go-multiaddr"
	"github.com/tendril-p2p/tendril/addrbook"
	"github.com/tendril-p2p/tendril/identify"
	"github.com/tendril-p2p/tendril/secio"
)

func TestDecide(t *testing.T) {
	for _, c := range []struct {
		ok, failed int
		want       State
	}{
		{0, 0, Unknown}, {1, 0, Unknown}, {0, 1, Unknown}, {2, 0, Public}, {0, 2, Private},
		{1, 1, Unknown}, {2, 1, Public}, {1, 2, Private}, {2, 2, Unknown}, {3, 2, Public},
	} {
		if got := decide(c.ok, c.failed, 2); got != c.want {
			t.Errorf("decide(%d ok, %d failed) = %s, want %s", c.ok, c.failed, got, c.want)
		}
	}
	if overall([]State{Private, Unknown, Public}) != Public || overall([]State{Unknown, Private}) != Private || overall(nil) != Unknown {
		t.Fatal("overall")
	}
}

func TestCandidates(t *testing.T) {
	m := ma.StringCast
	obs := []identify.ObservedAddr{
		{Addr: m("/ip4/1.2.3.4/tcp/50000"), Groups: 2, Peers: 2},
		{Addr: m("/ip4/1.2.3.4/tcp/50001/ws"), Groups: 1, Peers: 1},
		{Addr: m("/memory/9"), Groups: 1, Peers: 1},
	}
	listen := []ma.Multiaddr{m("/ip4/0.0.0.0/tcp/4001"), m("/ip4/0.0.0.0/tcp/4002/ws"), m("/ip6/::/tcp/4001"), m("/ip4/5.6.7.8/tcp/4003")}
	mapped := []ma.Multiaddr{m("/ip4/9.9.9.9/tcp/7000"), m("/ip4/1.2.3.4/tcp/4001")}
	got := candidates(obs, listen, mapped, 16)
	want := []struct {
		addr string
		src  Source
	}{
		{"/ip4/9.9.9.9/tcp/7000", SourceMapped},
		{"/ip4/1.2.3.4/tcp/4001", SourceMapped | SourceObserved},
		{"/ip4/1.2.3.4/tcp/4003", SourceObserved},
		{"/ip4/1.2.3.4/tcp/4002/ws", SourceObserved},
		{"/ip4/5.6.7.8/tcp/4003", SourceListen},
	}
	if len(got) != len(want) {
		t.Fatalf("got %v", got)
	}
	for i, w := range want {
		if got[i].addr.String() != w.addr || got[i].source != w.src {
			t.Errorf("%d: %s %s, want %s %s", i, got[i].addr, got[i].source, w.addr, w.src)
		}
	}
	if n := len(candidates(obs, listen, mapped, 2)); n != 2 {
		t.Fatalf("limit 2: %d candidates", n)
	}
}

// The server's limits on a fixed clock.
func TestServeLimiter(t *testing.T) {
	cfg := Config{}
	cfg.setDefaults()
	cfg.MaxTrackedIPs = 2
	cfg.MaxConcurrentDials = 3
	cfg.DialRate = 2
	l := newServeLimiter(&cfg)
	t0 := time.Unix(1000, 0)
	a := requesterKey(netip.MustParseAddr("10.0.0.1"))
	for i := range DefaultServeBurst {
		if err := l.admit(t0, a); err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
	}
	if err := l.admit(t0, a); !errors.Is(err, ErrRateLimited) {
		t.Fatalf("over the burst: %v", err)
	}
	if err := l.admit(t0.Add(DefaultServeInterval), a); err != nil {
		t.Fatalf("an interval later: %v", err)
	}
	// IPv6 addresses of one /64 share a bucket.
	b1, b2 := requesterKey(netip.MustParseAddr("2001:db8::1")), requesterKey(netip.MustParseAddr("2001:db8::ffff"))
	if b1 != b2 {
		t.Fatal("one /64, two keys")
	}
	if err := l.admit(t0, b1); err != nil {
		t.Fatal(err)
	}
	if err := l.admit(t0, requesterKey(netip.MustParseAddr("10.0.0.3"))); !errors.Is(err, ErrBusy) {
		t.Fatalf("a third requester while two are tracked: %v", err)
	}
	// Once a's and b's buckets are full again, they are forgotten for a newcomer.
	later := t0.Add(time.Duration(DefaultServeBurst+1) * DefaultServeInterval)
	if err := l.admit(later, requesterKey(netip.MustParseAddr("10.0.0.3"))); err != nil {
		t.Fatalf("after the others refilled: %v", err)
	}
	// Refund gives one request back.
	c := requesterKey(netip.MustParseAddr("10.0.0.3"))
	for l.admit(later, c) == nil {
	}
	l.refund(c)
	if err := l.admit(later, c); err != nil {
		t.Fatalf("after a refund: %v", err)
	}
	// Dials: at most 3 at once, 2 a second with 4 at once.
	n := 0
	for l.startDial(t0) {
		n++
	}
	if n != 3 {
		t.Fatalf("%d dials at once, want 3", n)
	}
	l.endDial()
	l.endDial()
	l.endDial()
	if !l.startDial(t0) || l.startDial(t0) {
		t.Fatal("the rate's burst of 4 should allow exactly one more")
	}
	l.endDial()
	if !l.startDial(t0.Add(500 * time.Millisecond)) {
		t.Fatal("half a second later, one more")
	}
}

func TestWire(t *testing.T) {
	addrs := []ma.Multiaddr{ma.StringCast("/ip4/1.2.3.4/tcp/4001"), ma.StringCast("/ip6/2001:db8::1/tcp/4001/ws")}
	got, err := parseRequest(appendRequest(nil, addrs), 4)
	if err != nil || len(got) != 2 || !got[1].Equal(addrs[1]) {
		t.Fatalf("round trip: %v %v", got, err)
	}
	if _, err := parseRequest(appendRequest(nil, addrs), 1); !errors.Is(err, ErrMalformed) {
		t.Fatalf("over the server's max: %v", err)
	}
	res := []Result{ResultOK, ResultSkipped}
	back, err := parseReply(appendReply(nil, statusOK, res), 2)
	if err != nil || back[1] != ResultSkipped {
		t.Fatal(back, err)
	}
	for _, c := range []struct {
		b    []byte
		want error
	}{
		{appendReply(nil, statusRateLimited, nil), ErrRateLimited},
		{appendReply(nil, statusBusy, nil), ErrBusy},
		{appendReply(nil, statusOK, res[:1]), ErrMalformed},
		{[]byte{1, 0, 2, 0, 9}, ErrMalformed},
		{[]byte{1, 7, 0}, ErrMalformed},
		{append(appendReply(nil, statusOK, res), 0), ErrMalformed},
	} {
		if _, err := parseReply(c.b, 2); !errors.Is(err, c.want) {
			t.Errorf("%x: %v, want %v", c.b, err, c.want)
		}
	}
}

func FuzzParseRequest(f *testing.F) {
	f.Add(appendRequest(nil, []ma.Multiaddr{ma.StringCast("/ip4/1.2.3.4/tcp/4001")}))
	f.Add([]byte{1, 1, 1, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		addrs, err := parseRequest(b, MaxCandidatesLimit)
		if err != nil {
			return
		}
		again, err := parseRequest(appendRequest(nil, addrs), MaxCandidatesLimit)
		if err != nil || len(again) != len(addrs) {
			t.Fatalf("re-encoding %v: %v", addrs, err)
		}
	})
}

// An answer to a request sent before the address's answers were voided (a mapping made
// or removed while the request was out) is dropped; one sent after counts.
func TestStaleAnswerDropped(t *testing.T) {
	s := newNode(t, nodeOpts{ip: "127.1.0.1", noReach: true})
	c := newNode(t, nodeOpts{noReach: true})
	sess := c.dial(t, s)
	cfg := Config{}
	cfg.setDefaults()
	r := &Reach{cfg: cfg, servers: map[secio.PeerID]*serverState{}, now: time.Now}
	addr := ma.StringCast("/ip4/127.0.0.1/tcp/4001")
	st := &addrState{candidate: candidate{addr: addr}, results: map[addrbook.Group]result{}, pending: map[addrbook.Group]struct{}{}}
	r.addrs = []*addrState{st}
	old := ask{sess: sess, group: "g1", addrs: []ma.Multiaddr{addr}, epochs: []uint64{st.epoch}}
	st.pending["g1"] = struct{}{}
	r.voidLocked(addr, time.Now())
	r.recordLocked(old, []Result{ResultOK}, nil, time.Now())
	if len(st.results) != 0 || len(st.pending) != 0 || !st.lastOK.IsZero() {
		t.Fatalf("the stale answer counted: results %v, pending %v", st.results, st.pending)
	}
	fresh := ask{sess: sess, group: "g1", addrs: []ma.Multiaddr{addr}, epochs: []uint64{st.epoch}}
	r.recordLocked(fresh, []Result{ResultOK}, nil, time.Now())
	if len(st.results) != 1 || st.lastOK.IsZero() {
		t.Fatalf("the fresh answer did not count: results %v", st.results)
	}
}
