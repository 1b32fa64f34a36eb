// Command echo is the smallest tendril program worth copying: a server that echoes a custom
// protocol's messages and a client that sends one line and prints the answer.
//
//	go run ./examples/echo -listen /ip4/127.0.0.1/tcp/4001
//	go run ./examples/echo -dial /ip4/127.0.0.1/tcp/4001/p2p/PEERID hello
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/tendril-p2p/tendril"
)

func main() {
	listen := flag.String("listen", "", "serve on this multiaddr, e.g. /ip4/127.0.0.1/tcp/4001")
	dial := flag.String("dial", "", "send the arguments to this peer (/ip4/HOST/tcp/PORT/p2p/PEERID) and print the echo")
	flag.Parse()
	if (*listen == "") == (*dial == "") {
		flag.Usage() // exactly one of -listen and -dial
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, *listen, *dial, strings.Join(flag.Args(), " "), func(s string) { fmt.Println(s) }); err != nil {
		fmt.Fprintln(os.Stderr, "echo:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, listen, dial, text string, print func(string)) error {
	replies := make(chan string, 1)
	echo := tendril.HandlerFuncs{OnReceived: func(c *tendril.Context, msg []byte) {
		if c.Outbound() { // the client: this is the echo of what it sent
			replies <- string(msg)
			return
		}
		c.Send(msg) // the server: send it back
	}}
	svc, err := tendril.New(tendril.Config{
		Protocols: []tendril.Protocol{{Name: "/echo", Versions: []string{"1.0"}, Handler: echo}},
	})
	if err != nil {
		return err
	}
	defer svc.Close()
	if listen != "" {
		addr, err := tendril.ParseAddr(listen) // user input: an error, never MustParseAddr
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
	addr, err := tendril.ParseAddr(dial)
	if err != nil {
		return err
	}
	sess, err := svc.Dial(ctx, addr)
	if err != nil {
		return err
	}
	if err := sess.OpenProtocol(ctx, "/echo"); err != nil {
		return err
	}
	if err := sess.Send("/echo", []byte(text)); err != nil {
		return err
	}
	select {
	case r := <-replies:
		print("echo: " + r)
		return nil
	case <-time.After(5 * time.Second):
		return fmt.Errorf("no echo within 5s")
	}
}
