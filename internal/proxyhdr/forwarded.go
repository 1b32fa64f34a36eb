package proxyhdr

import (
	"net/http"
	"net/netip"
	"strings"
)

// Bounds on a forwarding chain. Each proxy on the way adds one entry, and a legitimate
// chain has a handful; everything beyond is a client's own text.
const (
	// maxChainBytes bounds the text of a header that is looked at, from the right: the
	// entries (for Forwarded, the lines) left of it are not read, as if beyond maxChain.
	maxChainBytes = 4096
	// maxChain bounds the entries considered, from the right.
	maxChain = 64
)

// ClientAddr returns the address of the client on whose behalf a trusted HTTP proxy at
// remote forwarded a request (a WebSocket upgrade), from its X-Forwarded-For and
// Forwarded (RFC 7239, its for= parameters) headers in h; remote itself whenever they do
// not tell it reliably. trusted says which addresses are trusted proxies; it is given
// unmapped addresses, and ClientAddr returns unmapped ones.
//
// Only a trusted remote is believed. Its chain is walked from the right, the entry its
// proxy added, past the entries of further trusted proxies, to the first untrusted
// address: the client as the outermost trusted proxy saw it, with its port if the entry
// gives one, else port 0. Entries to the left of it are the client's own text and do not
// count, malformed or not, so that a client cannot choose to be counted as the proxy by
// sending garbage. If every entry is trusted, the leftmost is the client. The result is
// remote when:
//   - neither header is present;
//   - an entry reached before the client is unusable (not an IP address: malformed, a
//     zone, RFC 7239's "unknown" or obfuscated identifiers, an element without for=),
//     since believing the entries beyond it would trust what no trusted proxy vouched
//     for;
//   - the client is not within what is looked at of a header: its rightmost 4 KiB (whole
//     lines, for Forwarded) and 64 entries; if those are all trusted and there are
//     more, the leftmost is out of reach;
//   - a Forwarded line that does not parse is reached before the client: its quoted
//     strings may hold commas, so past a syntax error its elements cannot be told apart
//     (a broken line left of the client's is the client's text, as above);
//   - both headers are present and do not name the same client address.
//
// When both are present and agree, the Forwarded answer is returned (it may carry a
// port). Requiring agreement is what keeps a proxy that manages only one of the headers
// safe from a client who forges the other: ClientAddr cannot know which header the proxy
// writes, and believing the wrong one would let the client pick any address.
func ClientAddr(remote netip.AddrPort, h http.Header, trusted func(netip.Addr) bool) netip.AddrPort {
	if trusted == nil || !remote.Addr().IsValid() || !trusted(remote.Addr().Unmap()) {
		return remote
	}
	xff, fwd := h.Values("X-Forwarded-For"), h.Values("Forwarded")
	if len(xff) == 0 && len(fwd) == 0 {
		return remote
	}
	x, okX := clientOf(xff, false, trusted)
	f, okF := clientOf(fwd, true, trusted)
	switch {
	case !okX || !okF:
		return remote
	case len(fwd) == 0:
		return x
	case len(xff) > 0 && x.Addr() != f.Addr():
		return remote
	}
	return f
}

// clientOf walks one header's lines (Forwarded or X-Forwarded-For); ok is true if they
// name the client, or if there are none.
func clientOf(lines []string, forwarded bool, trusted func(netip.Addr) bool) (ap netip.AddrPort, ok bool) {
	if len(lines) == 0 {
		return netip.AddrPort{}, true
	}
	var c chain
	if forwarded {
		c.fillForwarded(lines)
	} else {
		c.fillXFF(lines)
	}
	return c.client(trusted)
}

// chain holds the rightmost entries of a forwarding header, rightmost first.
type chain struct {
	e    [maxChain]entry
	n    int
	more bool // there are entries left of e[n-1]
}

// entry is one hop's client address; ok is false if the entry does not give one.
type entry struct {
	ap netip.AddrPort
	ok bool
}

// client walks c from the right past trusted addresses (the rule in ClientAddr).
func (c *chain) client(trusted func(netip.Addr) bool) (netip.AddrPort, bool) {
	if c.n == 0 {
		return netip.AddrPort{}, false
	}
	for _, e := range c.e[:c.n] {
		if !e.ok {
			return netip.AddrPort{}, false
		}
		if !trusted(e.ap.Addr()) {
			return e.ap, true
		}
	}
	if c.more {
		return netip.AddrPort{}, false
	}
	return c.e[c.n-1].ap, true
}

// window returns the lines of a header that lie whole within its rightmost
// maxChainBytes (each counted with one byte more, so that empty lines count too), the
// tail of the line that straddles the bound (what of it lies within), and whether
// anything lies beyond.
func window(lines []string) (whole []string, partial string, cut bool) {
	budget := maxChainBytes
	for i := len(lines) - 1; i >= 0; i-- {
		l := lines[i]
		if len(l)+1 > budget {
			return lines[i+1:], l[len(l)-max(budget-1, 0):], true
		}
		budget -= len(l) + 1
	}
	return lines, "", false
}

// fillXFF fills c from X-Forwarded-For lines: comma-separated entries, the lines in
// order. It works from the right, within the header's window, and stops after maxChain
// entries.
func (c *chain) fillXFF(lines []string) {
	whole, partial, cut := window(lines)
	c.more = cut
	for i := len(whole) - 1; i >= 0; i-- {
		if !c.xffLine(whole[i]) {
			return
		}
	}
	// The straddling line's first entry in the window is cut short; those after it
	// are whole.
	if k := strings.IndexByte(partial, ','); k >= 0 {
		c.xffLine(partial[k+1:])
	}
}

// xffLine adds the entries of one line, from the right. It returns false, with c.more
// set, if c is full before the line's end.
func (c *chain) xffLine(s string) bool {
	for {
		if c.n == maxChain {
			c.more = true
			return false
		}
		j := strings.LastIndexByte(s, ',')
		ap, ok := parseXFFEntry(strings.Trim(s[j+1:], " \t"))
		c.e[c.n] = entry{ap, ok}
		c.n++
		if j < 0 {
			return true
		}
		s = s[:j]
	}
}

// parseXFFEntry parses one X-Forwarded-For entry. The header has no standard; proxies
// write a bare address, and some add a port: "192.0.2.1", "2001:db8::1",
// "192.0.2.1:4711", "[2001:db8::1]:4711" (or "[2001:db8::1]").
func parseXFFEntry(s string) (netip.AddrPort, bool) {
	if a, err := netip.ParseAddr(s); err == nil {
		return addrPort(a, 0)
	}
	return parseHostPort(s, false)
}

// parseHostPort parses "IPv4[:port]" or "[IPv6][:port]"; obfPort admits RFC 7239's
// obfuscated ports ("_" and identifier characters), read as port 0.
func parseHostPort(s string, obfPort bool) (netip.AddrPort, bool) {
	var host, port string
	var hasPort bool
	rest, bracketed := strings.CutPrefix(s, "[")
	if bracketed {
		var closed bool
		host, rest, closed = strings.Cut(rest, "]")
		if !closed {
			return netip.AddrPort{}, false
		}
		if rest != "" {
			if port, hasPort = strings.CutPrefix(rest, ":"); !hasPort {
				return netip.AddrPort{}, false
			}
		}
	} else {
		host, port, hasPort = strings.Cut(s, ":")
	}
	a, err := netip.ParseAddr(host)
	if err != nil || a.Is6() != bracketed {
		return netip.AddrPort{}, false
	}
	var p uint16
	if hasPort {
		var ok bool
		if obfPort && strings.HasPrefix(port, "_") {
			ok = isObfuscated(port[1:])
		} else {
			p, ok = parsePort(port, true)
		}
		if !ok {
			return netip.AddrPort{}, false
		}
	}
	return addrPort(a, p)
}

// addrPort unmaps a and refuses zones, which name an interface of the sender's host.
func addrPort(a netip.Addr, port uint16) (netip.AddrPort, bool) {
	if a.Zone() != "" {
		return netip.AddrPort{}, false
	}
	return netip.AddrPortFrom(a.Unmap(), port), true
}
