package connmgr_test

import (
	"context"
	"crypto/rand"
	"fmt"
	"sync/atomic"
	"time"

	ma "github.com/multiformats/go-multiaddr"

	tendril "github.com/tendril-p2p/tendril"
	"github.com/tendril-p2p/tendril/addrbook"
	"github.com/tendril-p2p/tendril/connmgr"
	"github.com/tendril-p2p/tendril/transport"
	"github.com/tendril-p2p/tendril/transport/memory"
)

func Example() {
	network := memory.NewNetwork(memory.NetworkConfig{})
	newService := func(protect func(*tendril.Session) bool) *tendril.Service {
		cfg := tendril.Config{Transports: []transport.Transport{network.NewTransport()}}
		cfg.Admission.Protect = protect
		svc, err := tendril.New(cfg)
		if err != nil {
			panic(err)
		}
		return svc
	}
	// A peer listening somewhere.
	peer := newService(nil)
	defer peer.Close()
	peerAddr, err := peer.Listen(context.Background(), tendril.MustParseAddr("/memory/0"))
	if err != nil {
		panic(err)
	}

	// The node: its Service protects the sessions the Manager keeps (the Manager is made
	// after the Service, so the hook reaches it through an atomic pointer).
	var hook atomic.Pointer[connmgr.Manager]
	node := newService(func(s *tendril.Session) bool { m := hook.Load(); return m != nil && m.Protect(s) })
	defer node.Close()
	var key [32]byte
	rand.Read(key[:])
	book, err := addrbook.New(nil, key)
	if err != nil {
		panic(err)
	}
	// Discovery (here: a bootstrap address) fills the book; the Manager dials from it.
	book.Add(time.Now(), peer.ID(), []ma.Multiaddr{peerAddr.Transport}, addrbook.Source{Kind: addrbook.SourceBootstrap})
	mgr, err := connmgr.New(node, book, connmgr.Config{Target: 8})
	if err != nil {
		panic(err)
	}
	hook.Store(mgr)
	defer mgr.Close()
	for ev := range mgr.Events() {
		fmt.Println(ev.Type)
		if ev.Type == connmgr.EventDialSucceeded {
			break
		}
	}
	fmt.Println(mgr.Status(peer.ID()).Reason)
	// Output:
	// dial-started
	// dial-succeeded
	// connected (outbound)
}
