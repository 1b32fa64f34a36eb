package mdns_test

import (
	"context"
	"fmt"
	"time"

	"github.com/tendril-p2p/tendril/mdns"
)

// A Service announces a payload and reports the others it finds. It needs a network with
// multicast, so this example has no Output line and is compiled but not run.
func Example() {
	s, err := mdns.New(mdns.Config{
		Payload: []byte("signed peer record"),
		Port:    4001,
		OnFound: func(f mdns.Found) {
			// Untrusted: check the payload's signature before believing any of it.
			fmt.Println("found", f.Instance, f.Addrs, f.Port, len(f.Payload))
		},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	if err := s.Start(ctx); err != nil {
		fmt.Println(err)
		return
	}
	defer s.Close()
	<-ctx.Done()
}
