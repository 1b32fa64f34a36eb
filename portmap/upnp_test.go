package portmap_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tendril-p2p/tendril/portmap"
)

func upnpConfig(f *fakeIGD) portmap.Config {
	return portmap.Config{UPnPRootURL: f.rootURL(), Methods: []portmap.Method{portmap.UPnP}}
}

func actions(calls []igdCall) string {
	var s []string
	for _, c := range calls {
		s = append(s, c.action)
	}
	return strings.Join(s, ",")
}

func TestUPnPMapRenewRemove(t *testing.T) {
	for _, svc := range []string{urnIP2, urnIP1, urnPPP1} {
		t.Run(strings.TrimPrefix(svc, "urn:schemas-upnp-org:service:"), func(t *testing.T) {
			f := newFakeIGD(t)
			f.set(func(f *fakeIGD) { f.service = svc })
			h := startMapper(t, upnpConfig(f))
			start := h.clk.Now()
			mp := h.change()
			if mp.External != netip.MustParseAddrPort("203.0.113.7:4001") || mp.Method != portmap.UPnP || mp.Gateway != loopback {
				t.Fatalf("mapping %+v", mp)
			}
			if !mp.Expires.Equal(start.Add(time.Hour)) {
				t.Fatalf("expires after %v, want 1 h", mp.Expires.Sub(start))
			}
			if w := h.clk.nextWait(t); w != 30*time.Minute {
				t.Fatalf("renewal after %v", w)
			}
			h.clk.Advance(30 * time.Minute)
			h.clk.nextWait(t)
			h.noChange()
			if err := h.m.Close(context.Background()); err != nil {
				t.Fatal(err)
			}
			if mp := h.change(); !mp.IsZero() {
				t.Fatalf("Close reported %v", mp)
			}
			calls := f.log()
			// Discovery checks the external address, then: map; renew; delete.
			if got := actions(calls); got != "GetExternalIPAddress,GetExternalIPAddress,AddPortMapping,GetExternalIPAddress,AddPortMapping,DeletePortMapping" {
				t.Fatalf("actions %s", got)
			}
			add := calls[2]
			if add.ext != 4001 || add.lease != 3600 || add.client != "127.0.0.1" || add.desc != "tendril" {
				t.Fatalf("AddPortMapping %+v", add)
			}
			if del := calls[5]; del.ext != 4001 {
				t.Fatalf("DeletePortMapping %+v", del)
			}
		})
	}
}

func TestUPnPConflictAddAnyPortMapping(t *testing.T) {
	f := newFakeIGD(t)
	f.set(func(f *fakeIGD) { f.taken[4001] = true })
	h := startMapper(t, upnpConfig(f))
	if mp := h.change(); mp.External.Port() != 50000 {
		t.Fatalf("mapping %v, want the port AddAnyPortMapping reserved", mp)
	}
	h.clk.Advance(h.clk.nextWait(t))
	h.clk.nextWait(t)
	calls := f.log()
	if last := calls[len(calls)-1]; last.action != "AddPortMapping" || last.ext != 50000 {
		t.Fatalf("renewal %+v, want AddPortMapping of the reserved port", last)
	}
	h.noChange()
}

func TestUPnPConflictRandomPortsOnIGDv1(t *testing.T) {
	f := newFakeIGD(t)
	f.set(func(f *fakeIGD) { f.service = urnIP1; f.taken[4001] = true })
	h := startMapper(t, upnpConfig(f))
	mp := h.change()
	if p := mp.External.Port(); p == 4001 || p < 1024 {
		t.Fatalf("mapping %v, want a random port", mp)
	}
	if strings.Contains(actions(f.log()), "AddAny") {
		t.Fatal("AddAnyPortMapping asked of an IGDv1 service")
	}
}

func TestUPnPAllPortsTaken(t *testing.T) {
	f := newFakeIGD(t)
	f.set(func(f *fakeIGD) {
		f.service = urnIP1
		for p := range 65536 {
			f.taken[p] = true
		}
	})
	h := startMapper(t, upnpConfig(f))
	h.clk.nextWait(t)
	var ge *portmap.GatewayError
	if err := h.m.Err(); !errors.As(err, &ge) || ge.Code != 718 {
		t.Fatalf("Err() = %v", err)
	}
	// The same port, then three random ones: bounded.
	if n := strings.Count(actions(f.log()), "AddPortMapping"); n != 4 {
		t.Fatalf("%d AddPortMapping calls", n)
	}
}

func TestUPnPOnlyPermanentLeases(t *testing.T) {
	f := newFakeIGD(t)
	f.set(func(f *fakeIGD) { f.onlyPermanent = true })
	h := startMapper(t, upnpConfig(f))
	mp := h.change()
	if !mp.Expires.IsZero() {
		t.Fatalf("expires %v, want zero for a permanent mapping", mp.Expires)
	}
	if w := h.clk.nextWait(t); w != 30*time.Minute {
		t.Fatalf("a permanent mapping is refreshed after %v, want half the lease asked", w)
	}
	calls := f.log()
	if last := calls[len(calls)-1]; last.lease != 0 {
		t.Fatalf("retry lease %d", last.lease)
	}
}

// NAT-PMP first by default; a gateway with nothing on its NAT-PMP port falls through to
// UPnP.
func TestPreferenceFallsBackToUPnP(t *testing.T) {
	f := newFakeIGD(t)
	closed, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	port := closed.LocalAddr().(*net.UDPAddr).Port
	closed.Close()
	h := startMapper(t, portmap.Config{Gateway: loopback, NATPMPPort: port, UPnPRootURL: f.rootURL()})
	if mp := h.change(); mp.Method != portmap.UPnP {
		t.Fatalf("mapping %v", mp)
	}
}

func TestUPnPHostile(t *testing.T) {
	// Another host on loopback, which must never be contacted.
	var thirdHits atomic.Int32
	third, err := net.Listen("tcp4", "127.0.0.2:0")
	if err != nil {
		t.Skip("no 127.0.0.2:", err)
	}
	thirdSrv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { thirdHits.Add(1) })}
	go thirdSrv.Serve(third)
	t.Cleanup(func() { thirdSrv.Close() })
	thirdURL := "http://" + third.Addr().String()

	huge := func() []byte { return []byte("<root>" + strings.Repeat("<a>x</a>", 1<<17) + "</root>") }
	for name, tc := range map[string]struct {
		set  func(f *fakeIGD)
		want error
	}{
		"huge description":    {func(f *fakeIGD) { f.description = huge }, portmap.ErrTooLarge},
		"huge SOAP answer":    {func(f *fakeIGD) { f.soapPad = 1 << 20 }, portmap.ErrTooLarge},
		"slow SOAP answer":    {func(f *fakeIGD) { f.soapDelay = 5 * time.Second }, portmap.ErrTimeout},
		"control elsewhere":   {func(f *fakeIGD) { f.controlURL = thirdURL + "/ctl" }, portmap.ErrUntrustedGateway},
		"control by name":     {func(f *fakeIGD) { f.controlURL = "http://localhost/ctl" }, portmap.ErrUntrustedGateway},
		"URLBase elsewhere":   {func(f *fakeIGD) { f.urlBase = thirdURL + "/" }, portmap.ErrUntrustedGateway},
		"redirect":            {func(f *fakeIGD) { f.redirect = thirdURL + "/rootDesc.xml" }, portmap.ErrUntrustedGateway},
		"external 0.0.0.0":    {func(f *fakeIGD) { f.extIP = "0.0.0.0" }, portmap.ErrBadExternalAddr},
		"external not an IP":  {func(f *fakeIGD) { f.extIP = "example.com" }, portmap.ErrBadExternalAddr},
		"external IPv6":       {func(f *fakeIGD) { f.extIP = "2001:db8::1" }, portmap.ErrBadExternalAddr},
		"description not XML": {func(f *fakeIGD) { f.description = func() []byte { return []byte("\x00\x01garbage") } }, portmap.ErrBadResponse},
		"no WAN service":      {func(f *fakeIGD) { f.service = "urn:schemas-upnp-org:service:Layer3Forwarding:1" }, portmap.ErrNoGateway},
	} {
		t.Run(name, func(t *testing.T) {
			f := newFakeIGD(t)
			f.set(tc.set)
			cfg := upnpConfig(f)
			cfg.RequestTimeout = 300 * time.Millisecond
			h := startMapper(t, cfg)
			start := time.Now()
			h.clk.nextWait(t)
			if err := h.m.Err(); !errors.Is(err, tc.want) {
				t.Fatalf("Err() = %v, want %v", err, tc.want)
			}
			if el := time.Since(start); el > 3*time.Second {
				t.Fatalf("took %v", el)
			}
			h.noChange()
			if n := thirdHits.Load(); n != 0 {
				t.Fatalf("the third host was contacted %d times", n)
			}
		})
	}
}

// A bad external address from UPnP is refused before any mapping is asked for.
func TestUPnPBogusExternalAddressNotMapped(t *testing.T) {
	f := newFakeIGD(t)
	f.set(func(f *fakeIGD) { f.extIP = "0.0.0.0" })
	h := startMapper(t, upnpConfig(f))
	h.clk.nextWait(t)
	if got := actions(f.log()); strings.Contains(got, "AddPortMapping") {
		t.Fatalf("actions %s", got)
	}
}
