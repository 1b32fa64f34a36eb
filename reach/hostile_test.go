package reach

import (
	"context"
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	ma "github.com/multiformats/go-multiaddr"
	"github.com/tendril-p2p/tendril"
	"github.com/tendril-p2p/tendril/transport"
)

// requester is a peer that sends reach requests by hand, ignoring the client's rules.
func requester(t *testing.T, ip string) *node {
	return newNode(t, nodeOpts{ip: ip, noReach: true, protocol: []tendril.Protocol{{Name: ProtocolName, Versions: []string{ProtocolVersion}}}})
}

// victim is a TCP listener that counts the connections it gets.
func victim(t *testing.T, ip string) (ma.Multiaddr, *atomic.Int64) {
	t.Helper()
	ln, err := net.Listen("tcp", ip+":0")
	if err != nil {
		t.Fatal(err)
	}
	var n atomic.Int64
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			n.Add(1)
			c.Close()
		}
	}()
	t.Cleanup(func() { ln.Close(); <-done })
	m, _ := ma.NewMultiaddr("/ip4/" + ip + "/tcp/" + itoa(ln.Addr().(*net.TCPAddr).Port))
	return m, &n
}

func itoa(n int) string { return (&net.TCPAddr{Port: n}).String()[1:] }

func request(t *testing.T, sess *tendril.Session, addrs ...ma.Multiaddr) ([]Result, error) {
	t.Helper()
	reply, err := sess.Request(context.Background(), ProtocolName, appendRequest(nil, addrs))
	if err != nil {
		return nil, err
	}
	return parseReply(reply, len(addrs))
}

// Dial-backs aimed at a third party's address are refused and never dialled: the
// requester connects from 127.0.0.1, the victim listens on 127.9.0.1.
func TestThirdPartyRefused(t *testing.T) {
	s := newNode(t, nodeOpts{ip: "127.1.0.1"})
	m := requester(t, "")
	vic, accepted := victim(t, "127.9.0.1")
	sess := m.dial(t, s)
	others := []ma.Multiaddr{
		vic,
		ma.StringCast("/dns4/localhost/tcp/1"),
		ma.StringCast("/memory/7"),
		ma.StringCast("/ip6/::1/tcp/1"),
	}
	for range 5 {
		res, err := request(t, sess, others...)
		if err != nil {
			t.Fatal(err)
		}
		for i, r := range res {
			if r != ResultRefused {
				t.Fatalf("candidate %s: %s, want refused", others[i], r)
			}
		}
	}
	if d := s.trans.dials.Load(); d != 0 {
		t.Fatalf("the server dialled %d times", d)
	}
	if n := accepted.Load(); n != 0 {
		t.Fatalf("the victim got %d connections", n)
	}
	if st := s.r.Stats(); st.Refused != 20 {
		t.Fatalf("stats %+v, want 20 refused", st)
	}
}

// A flood of requests from one address gets ServeBurst of them served, whatever peer IDs
// it uses; the rest are refused without a dial.
func TestRequestFlood(t *testing.T) {
	s := newNode(t, nodeOpts{ip: "127.1.0.1"})
	target, accepted := victim(t, "127.0.0.1") // the requesters' own IP: allowed, but rate-limited
	served, limited := 0, 0
	for range 4 { // four identities on one address
		m := requester(t, "")
		sess := m.dial(t, s)
		for range 10 {
			_, err := request(t, sess, target)
			switch {
			case err == nil:
				served++
			case errors.Is(err, ErrRateLimited):
				limited++
			default:
				t.Fatal(err)
			}
		}
	}
	if served != DefaultServeBurst || limited != 40-DefaultServeBurst {
		t.Fatalf("%d served, %d rate limited; want %d served", served, limited, DefaultServeBurst)
	}
	if d := s.trans.dials.Load(); d != DefaultServeBurst {
		t.Fatalf("%d dials, want %d", d, DefaultServeBurst)
	}
	waitFor(t, "the victim's connections", func() bool { return accepted.Load() == DefaultServeBurst })
}

// Requests from many addresses at once never run more than MaxConcurrentDials
// dial-backs; a request that finds no room is told so (ErrBusy, or candidates skipped).
func TestConcurrencyBound(t *testing.T) {
	s := newNode(t, nodeOpts{ip: "127.1.0.1", cfg: Config{MaxConcurrentDials: 2, DialRate: 1000}})
	s.trans.hold = make(chan struct{})
	var wg sync.WaitGroup
	var busy, answered atomic.Int64
	for i := range 6 {
		ip := "127.0.0." + itoa(10+i)
		m := requester(t, "")
		sess := m.dialFrom(t, s, ip)
		c1, _ := victim(t, ip)
		c2, _ := victim(t, ip)
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := request(t, sess, c1, c2)
			if errors.Is(err, ErrBusy) {
				busy.Add(1)
			} else if err == nil {
				answered.Add(1)
			}
		}()
	}
	waitFor(t, "the busy replies", func() bool { return busy.Load() >= 4 })
	if r := s.trans.maxRunning.Load(); r > 2 {
		t.Fatalf("%d dial-backs at once, want at most 2", r)
	}
	close(s.trans.hold)
	wg.Wait()
	if answered.Load()+busy.Load() != 6 || s.trans.maxRunning.Load() > 2 {
		t.Fatalf("%d answered, %d busy, %d at once", answered.Load(), busy.Load(), s.trans.maxRunning.Load())
	}
}

// A server that confirms everything cannot make a node behind a NAT public: one group
// decides nothing, and a second group's failure leaves it unknown; a third makes it
// private.
func TestLiarCannotDecide(t *testing.T) {
	liar := newNode(t, nodeOpts{ip: "127.1.0.1", noReach: true, protocol: []tendril.Protocol{{
		Name: ProtocolName, Versions: []string{ProtocolVersion},
		RequestHandler: tendril.RequestHandlerFunc(func(_ *tendril.Context, req []byte) ([]byte, error) {
			addrs, err := parseRequest(req, MaxCandidatesLimit)
			if err != nil {
				return nil, err
			}
			res := make([]Result, len(addrs))
			return appendReply(nil, statusOK, res), nil // all ResultOK
		}),
	}}})
	s2 := newNode(t, nodeOpts{ip: "127.2.0.1"})
	s3 := newNode(t, nodeOpts{ip: "127.3.0.1"})
	b := newNode(t, nodeOpts{ip: "127.0.0.1", gate: refuseInbound{}})
	b.dial(t, liar)
	b.dial(t, s2)
	waitFor(t, "two answers", func() bool { return b.r.Stats().Answered >= 2 })
	if got := b.r.Reachability(); got != Unknown {
		t.Fatalf("with a liar and an honest server: %s, want unknown; %+v", got, b.r.Status())
	}
	b.dial(t, s3)
	waitState(t, b.r, Private, 5*time.Second)
}

// Malformed requests are refused with a typed error, before anything is dialled.
func TestMalformedRequest(t *testing.T) {
	s := newNode(t, nodeOpts{ip: "127.1.0.1"})
	m := requester(t, "")
	sess := m.dial(t, s)
	for _, req := range [][]byte{nil, {1}, {2, 1}, {1, 0}, {1, 5}, {1, 1, 0}, {1, 1, 200}, {1, 1, 1, 0xff}, make([]byte, 5000)} {
		_, err := sess.Request(context.Background(), ProtocolName, req)
		var re *tendril.RequestError
		if !errors.As(err, &re) {
			t.Fatalf("request %x: %v, want a RequestError", req, err)
		}
	}
	if st := s.r.Stats(); st.Malformed != 9 || s.trans.dials.Load() != 0 {
		t.Fatalf("stats %+v, %d dials", st, s.trans.dials.Load())
	}
}

// dialFrom dials to from the local IP ip.
func (n *node) dialFrom(t *testing.T, to *node, ip string) *tendril.Session {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}}
	_, hostport, _, _ := transport.HostPort(to.addr.Transport)
	c, err := d.Dial("tcp", hostport)
	if err != nil {
		t.Fatal(err)
	}
	s, err := n.svc.DialConn(context.Background(), c, to.addr)
	if err != nil {
		t.Fatal(err)
	}
	return s
}
