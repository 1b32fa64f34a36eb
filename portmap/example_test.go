package portmap_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"

	"github.com/tendril-p2p/tendril/portmap"
)

// A Mapper maps the node's listen port on the gateway and reports the external address.
// Here the gateway is a stand-in NAT-PMP responder on loopback; in use, leave Gateway
// and NATPMPPort zero and the default route's gateway is asked (UPnP next if it does not
// speak NAT-PMP).
func Example() {
	gw := exampleGateway()
	defer gw.Close()

	found := make(chan portmap.Mapping, 2)
	m, err := portmap.New(portmap.Config{
		InternalPort: 4001,
		Gateway:      netip.MustParseAddr("127.0.0.1"),
		NATPMPPort:   gw.LocalAddr().(*net.UDPAddr).Port,
		// OnChange is where the external address goes to reachability: a candidate to
		// have confirmed by dial-back, never public on the gateway's word alone.
		OnChange: func(mp portmap.Mapping) { found <- mp },
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	if err := m.Start(context.Background()); err != nil {
		fmt.Println(err)
		return
	}
	mp := <-found
	fmt.Println(mp.Method, mp.External, "double NAT:", mp.DoubleNAT)
	// Close deletes the mapping from the gateway and reports the zero Mapping.
	if err := m.Close(context.Background()); err != nil {
		fmt.Println(err)
	}
	fmt.Println(<-found)
	// Output:
	// nat-pmp 203.0.113.7:4001 double NAT: false
	// no mapping
}

// exampleGateway answers NAT-PMP requests on a loopback port: external address
// 203.0.113.7, every mapping granted as asked.
func exampleGateway() *net.UDPConn {
	c, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		panic(err)
	}
	go func() {
		buf := make([]byte, 64)
		for {
			n, from, err := c.ReadFromUDP(buf)
			if err != nil {
				return
			}
			switch {
			case n == 2 && buf[1] == 0:
				c.WriteToUDP([]byte{0, 128, 0, 0, 0, 0, 0, 1, 203, 0, 113, 7}, from)
			case n == 12 && buf[1] == 2:
				out := make([]byte, 16)
				out[1] = 130
				copy(out[8:12], buf[4:8])   // internal port, external port as suggested
				copy(out[12:16], buf[8:12]) // lifetime as asked
				binary.BigEndian.PutUint32(out[4:], 1)
				c.WriteToUDP(out, from)
			}
		}
	}()
	return c
}
