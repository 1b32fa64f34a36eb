package portmap

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"
)

func TestParseDefaultGateway(t *testing.T) {
	const table = `Iface	Destination	Gateway 	Flags	RefCnt	Use	Metric	Mask		MTU	Window	IRTT
eth0	0000A8C0	00000000	0001	0	0	0	00FFFFFF	0	0	0
wlan0	00000000	FE01A8C0	0003	0	0	600	00000000	0	0	0
eth0	00000000	0101A8C0	0003	0	0	100	00000000	0	0	0
eth1	00000000	0202A8C0	0001	0	0	1	00000000	0	0	0
bad	00000000	zz	0003	0	0	1	00000000	0	0	0
`
	gw, err := parseDefaultGateway(strings.NewReader(table))
	if err != nil || gw != netip.MustParseAddr("192.168.1.1") {
		t.Fatalf("gateway %v, %v; want 192.168.1.1 (lowest metric, flags UG)", gw, err)
	}
	_, err = parseDefaultGateway(strings.NewReader("Iface\tDestination\neth0\t0000A8C0\t00000000\t0001\t0\t0\t0\t00FFFFFF\n"))
	if !errors.Is(err, ErrNoGateway) {
		t.Fatalf("no default route: %v", err)
	}
}

func TestRetryAfter(t *testing.T) {
	base, maxWait := 2*time.Second, 5*time.Minute
	for _, tc := range []struct {
		n    int
		want time.Duration
	}{{0, 0}, {1, 2 * time.Second}, {2, 4 * time.Second}, {8, 256 * time.Second}, {9, 5 * time.Minute}, {10000, 5 * time.Minute}} {
		if got := retryAfter(tc.n, base, maxWait, 0.5); got != tc.want {
			t.Errorf("retryAfter(%d) = %v, want %v", tc.n, got, tc.want)
		}
	}
	if lo, hi := retryAfter(1, base, maxWait, 0), retryAfter(1, base, maxWait, 1); lo != 1600*time.Millisecond || hi != 2400*time.Millisecond {
		t.Errorf("jitter bounds %v..%v", lo, hi)
	}
}

func TestRenewAfterAndFailedWait(t *testing.T) {
	if d := renewAfter(2*time.Hour, time.Hour, 30*time.Second); d != time.Hour {
		t.Errorf("renewAfter = %v", d)
	}
	if d := renewAfter(0, time.Hour, 30*time.Second); d != 30*time.Minute {
		t.Errorf("permanent: %v", d)
	}
	if d := renewAfter(10*time.Second, time.Hour, 30*time.Second); d != 30*time.Second {
		t.Errorf("short lease: %v", d)
	}
	now := time.Unix(1000, 0)
	if d := failedWait(time.Minute, now, now.Add(10*time.Second)); d != 10*time.Second {
		t.Errorf("cut at the deadline: %v", d)
	}
	if d := failedWait(time.Minute, now, now.Add(-time.Hour)); d != time.Second {
		t.Errorf("past the deadline: %v", d)
	}
	if d := failedWait(time.Minute, now, time.Time{}); d != time.Minute {
		t.Errorf("no deadline: %v", d)
	}
}

func TestValidate(t *testing.T) {
	ok := Config{InternalPort: 4001}
	if err := ok.Validate(); err != nil {
		t.Fatal(err)
	}
	for name, c := range map[string]Config{
		"port 0":        {},
		"port 65536":    {InternalPort: 65536},
		"protocol":      {InternalPort: 1, Protocol: "sctp"},
		"description":   {InternalPort: 1, Description: "a\x00b"},
		"long desc":     {InternalPort: 1, Description: strings.Repeat("a", 65)},
		"lease":         {InternalPort: 1, Lease: time.Millisecond},
		"method":        {InternalPort: 1, Methods: []Method{7}},
		"repeat":        {InternalPort: 1, Methods: []Method{UPnP, UPnP}},
		"gateway v6":    {InternalPort: 1, Gateway: netip.MustParseAddr("::1")},
		"root URL name": {InternalPort: 1, UPnPRootURL: "http://router.lan/desc.xml"},
		"root https":    {InternalPort: 1, UPnPRootURL: "https://192.168.1.1/desc.xml"},
		"discovery":     {InternalPort: 1, DiscoveryTimeout: time.Millisecond},
		"negative":      {InternalPort: 1, RetryBase: -1},
	} {
		if err := c.Validate(); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("%s: %v", name, err)
		}
	}
}

func TestCheckExternal(t *testing.T) {
	for s, want := range map[string]string{
		"203.0.113.7": "public", "8.8.8.8": "public",
		"10.0.0.1": "double", "172.16.0.1": "double", "192.168.0.1": "double", "100.64.0.1": "double", "100.127.255.255": "double",
		"0.0.0.0": "bad", "0.1.2.3": "bad", "127.0.0.1": "bad", "169.254.0.1": "bad", "224.0.0.1": "bad", "240.0.0.1": "bad", "255.255.255.255": "bad", "2001:db8::1": "bad",
	} {
		dbl, err := checkExternal(netip.MustParseAddr(s))
		got := "public"
		if err != nil {
			got = "bad"
			if !errors.Is(err, ErrBadExternalAddr) {
				t.Errorf("%s: %v", s, err)
			}
		} else if dbl {
			got = "double"
		}
		if got != want {
			t.Errorf("%s: %s, want %s", s, got, want)
		}
	}
}

func TestParseSSDPAnswer(t *testing.T) {
	src := netip.MustParseAddr("192.168.1.1")
	ans := func(st, loc string) []byte {
		return fmt.Appendf(nil, "HTTP/1.1 200 OK\r\nST: %s\r\nLOCATION: %s\r\nUSN: x\r\n\r\n", st, loc)
	}
	igd := "urn:schemas-upnp-org:device:InternetGatewayDevice:1"
	if c, err := parseSSDPAnswer(ans(igd, "http://192.168.1.1:5000/rootDesc.xml"), src); err != nil || c.host != src {
		t.Fatalf("%+v %v", c, err)
	}
	for name, tc := range map[string]struct {
		b    []byte
		want error
	}{
		"other host":  {ans(igd, "http://192.168.1.77:5000/rootDesc.xml"), ErrUntrustedGateway},
		"by name":     {ans(igd, "http://router.lan/rootDesc.xml"), ErrUntrustedGateway},
		"not igd":     {ans("upnp:rootdevice", "http://192.168.1.1/"), ErrBadResponse},
		"https":       {ans(igd, "https://192.168.1.1/"), ErrBadResponse},
		"garbage":     {[]byte("\x00\xff garbage"), ErrBadResponse},
		"status":      {[]byte("HTTP/1.1 404 Not Found\r\n\r\n"), ErrBadResponse},
		"no location": {ans(igd, ""), ErrBadResponse},
	} {
		if _, err := parseSSDPAnswer(tc.b, src); !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", name, err, tc.want)
		}
	}
}

// floodResponder answers the first datagram it receives with n answers made by answer.
// It returns its address and a channel that gives how many it sent.
func floodResponder(t *testing.T, n int, answer func(i int) []byte) (netip.AddrPort, chan int) {
	t.Helper()
	resp, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Close() })
	done := make(chan int, 1)
	go func() {
		sent := 0
		defer func() { done <- sent }()
		buf := make([]byte, 2048)
		_, from, err := resp.ReadFromUDPAddrPort(buf)
		if err != nil {
			return
		}
		for i := range n {
			if _, err := resp.WriteToUDPAddrPort(answer(i), from); err == nil {
				sent++
			}
		}
	}()
	return resp.LocalAddr().(*net.UDPAddr).AddrPort(), done
}

// An SSDP search against a responder on loopback that floods answers, hostile ones
// first: the search keeps a bounded number of candidates, all on the answering host.
func TestSSDPSearchBounded(t *testing.T) {
	dst, done := floodResponder(t, 1000, func(i int) []byte {
		host := "127.0.0.1"
		if i < 40 {
			host = "10.9.9.9" // a third party: never kept
		}
		return fmt.Appendf(nil, "HTTP/1.1 200 OK\r\nST: urn:schemas-upnp-org:device:InternetGatewayDevice:1\r\nLOCATION: http://%s:%d/d.xml\r\n\r\n", host, i)
	})
	loop := func(a netip.Addr) bool { return a.IsLoopback() }
	found, err := ssdpSearch(context.Background(), dst, time.Second, loop, netip.Addr{})
	if sent := <-done; sent < 100 {
		t.Skipf("only %d answers sent", sent)
	}
	if err != nil {
		t.Fatal(err)
	}
	if len(found) != ssdpMaxCandidates {
		t.Fatalf("%d candidates, want %d", len(found), ssdpMaxCandidates)
	}
	for _, c := range found {
		if c.host != netip.MustParseAddr("127.0.0.1") {
			t.Fatalf("kept %v", c.loc)
		}
	}
}

// Answers from a source not accepted are all dropped, and the search ends on its packet
// cap rather than reading a flood for its whole window.
func TestSSDPSearchPacketCap(t *testing.T) {
	dst, done := floodResponder(t, 1000, func(int) []byte { return []byte("HTTP/1.1 200 OK\r\n\r\n") })
	start := time.Now()
	found, err := ssdpSearch(context.Background(), dst, 5*time.Second, func(netip.Addr) bool { return false }, netip.Addr{})
	el := time.Since(start)
	if sent := <-done; sent < 100 {
		t.Skipf("only %d answers sent", sent)
	}
	if err != nil || len(found) != 0 {
		t.Fatalf("%v %v", found, err)
	}
	if el > 3*time.Second {
		t.Fatalf("searched for %v: the packet cap did not end it", el)
	}
}
