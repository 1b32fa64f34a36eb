// Command kv is a key-value store served over tendril's request/response: a server keeps the
// map, and a client sends "get KEY", "put KEY VALUE" or "del KEY" and prints the reply. Each
// request travels on a stream of its own with the protocol's negotiation: one round trip.
//
//	go run ./examples/kv -listen /ip4/127.0.0.1/tcp/4002
//	go run ./examples/kv -dial /ip4/127.0.0.1/tcp/4002/p2p/PEERID put greeting hello
//	go run ./examples/kv -dial /ip4/127.0.0.1/tcp/4002/p2p/PEERID get greeting
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/tendril-p2p/tendril"
)

// proto is the key-value protocol: a request is "get KEY", "put KEY VALUE" or "del KEY".
const proto = "/kv"

func main() {
	listen := flag.String("listen", "", "serve the store on this multiaddr, e.g. /ip4/127.0.0.1/tcp/4002")
	dial := flag.String("dial", "", "send a command (get KEY, put KEY VALUE, del KEY) to this peer (/ip4/HOST/tcp/PORT/p2p/PEERID)")
	flag.Parse()
	if (*listen == "") == (*dial == "") || (*dial != "" && flag.NArg() < 2) {
		flag.Usage() // exactly one of -listen and -dial, and a command with -dial
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var err error
	if *listen != "" {
		err = serve(ctx, *listen, func(s string) { fmt.Println(s) })
	} else {
		var reply string
		if reply, err = request(ctx, *dial, strings.Join(flag.Args(), " ")); err == nil {
			fmt.Println(reply)
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "kv:", err)
		os.Exit(1)
	}
}

// store is the server's map; its handler answers each request.
type store struct {
	mu sync.Mutex
	m  map[string]string
}

var errNotFound = errors.New("not found")

func (s *store) ServeRequest(_ *tendril.Context, req []byte) ([]byte, error) {
	verb, rest, _ := strings.Cut(string(req), " ")
	key, value, _ := strings.Cut(rest, " ")
	if key == "" {
		return nil, fmt.Errorf("want get KEY, put KEY VALUE or del KEY, got %q", req)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	switch verb {
	case "get":
		v, ok := s.m[key]
		if !ok {
			return nil, errNotFound
		}
		return []byte(v), nil
	case "put":
		s.m[key] = value
		return []byte("ok"), nil
	case "del":
		delete(s.m, key)
		return []byte("ok"), nil
	}
	return nil, fmt.Errorf("unknown command %q", verb)
}

func serve(ctx context.Context, listen string, print func(string)) error {
	svc, err := tendril.New(tendril.Config{Protocols: []tendril.Protocol{
		{Name: proto, Versions: []string{"1"}, RequestHandler: &store{m: make(map[string]string)}},
	}})
	if err != nil {
		return err
	}
	defer svc.Close()
	addr, err := tendril.ParseAddr(listen)
	if err != nil {
		return err
	}
	bound, err := svc.Listen(ctx, addr)
	if err != nil {
		return err
	}
	print("listening on " + bound.String())
	<-ctx.Done()
	return nil
}

// request dials the server and sends one command. The client only requests: its protocol
// has no handler.
func request(ctx context.Context, dial, cmd string) (string, error) {
	svc, err := tendril.New(tendril.Config{Protocols: []tendril.Protocol{{Name: proto, Versions: []string{"1"}}}})
	if err != nil {
		return "", err
	}
	defer svc.Close()
	addr, err := tendril.ParseAddr(dial)
	if err != nil {
		return "", err
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	sess, err := svc.Dial(ctx, addr)
	if err != nil {
		return "", err
	}
	reply, err := sess.Request(ctx, proto, []byte(cmd))
	if err != nil {
		var re *tendril.RequestError
		if errors.As(err, &re) {
			return "", errors.New(re.Reason) // the server's own words: "not found", ...
		}
		return "", err
	}
	return string(reply), nil
}
