package portmap_test

import (
	"context"
	"net"
	"net/netip"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/tendril-p2p/tendril/portmap"
)

// TestRealGateway maps a port on a real gateway (the lab's miniupnpd router) and removes
// it. It runs only when TENDRIL_PORTMAP_GATEWAY names the gateway's IPv4 address, from a
// host (or network namespace) behind it:
//
//	TENDRIL_PORTMAP_GATEWAY=10.0.1.1 TENDRIL_PORTMAP_METHOD=upnp go test -run TestRealGateway ./portmap
//
// TENDRIL_PORTMAP_METHOD is "nat-pmp", "upnp" or empty (both, NAT-PMP first). With upnp
// the device is found by SSDP, answers accepted only from the gateway. The test listens
// on a TCP port of its own, maps it, checks the mapping and prints it
// (whether the external address reaches the listener is for the lab to check from
// outside: hairpinning is not a given), then closes and expects the removal to succeed.
// TestRealGatewayInLab (lab_test.go) runs it so behind the lab's miniupnpd, by each method.
func TestRealGateway(t *testing.T) {
	gwEnv := os.Getenv("TENDRIL_PORTMAP_GATEWAY")
	if gwEnv == "" {
		t.Skip("TENDRIL_PORTMAP_GATEWAY not set")
	}
	gw, err := netip.ParseAddr(gwEnv)
	if err != nil {
		t.Fatalf("TENDRIL_PORTMAP_GATEWAY: %v", err)
	}
	var methods []portmap.Method
	switch strings.ToLower(os.Getenv("TENDRIL_PORTMAP_METHOD")) {
	case "nat-pmp", "natpmp":
		methods = []portmap.Method{portmap.NATPMP}
	case "upnp":
		methods = []portmap.Method{portmap.UPnP}
	}
	ln, err := net.Listen("tcp4", ":0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	port := ln.Addr().(*net.TCPAddr).Port

	changes := make(chan portmap.Mapping, 4)
	m, err := portmap.New(portmap.Config{InternalPort: port, Gateway: gw, Methods: methods,
		OnChange: func(mp portmap.Mapping) { changes <- mp }})
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	select {
	case mp := <-changes:
		t.Logf("mapped: %v, expires in %v", mp, time.Until(mp.Expires).Round(time.Second))
		if mp.Gateway != gw || !mp.External.IsValid() || mp.InternalPort != port {
			t.Errorf("mapping %+v", mp)
		}
	case <-time.After(15 * time.Second):
		t.Errorf("no mapping after 15 s; last error: %v", m.Err())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := m.Close(ctx); err != nil {
		t.Errorf("removing the mapping: %v", err)
	}
}
