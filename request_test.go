package tendril

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tendril-p2p/tendril/protocol"
)

// requestPair returns a session from a client Service to a server Service that serves the
// given protocols; the client registers each by name with no handler (it only requests).
func requestPair(t *testing.T, cfg Config, protos ...Protocol) (*Session, *Service, *Service) {
	t.Helper()
	server := cfg
	server.Protocols = protos
	srv := newService(t, server)
	var asked []Protocol
	for _, p := range protos {
		asked = append(asked, Protocol{Name: p.Name, Versions: p.Versions})
	}
	client := cfg
	client.Protocols = asked
	cli := newService(t, client)
	return dial(t, cli, listen(t, srv)), cli, srv
}

var upper = Protocol{Name: "/upper", Versions: []string{"1"}, RequestHandler: RequestHandlerFunc(
	func(_ *Context, req []byte) ([]byte, error) {
		if len(req) == 0 {
			return nil, errors.New("empty request")
		}
		return bytes.ToUpper(req), nil
	})}

// TestRequest: a request gets its reply; a handler's error comes back as a *RequestError;
// a protocol the peer does not serve is a typed refusal.
func TestRequest(t *testing.T) {
	for _, versions := range [][]string{{"1"}, {"1", "2"}} {
		t.Run(fmt.Sprintf("%d versions", len(versions)), func(t *testing.T) {
			p := upper
			p.Versions = versions
			sess, _, _ := requestPair(t, Config{}, p)
			ctx := context.Background()
			reply, err := sess.Request(ctx, "/upper", []byte("hello"))
			if err != nil || string(reply) != "HELLO" {
				t.Fatalf("Request = %q, %v", reply, err)
			}
			_, err = sess.Request(ctx, "/upper", nil)
			var re *RequestError
			if !errors.As(err, &re) || !errors.Is(err, ErrRequestFailed) || re.Reason != "empty request" {
				t.Fatalf("a failing handler: %v, want a *RequestError with its text", err)
			}
		})
	}
	t.Run("not served", func(t *testing.T) {
		srv := newService(t, Config{})
		cli := newService(t, Config{Protocols: []Protocol{{Name: "/upper", Versions: []string{"1"}}}})
		sess := dial(t, cli, listen(t, srv))
		_, err := sess.Request(context.Background(), "/upper", []byte("x"))
		if !errors.Is(err, protocol.ErrUnknownProtocol) {
			t.Fatalf("a protocol the peer lacks: %v, want protocol.ErrUnknownProtocol", err)
		}
	})
}

// TestRequestMany: 10,000 requests from 8 goroutines, each answered, in any order.
func TestRequestMany(t *testing.T) {
	n := 10_000
	if raceEnabled {
		n = 2_000
	}
	echo := Protocol{Name: "/echo", Versions: []string{"1"}, RequestHandler: RequestHandlerFunc(
		func(_ *Context, req []byte) ([]byte, error) { return req, nil })}
	sess, _, _ := requestPair(t, Config{}, echo)
	var wg sync.WaitGroup
	var failed atomic.Int64
	for g := range 8 {
		wg.Go(func() {
			for i := g; i < n; i += 8 {
				req := binary.BigEndian.AppendUint64(nil, uint64(i))
				reply, err := sess.Request(context.Background(), "/echo", req)
				if err != nil || !bytes.Equal(reply, req) {
					failed.Add(1)
					t.Errorf("request %d: %x, %v", i, reply, err)
					return
				}
			}
		})
	}
	wg.Wait()
	if failed.Load() > 0 {
		t.FailNow()
	}
}

// TestRequestTimesOut: a handler that never replies times the request out at its context's
// deadline; the request's slot is free again (MaxRequests 1: a second request meanwhile
// fails with ErrTooManyRequests), and the handler's Context ends.
func TestRequestTimesOut(t *testing.T) {
	ended := make(chan struct{}, 1)
	release := make(chan struct{})
	defer close(release)
	var calls atomic.Int64
	stuck := Protocol{Name: "/stuck", Versions: []string{"1"}, RequestHandler: RequestHandlerFunc(
		func(c *Context, req []byte) ([]byte, error) {
			if calls.Add(1) > 1 {
				return req, nil // later requests are answered
			}
			select {
			case <-c.Done():
				ended <- struct{}{}
			case <-release:
			}
			return nil, nil
		})}
	sess, _, _ := requestPair(t, Config{MaxRequests: 1}, stuck)
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	errc := make(chan error, 1)
	go func() {
		_, err := sess.Request(ctx, "/stuck", []byte("x"))
		errc <- err
	}()
	waitUntil(t, "the first request in flight", func() bool { return calls.Load() == 1 })
	if _, err := sess.Request(context.Background(), "/stuck", []byte("z")); !errors.Is(err, ErrTooManyRequests) {
		t.Fatalf("a second request with MaxRequests 1: %v, want ErrTooManyRequests", err)
	}
	err := <-errc
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a request never answered: %v, want context.DeadlineExceeded", err)
	}
	if d := time.Since(start); d > time.Second {
		t.Fatalf("a request with a 200 ms deadline failed after %v", d)
	}
	select {
	case <-ended:
	case <-time.After(5 * time.Second):
		t.Fatal("the handler's Context did not end when the requester gave up")
	}
	ctx2, cancel2 := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel2()
	if reply, err := sess.Request(ctx2, "/stuck", []byte("y")); err != nil || string(reply) != "y" {
		t.Fatalf("the next request (one slot): %q, %v", reply, err)
	}
}

// TestRequestFromHandler: handlers that make requests themselves, to the peer that asked
// them, do not deadlock: ping-pong to a depth of 20, from 8 goroutines at once.
func TestRequestFromHandler(t *testing.T) {
	var a, b *Service
	bounce := func(self **Service) RequestHandler {
		return RequestHandlerFunc(func(c *Context, req []byte) ([]byte, error) {
			depth := binary.BigEndian.Uint32(req)
			if depth == 0 {
				return []byte("bottom"), nil
			}
			return c.Session().Request(context.Background(), "/bounce", binary.BigEndian.AppendUint32(nil, depth-1))
		})
	}
	a = newService(t, Config{Protocols: []Protocol{{Name: "/bounce", Versions: []string{"1"}, RequestHandler: bounce(&a)}}})
	b = newService(t, Config{Protocols: []Protocol{{Name: "/bounce", Versions: []string{"1"}, RequestHandler: bounce(&b)}}})
	sess := dial(t, a, listen(t, b))
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			reply, err := sess.Request(ctx, "/bounce", binary.BigEndian.AppendUint32(nil, 20))
			if err != nil || string(reply) != "bottom" {
				t.Errorf("ping-pong of depth 20: %q, %v", reply, err)
			}
		})
	}
	wg.Wait()
}

// TestRequestPeerCloses: the peer closing its session mid-request fails the request at once.
func TestRequestPeerCloses(t *testing.T) {
	entered := make(chan struct{})
	var srv *Service
	slow := Protocol{Name: "/slow", Versions: []string{"1"}, RequestHandler: RequestHandlerFunc(
		func(c *Context, _ []byte) ([]byte, error) {
			close(entered)
			<-c.Done()
			return nil, nil
		})}
	sess, cli, srvSvc := requestPair(t, Config{}, slow)
	srv = srvSvc
	errc := make(chan error, 1)
	go func() {
		_, err := sess.Request(context.Background(), "/slow", []byte("x"))
		errc <- err
	}()
	<-entered
	start := time.Now()
	srv.Session(cli.ID()).Close()
	select {
	case err := <-errc:
		// The peer's graceful close ends the request's stream first (ErrNoReply), or its
		// session does (ErrSessionClosed): either way at once, with a typed error.
		if !errors.Is(err, ErrSessionClosed) && !errors.Is(err, ErrNoReply) {
			t.Fatalf("a request whose peer closed: %v, want ErrSessionClosed or ErrNoReply", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the request is still waiting after its peer closed")
	}
	if d := time.Since(start); d > time.Second {
		t.Fatalf("the request failed %v after the peer closed", d)
	}
}

// TestProtocolMaxMessageSize: a protocol's own MaxMessageSize bounds its requests and
// replies on both sides (a peer that serves the protocol without the bound cannot make the
// requester read a larger reply) and its messages; it may not exceed Config's.
func TestProtocolMaxMessageSize(t *testing.T) {
	const limit = 100
	big := RequestHandlerFunc(func(_ *Context, req []byte) ([]byte, error) { return make([]byte, 1000), nil })
	srv := newService(t, Config{Protocols: []Protocol{{Name: "/r", Versions: []string{"1"}, RequestHandler: big}}})
	cli := newService(t, Config{Protocols: []Protocol{{Name: "/r", Versions: []string{"1"}, MaxMessageSize: limit}}})
	sess := dial(t, cli, listen(t, srv))
	if _, err := sess.Request(context.Background(), "/r", make([]byte, limit+1)); !errors.Is(err, ErrMessageTooLarge) {
		t.Fatalf("request above the protocol's limit: %v", err)
	}
	if _, err := sess.Request(context.Background(), "/r", []byte("x")); !errors.Is(err, protocol.ErrMessageTooLarge) {
		t.Fatalf("a reply of 1000 bytes to a requester whose limit is %d: %v", limit, err)
	}

	// The server side: a reply above its protocol's limit is refused with a reason.
	small := newService(t, Config{Protocols: []Protocol{{Name: "/r", Versions: []string{"1"}, RequestHandler: big, MaxMessageSize: limit}}})
	cli2 := newService(t, Config{Protocols: []Protocol{{Name: "/r", Versions: []string{"1"}}}})
	var re *RequestError
	if _, err := dial(t, cli2, listen(t, small)).Request(context.Background(), "/r", []byte("x")); !errors.As(err, &re) {
		t.Fatalf("a reply above the server's limit: %v, want a RequestError", err)
	}

	// Message mode: Send refuses, and so does the reader.
	box := newInbox()
	recv := newService(t, Config{Protocols: []Protocol{{Name: "/m", Versions: []string{"1"}, Handler: box, MaxMessageSize: limit}}})
	send := newService(t, Config{Protocols: []Protocol{{Name: "/m", Versions: []string{"1"}, Handler: newInbox(), MaxMessageSize: limit}}})
	ms := dialOpen(t, send, listen(t, recv), "/m")
	if err := ms.Send("/m", make([]byte, limit+1)); !errors.Is(err, ErrMessageTooLarge) {
		t.Fatalf("Send above the protocol's limit: %v", err)
	}
	loose := newService(t, Config{Protocols: []Protocol{{Name: "/m", Versions: []string{"1"}, Handler: newInbox()}}})
	ls := dialOpen(t, loose, listen(t, recv), "/m")
	if err := ls.Send("/m", make([]byte, limit+1)); err != nil {
		t.Fatal(err)
	}
	log := collectEvents(recv)
	log.waitFor(t, "the receiver's protocol error", func(e Event) bool {
		return e.Type == EventProtocolError && errors.Is(e.Err, protocol.ErrMessageTooLarge)
	})

	if err := srv.AddProtocol(Protocol{Name: "/x", Versions: []string{"1"}, MaxMessageSize: srv.cfg.MaxMessageSize + 1}); !errors.Is(err, ErrInvalidProtocol) {
		t.Fatalf("MaxMessageSize above Config's: %v", err)
	}
	if err := srv.AddProtocol(Protocol{Name: "/x", Versions: []string{"1"}, MaxMessageSize: -1}); !errors.Is(err, ErrInvalidProtocol) {
		t.Fatalf("negative MaxMessageSize: %v", err)
	}
}
