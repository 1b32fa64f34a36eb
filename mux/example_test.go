package mux

import (
	"context"
	"fmt"
	"io"
	"net"
)

// ExampleSession_Serve serves every stream the peer opens with an echo handler; no goroutine
// waits for streams in between.
func ExampleSession_Serve() {
	a, b := net.Pipe()
	client, _ := Client(a, nil)
	server, _ := Server(b, nil)
	defer client.Close()
	closed := make(chan error, 1)
	server.Serve(func(st *Stream) {
		io.Copy(st, st) // echo until the client half-closes
		st.Close()
	}, func(err error) { closed <- err })

	for _, msg := range []string{"hello", "again"} {
		st, _ := client.OpenStream(context.Background())
		st.Write([]byte(msg))
		st.CloseWrite()
		reply, _ := io.ReadAll(st)
		fmt.Printf("%s\n", reply)
	}
	server.Close()
	fmt.Println(<-closed)
	// Output:
	// hello
	// again
	// mux: session closed
}
