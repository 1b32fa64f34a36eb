package reach_test

import (
	"context"
	"fmt"
	"net/netip"

	ma "github.com/multiformats/go-multiaddr"
	"github.com/tendril-p2p/tendril"
	"github.com/tendril-p2p/tendril/addrbook"
	"github.com/tendril-p2p/tendril/identify"
	"github.com/tendril-p2p/tendril/reach"
	"github.com/tendril-p2p/tendril/secio"
)

func Example() {
	// On loopback every address is in addrbook's "local" group; group by /16 instead so
	// that the two servers below count as two operators.
	group := func(m ma.Multiaddr) addrbook.Group {
		ip, err := netip.ParseAddr(m[0].Value())
		if err != nil {
			return addrbook.GroupOf(m)
		}
		p, _ := ip.Prefix(16)
		return addrbook.Group(p.String())
	}
	node := func(listen string) (*tendril.Service, *reach.Reach) {
		key, _ := secio.GenerateKey()
		svc, err := tendril.New(tendril.Config{PrivateKey: key})
		if err != nil {
			panic(err)
		}
		if _, err := svc.Listen(context.Background(), tendril.MustParseAddr(listen)); err != nil {
			panic(err)
		}
		id, err := identify.New(svc, identify.Config{PrivateKey: key})
		if err != nil {
			panic(err)
		}
		r, err := reach.New(svc, id, reach.Config{Group: group})
		if err != nil {
			panic(err)
		}
		return svc, r
	}
	s1, r1 := node("/ip4/127.1.0.1/tcp/0")
	s2, r2 := node("/ip4/127.2.0.1/tcp/0")
	a, ra := node("/ip4/127.0.0.1/tcp/0")
	for _, s := range []*tendril.Service{s1, s2} {
		if _, err := a.Dial(context.Background(), s.Addrs()[0]); err != nil {
			panic(err)
		}
	}
	// Each server dials a back at its listen port: two groups agree within milliseconds.
	for ev := range ra.Events() {
		if ev.Addr == nil { // the node's overall reachability
			fmt.Println("node:", ev.State)
			break
		}
	}
	st := ra.Status()[0]
	fmt.Println(st.State, st.Confirmations, "groups", st.Addr.Equal(a.Addrs()[0].Transport))
	for _, c := range []interface{ Close() error }{ra, r1, r2, a, s1, s2} {
		c.Close()
	}
	// Output:
	// node: public
	// public 2 groups true
}
