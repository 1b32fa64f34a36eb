package protocol_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/tendril-p2p/tendril/protocol"
)

// Example negotiates a protocol on a stream and exchanges one message.
func Example() {
	opener, acceptor := net.Pipe() // in tendril: a new mux stream
	defer opener.Close()
	defer acceptor.Close()

	reg := protocol.NewRegistry()
	_ = reg.Register(protocol.Info{Name: "/chat", Versions: []string{"1.0", "9.0", "10.0"}})

	done := make(chan struct{})
	go func() {
		defer close(done)
		info, version, err := protocol.Accept(context.Background(), acceptor, reg)
		if err != nil {
			fmt.Println("accept:", err)
			return
		}
		msg, _ := protocol.NewReader(acceptor, 0).ReadMessage()
		fmt.Printf("acceptor: %s %s got %q\n", info.Name, version, msg)
	}()

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	version, err := protocol.Negotiate(ctx, opener, "/chat", []string{"9.0", "10.0", "11.0"})
	if err != nil {
		fmt.Println("negotiate:", err)
		return
	}
	fmt.Println("opener:", version)
	_ = protocol.NewWriter(opener, 0).WriteMessage([]byte("hello"))
	<-done
	// Output:
	// opener: 10.0
	// acceptor: /chat 10.0 got "hello"
}

func ExampleRefusedError() {
	opener, acceptor := net.Pipe()
	defer opener.Close()
	defer acceptor.Close()
	go protocol.Accept(context.Background(), acceptor, protocol.NewRegistry())

	_, err := protocol.Negotiate(context.Background(), opener, "/unknown", []string{"1"})
	var refused *protocol.RefusedError
	fmt.Println(errors.Is(err, protocol.ErrUnknownProtocol), errors.As(err, &refused) && refused.Code == protocol.CodeUnknownProtocol)
	// Output: true true
}
