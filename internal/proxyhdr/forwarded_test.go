package proxyhdr

import (
	"fmt"
	"net/http"
	"net/netip"
	"slices"
	"strings"
	"testing"
)

// trustedNets are the test's proxies.
var trustedNets = []netip.Prefix{
	netip.MustParsePrefix("10.0.0.0/8"),
	netip.MustParsePrefix("2001:db8:ffff::/48"),
}

func isTrusted(a netip.Addr) bool {
	for _, p := range trustedNets {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

var (
	proxy  = ap("10.0.0.1:8443")
	stray  = ap("203.0.113.9:5555") // an untrusted remote
	mapped = ap("[::ffff:10.0.0.1]:8443")
)

func hdr(kv ...string) http.Header {
	h := http.Header{}
	for i := 0; i < len(kv); i += 2 {
		h.Add(kv[i], kv[i+1])
	}
	return h
}

func TestClientAddrXFF(t *testing.T) {
	long := strings.Repeat("1.2.3.4, ", maxChainBytes/9) + "5.6.7.8"
	for _, tc := range []struct {
		name   string
		remote netip.AddrPort
		h      http.Header
		want   netip.AddrPort
	}{
		{"untrusted remote", stray, hdr("X-Forwarded-For", "1.2.3.4"), stray},
		{"no header", proxy, hdr(), proxy},
		{"other headers only", proxy, hdr("X-Real-Ip", "1.2.3.4"), proxy},
		{"one entry", proxy, hdr("X-Forwarded-For", "192.0.2.1"), ap("192.0.2.1:0")},
		{"lower-case name", proxy, hdr("x-forwarded-for", "192.0.2.1"), ap("192.0.2.1:0")},
		{"mapped remote", mapped, hdr("X-Forwarded-For", "192.0.2.1"), ap("192.0.2.1:0")},
		{"client's own entries ignored", proxy, hdr("X-Forwarded-For", "6.6.6.6, 7.7.7.7, 192.0.2.1"), ap("192.0.2.1:0")},
		{"forged trusted entry left of the client", proxy, hdr("X-Forwarded-For", "6.6.6.6, 10.9.9.9, 192.0.2.1"), ap("192.0.2.1:0")},
		{"two proxies", proxy, hdr("X-Forwarded-For", "192.0.2.1, 10.0.0.2"), ap("192.0.2.1:0")},
		{"three proxies, IPv6", proxy, hdr("X-Forwarded-For", "6.6.6.6, 2001:db8::1, 2001:db8:ffff::2, 10.0.0.2"), ap("[2001:db8::1]:0")},
		{"lines in order", proxy, hdr("X-Forwarded-For", "6.6.6.6", "X-Forwarded-For", "192.0.2.1, 10.0.0.2"), ap("192.0.2.1:0")},
		{"lines in order, client last", proxy, hdr("X-Forwarded-For", "6.6.6.6, 10.0.0.3", "X-Forwarded-For", "192.0.2.1"), ap("192.0.2.1:0")},
		{"all trusted", proxy, hdr("X-Forwarded-For", "10.0.0.5, 10.0.0.2"), ap("10.0.0.5:0")},
		{"no white space", proxy, hdr("X-Forwarded-For", "6.6.6.6,192.0.2.1"), ap("192.0.2.1:0")},
		{"tabs", proxy, hdr("X-Forwarded-For", "6.6.6.6\t,\t192.0.2.1\t"), ap("192.0.2.1:0")},
		{"IPv4 with port", proxy, hdr("X-Forwarded-For", "192.0.2.1:4711"), ap("192.0.2.1:4711")},
		{"IPv6 bracketed with port", proxy, hdr("X-Forwarded-For", "[2001:db8::1]:4711"), ap("[2001:db8::1]:4711")},
		{"IPv6 bracketed", proxy, hdr("X-Forwarded-For", "[2001:db8::1]"), ap("[2001:db8::1]:0")},
		{"mapped IPv4 entry", proxy, hdr("X-Forwarded-For", "::ffff:192.0.2.1"), ap("192.0.2.1:0")},
		{"mapped trusted entry skipped", proxy, hdr("X-Forwarded-For", "192.0.2.1, ::ffff:10.0.0.2"), ap("192.0.2.1:0")},
		{"garbage left of the client", proxy, hdr("X-Forwarded-For", "<script>, , unknown, 192.0.2.1"), ap("192.0.2.1:0")},
		{"garbage right of the client", proxy, hdr("X-Forwarded-For", "192.0.2.1, garbage"), proxy},
		{"garbage between proxies", proxy, hdr("X-Forwarded-For", "192.0.2.1, garbage, 10.0.0.2"), proxy},
		{"garbage after the client's line", proxy, hdr("X-Forwarded-For", "192.0.2.1", "X-Forwarded-For", "x"), proxy},
		{"unknown", proxy, hdr("X-Forwarded-For", "unknown"), proxy},
		{"empty", proxy, hdr("X-Forwarded-For", ""), proxy},
		{"trailing comma", proxy, hdr("X-Forwarded-For", "192.0.2.1,"), proxy},
		{"zone", proxy, hdr("X-Forwarded-For", "fe80::1%eth0"), proxy},
		{"bracketed zone", proxy, hdr("X-Forwarded-For", "[fe80::1%eth0]:1"), proxy},
		{"leading zero", proxy, hdr("X-Forwarded-For", "192.0.2.01"), proxy},
		{"host name", proxy, hdr("X-Forwarded-For", "example.com"), proxy},
		{"bad port", proxy, hdr("X-Forwarded-For", "192.0.2.1:65536"), proxy},
		{"empty port", proxy, hdr("X-Forwarded-For", "192.0.2.1:"), proxy},
		{"long port", proxy, hdr("X-Forwarded-For", "192.0.2.1:000080"), proxy},
		{"huge port", proxy, hdr("X-Forwarded-For", "192.0.2.1:99999999999999999999"), proxy},
		{"obfuscated port", proxy, hdr("X-Forwarded-For", "192.0.2.1:_x"), proxy},
		{"IPv6 unbracketed with port", proxy, hdr("X-Forwarded-For", "[2001:db8::1]4711"), proxy},
		{"bracketed IPv4", proxy, hdr("X-Forwarded-For", "[192.0.2.1]"), proxy},
		{"unclosed bracket", proxy, hdr("X-Forwarded-For", "[2001:db8::1"), proxy},
		{"space inside", proxy, hdr("X-Forwarded-For", "192.0.2.1 6.6.6.6"), proxy},
		{"long", proxy, hdr("X-Forwarded-For", long), ap("5.6.7.8:0")},
		{"padded on the left of its line", proxy, hdr("X-Forwarded-For", strings.Repeat("x", 5000)+", 192.0.2.1"), ap("192.0.2.1:0")},
		{"one huge entry", proxy, hdr("X-Forwarded-For", strings.Repeat("1", 5000)), proxy},
		{"many lines", proxy, hdr(append(slices.Repeat([]string{"X-Forwarded-For", "6.6.6.6"}, 520), "X-Forwarded-For", "192.0.2.1")...), ap("192.0.2.1:0")},
		{"long across lines", proxy, hdr("X-Forwarded-For", long[:3000], "X-Forwarded-For", "1.2.3.4, "+long[:2000]+", 5.6.7.8"), ap("5.6.7.8:0")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := ClientAddr(tc.remote, tc.h, isTrusted); got != tc.want {
				t.Errorf("ClientAddr = %v, want %v", got, tc.want)
			}
		})
	}
	if got := ClientAddr(proxy, hdr("X-Forwarded-For", "192.0.2.1"), nil); got != proxy {
		t.Errorf("nil trusted: %v, want %v", got, proxy)
	}
	if got := ClientAddr(netip.AddrPort{}, hdr("X-Forwarded-For", "192.0.2.1"), func(netip.Addr) bool { return true }); got != (netip.AddrPort{}) {
		t.Errorf("zero remote: %v", got)
	}
}

func TestClientAddrForwarded(t *testing.T) {
	for _, tc := range []struct {
		name string
		h    http.Header
		want netip.AddrPort
	}{
		{"RFC example", hdr("Forwarded", "for=192.0.2.60;proto=http;by=203.0.113.43"), ap("192.0.2.60:0")},
		{"IPv6 with port", hdr("Forwarded", `for="[2001:db8:cafe::17]:4711"`), ap("[2001:db8:cafe::17]:4711")},
		{"IPv6 without port", hdr("Forwarded", `for="[2001:db8:cafe::17]"`), ap("[2001:db8:cafe::17]:0")},
		{"quoted IPv4 with port", hdr("Forwarded", `for="192.0.2.43:4711"`), ap("192.0.2.43:4711")},
		{"obfuscated port", hdr("Forwarded", `for="192.0.2.43:_hidden"`), ap("192.0.2.43:0")},
		{"port with leading zeros", hdr("Forwarded", `for="192.0.2.43:0080"`), ap("192.0.2.43:80")},
		{"case-insensitive name", hdr("Forwarded", "FOR=192.0.2.60"), ap("192.0.2.60:0")},
		{"chain", hdr("Forwarded", "for=192.0.2.43, for=198.51.100.17"), ap("198.51.100.17:0")},
		{"chain through a proxy", hdr("Forwarded", "for=198.51.100.17;by=10.0.0.2, for=10.0.0.2"), ap("198.51.100.17:0")},
		{"lines in order", hdr("Forwarded", "for=6.6.6.6", "Forwarded", "for=198.51.100.17"), ap("198.51.100.17:0")},
		{"white space", hdr("Forwarded", " for=6.6.6.6 ; proto=https ,\tfor=198.51.100.17 "), ap("198.51.100.17:0")},
		{"for after other pairs", hdr("Forwarded", "proto=https;host=example.com;for=198.51.100.17"), ap("198.51.100.17:0")},
		{"quoted comma left of the client", hdr("Forwarded", `for="a,b;c", for=198.51.100.17`), ap("198.51.100.17:0")},
		{"escape in another pair", hdr("Forwarded", `host="a\"b";for=198.51.100.17`), ap("198.51.100.17:0")},
		{"unknown left of the client", hdr("Forwarded", "for=unknown, for=198.51.100.17"), ap("198.51.100.17:0")},
		{"all trusted", hdr("Forwarded", "for=10.0.0.5, for=10.0.0.2"), ap("10.0.0.5:0")},

		{"unknown", hdr("Forwarded", "for=unknown"), proxy},
		{"obfuscated node", hdr("Forwarded", "for=_gazonk"), proxy},
		{"quoted obfuscated node", hdr("Forwarded", `For="_gazonk"`), proxy},
		{"unknown between proxies", hdr("Forwarded", "for=198.51.100.17, for=unknown, for=10.0.0.2"), proxy},
		{"no for", hdr("Forwarded", "proto=https;by=10.0.0.2"), proxy},
		{"for twice", hdr("Forwarded", "for=198.51.100.17;for=6.6.6.6"), proxy},
		{"unquoted IPv6", hdr("Forwarded", "for=2001:db8::1"), proxy},
		{"unbracketed IPv6", hdr("Forwarded", `for="2001:db8::1"`), proxy},
		{"bracketed IPv4", hdr("Forwarded", `for="[192.0.2.1]"`), proxy},
		{"zone", hdr("Forwarded", `for="[fe80::1%eth0]"`), proxy},
		{"escaped node", hdr("Forwarded", `for="192.0.2.\1"`), proxy},
		{"bad port", hdr("Forwarded", `for="192.0.2.43:65536"`), proxy},
		{"long port", hdr("Forwarded", `for="192.0.2.43:000080"`), proxy},
		{"bad obfuscated port", hdr("Forwarded", `for="192.0.2.43:_"`), proxy},
		{"unterminated quote", hdr("Forwarded", `for="198.51.100.17`), proxy},
		{"syntax error left of the client", hdr("Forwarded", "for=, for=198.51.100.17"), proxy},
		{"broken line left of the client's", hdr("Forwarded", `for="6.6.6.6`, "Forwarded", "for=198.51.100.17"), ap("198.51.100.17:0")},
		{"broken line right of the client's", hdr("Forwarded", "for=198.51.100.17", "Forwarded", `for="10.0.0.2`), proxy},
		{"broken line between proxies", hdr("Forwarded", "for=198.51.100.17", "Forwarded", "for=10.0.0.3 x", "Forwarded", "for=10.0.0.2"), proxy},
		{"long broken line left of the client's", hdr("Forwarded", strings.Repeat("for=10.0.0.3,", 100)+"x", "Forwarded", "for=10.0.0.2, for=198.51.100.17, for=10.0.0.2"), ap("198.51.100.17:0")},
		{"long broken line, then proxies only", hdr("Forwarded", strings.Repeat("for=10.0.0.3,", 100)+"x", "Forwarded", "for=10.0.0.2"), proxy},
		{"unquoted comma-less junk", hdr("Forwarded", "for=198.51.100.17 junk"), proxy},
		{"empty element", hdr("Forwarded", "for=6.6.6.6,,for=198.51.100.17"), proxy},
		{"empty pair", hdr("Forwarded", "for=198.51.100.17;;proto=http"), proxy},
		{"no value", hdr("Forwarded", "for"), proxy},
		{"no name", hdr("Forwarded", "=x;for=198.51.100.17"), proxy},
		{"escaped control character", hdr("Forwarded", "host=\"\\\x7f\";for=198.51.100.17"), proxy},
		{"bad escape at the end", hdr("Forwarded", `for="\`), proxy},
		{"control character in quotes", hdr("Forwarded", "for=\"\x01\", for=198.51.100.17"), proxy},
		{"empty", hdr("Forwarded", ""), proxy},
		{"line too long", hdr("Forwarded", strings.Repeat("for=6.6.6.6,", maxChainBytes/12)+"for=198.51.100.17"), proxy},
		{"client's line too long, proxy's line", hdr("Forwarded", strings.Repeat("for=6.6.6.6,", maxChainBytes/12), "Forwarded", "for=198.51.100.17"), ap("198.51.100.17:0")},
		{"client's line too long, then proxies", hdr("Forwarded", strings.Repeat("for=6.6.6.6,", maxChainBytes/12), "Forwarded", "for=10.0.0.3", "Forwarded", "for=10.0.0.2"), proxy},

		{"both agree", hdr("X-Forwarded-For", "198.51.100.17", "Forwarded", `for="198.51.100.17:4711"`), ap("198.51.100.17:4711")},
		{"both agree, each through its chain", hdr("X-Forwarded-For", "6.6.6.6, 198.51.100.17, 10.0.0.2", "Forwarded", "for=198.51.100.17"), ap("198.51.100.17:0")},
		{"forged Forwarded", hdr("X-Forwarded-For", "198.51.100.17", "Forwarded", "for=6.6.6.6"), proxy},
		{"forged X-Forwarded-For", hdr("X-Forwarded-For", "6.6.6.6", "Forwarded", "for=198.51.100.17"), proxy},
		{"X-Forwarded-For padded past its bound", hdr("X-Forwarded-For", strings.Repeat("6", maxChainBytes), "Forwarded", "for=198.51.100.17"), proxy},
		{"Forwarded malformed", hdr("X-Forwarded-For", "198.51.100.17", "Forwarded", "for=unknown"), proxy},
		{"X-Forwarded-For malformed", hdr("X-Forwarded-For", "x", "Forwarded", "for=198.51.100.17"), proxy},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := ClientAddr(proxy, tc.h, isTrusted); got != tc.want {
				t.Errorf("ClientAddr = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestClientAddrLongChains checks the walk on chains longer than maxChain, in both
// headers, against a plain reference: the client is the untrusted entry at u, with
// proxies right of it (and the client's own entries left), or no-one if u = -1.
func TestClientAddrLongChains(t *testing.T) {
	for _, n := range []int{1, 2, 63, 64, 65, 100, 128, 129, 200} {
		for u := -1; u < n; u++ {
			var xff, fwd []string
			var want netip.AddrPort
			for i := range n {
				a := netip.AddrFrom4([4]byte{10, 1, byte(i >> 8), byte(i)})
				if i <= u {
					a = netip.AddrFrom4([4]byte{192, 0, byte(i >> 8), byte(i)})
				}
				xff = append(xff, a.String())
				fwd = append(fwd, "for="+a.String())
			}
			switch {
			case u >= 0 && n-u <= maxChain:
				want = netip.MustParseAddrPort(xff[u] + ":0")
			case u < 0 && n <= maxChain:
				want = netip.MustParseAddrPort(xff[0] + ":0")
			default:
				want = proxy
			}
			for _, h := range []http.Header{
				hdr("X-Forwarded-For", strings.Join(xff, ", ")),
				hdr("Forwarded", strings.Join(fwd, ", ")),
				hdr("X-Forwarded-For", strings.Join(xff[:n/2], ","), "X-Forwarded-For", strings.Join(xff[n/2:], ",")),
				hdr("Forwarded", strings.Join(fwd[:n/2], ","), "Forwarded", strings.Join(fwd[n/2:], ",")),
			} {
				// An empty first line is a malformed header; skip the split for n = 1.
				if n == 1 && (len(h.Values("X-Forwarded-For")) == 2 || len(h.Values("Forwarded")) == 2) {
					continue
				}
				if got := ClientAddr(proxy, h, isTrusted); got != want {
					t.Fatalf("n=%d u=%d %v: ClientAddr = %v, want %v", n, u, h, got, want)
				}
			}
		}
	}
}

// TestClientAddrWork checks that trusted is asked about a bounded number of addresses,
// however many entries the headers hold.
func TestClientAddrWork(t *testing.T) {
	var xff, fwd []string
	for i := range 300 {
		xff = append(xff, fmt.Sprintf("10.0.%d.%d", i>>8, i&0xff))
		fwd = append(fwd, "for="+xff[i])
	}
	calls := 0
	count := func(a netip.Addr) bool { calls++; return isTrusted(a) }
	h := hdr("X-Forwarded-For", strings.Join(xff, ","), "Forwarded", strings.Join(fwd, ","))
	if got := ClientAddr(proxy, h, count); got != proxy {
		t.Errorf("ClientAddr = %v, want %v", got, proxy)
	}
	if max := 1 + 2*maxChain; calls > max {
		t.Errorf("trusted called %d times, want at most %d", calls, max)
	}
}

// TestClientAddrAllocs checks that ClientAddr allocates nothing: it runs on every
// WebSocket upgrade from a proxy, under whatever headers a client sends.
func TestClientAddrAllocs(t *testing.T) {
	h := hdr("X-Forwarded-For", "6.6.6.6, 198.51.100.17, 10.0.0.2", "Forwarded", `for="[2001:db8::1]:1", for=198.51.100.17;proto=https, for=10.0.0.2`)
	if n := testing.AllocsPerRun(100, func() { ClientAddr(proxy, h, isTrusted) }); n != 0 {
		t.Errorf("ClientAddr allocates %v times", n)
	}
}

// TestClientAddrWindow checks the 4 KiB window at its edge: trusted entries padded with
// white space fill it, so that the client's entry lies just inside or just outside.
func TestClientAddrWindow(t *testing.T) {
	pad := "10.0.0.2" + strings.Repeat(" ", 93) // 101 bytes, 102 with its line's end
	proxies := slices.Repeat([]string{"X-Forwarded-For", pad}, 40)
	for _, tc := range []struct {
		client string
		want   netip.AddrPort
	}{
		{"192.0.2.1      ", ap("192.0.2.1:0")}, // 15+1 + 40*102 = 4096
		{"192.0.2.1       ", proxy},            // 4097: only "92.0.2.1      " is within
	} {
		h := hdr(append([]string{"X-Forwarded-For", tc.client}, proxies...)...)
		if got := ClientAddr(proxy, h, isTrusted); got != tc.want {
			t.Errorf("client line of %d bytes: ClientAddr = %v, want %v", len(tc.client), got, tc.want)
		}
	}

	// One line, cut by the window inside "61.2.3.4": the "1.2.3.4" within is not an
	// entry, and all the whole ones are trusted.
	right := strings.Repeat(","+pad, 40) + strings.Repeat(" ", 8)
	line := "x,61.2.3.4" + right
	if tail := line[len(line)-(maxChainBytes-1):]; !strings.HasPrefix(tail, "1.2.3.4,") {
		t.Fatalf("window starts %q", tail[:10])
	}
	if got := ClientAddr(proxy, hdr("X-Forwarded-For", line), isTrusted); got != proxy {
		t.Errorf("entry cut by the window: ClientAddr = %v, want %v", got, proxy)
	}
	if got := ClientAddr(proxy, hdr("X-Forwarded-For", line[2:len(line)-1]), isTrusted); got != ap("61.2.3.4:0") {
		t.Errorf("entry whole in the window: ClientAddr = %v, want 61.2.3.4:0", got)
	}
	// The window starting just after a comma: the window alone cannot tell that its first
	// entry is whole.
	if got := ClientAddr(proxy, hdr("X-Forwarded-For", "x,1.2.3.4"+right), isTrusted); got != proxy {
		t.Errorf("entry at the window's edge: ClientAddr = %v, want %v", got, proxy)
	}
}
