package proxyhdr

import (
	"net/http"
	"net/netip"
	"slices"
	"strings"
)

// Bounds on a forwarding chain. Each proxy on the way adds one entry, and a legitimate
// chain has a handful; everything beyond is a client's own text.
const (
	// maxChainBytes bounds one header's lines, counted together: a longer header is not
	// read at all, and the connection keeps the proxy's address (not the other header's
	// word alone, which a client could otherwise get by padding this one).
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
//   - a header is longer than 4 KiB, or the 64 rightmost entries are all trusted (the
//     leftmost is then out of reach);
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
	bad  bool // the header is unusable as a whole
}

// entry is one hop's client address; ok is false if the entry does not give one.
type entry struct {
	ap netip.AddrPort
	ok bool
}

// client walks c from the right past trusted addresses (the rule in ClientAddr).
func (c *chain) client(trusted func(netip.Addr) bool) (netip.AddrPort, bool) {
	if c.bad || c.n == 0 {
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

// tooLong reports whether a header's lines exceed maxChainBytes (each line counted with a
// separator, so that many empty lines count too).
func tooLong(lines []string) bool {
	n := 0
	for _, l := range lines {
		n += len(l) + 1
		if n > maxChainBytes {
			return true
		}
	}
	return false
}

// fillXFF fills c from X-Forwarded-For lines: comma-separated entries, the lines in
// order. It works from the right and stops after maxChain entries.
func (c *chain) fillXFF(lines []string) {
	if tooLong(lines) {
		c.bad = true
		return
	}
	for i := len(lines) - 1; i >= 0; i-- {
		s := lines[i]
		for {
			if c.n == maxChain {
				c.more = true
				return
			}
			j := strings.LastIndexByte(s, ',')
			ap, ok := parseXFFEntry(strings.Trim(s[j+1:], " \t"))
			c.e[c.n] = entry{ap, ok}
			c.n++
			if j < 0 {
				break
			}
			s = s[:j]
		}
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

// isObfuscated reports whether s is the part after "_" of an RFC 7239 obfuscated
// identifier: 1*( ALPHA / DIGIT / "." / "_" / "-" ).
func isObfuscated(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(isAlnum(c) || c == '.' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// fillForwarded fills c from Forwarded lines (RFC 7239 section 4): comma-separated
// elements, each of ";"-separated name=value pairs, the value a token or a quoted string.
// Quoting means a line must be read from the left; c keeps the last maxChain elements,
// in a ring, then puts them rightmost first. A line that does not parse counts as one
// unusable element: its own elements cannot be told apart, but a quoted string cannot
// span lines, so the lines after it (those a proxy added, if the client sent the broken
// one) still count.
func (c *chain) fillForwarded(lines []string) {
	if tooLong(lines) {
		c.bad = true
		return
	}
	total := 0
	for _, l := range lines {
		if n, ok := c.forwardedLine(l, total); ok {
			total = n
		} else {
			// Overwrites the line's first element, if it had any. The ring slots its
			// other elements took may have held older entries, now lost; no walk reads
			// past this one, which is unusable.
			c.e[total%maxChain] = entry{}
			total++
		}
	}
	// The ring holds the newest k elements at its start and the older ones after them,
	// each run left to right: reversing each run puts the whole rightmost first.
	c.n = min(total, maxChain)
	c.more = total > maxChain
	k := c.n
	if c.more {
		k = total % maxChain
	}
	slices.Reverse(c.e[:k])
	slices.Reverse(c.e[k:c.n])
}

// forwardedLine parses one Forwarded line into the ring from element number total on,
// and returns the count after it; ok is false on a syntax error.
func (c *chain) forwardedLine(l string, total int) (int, bool) {
	p := fwdParser{s: l}
	for {
		e, ok := p.element()
		if !ok {
			return 0, false
		}
		c.e[total%maxChain] = e
		total++
		p.ows()
		if p.i == len(p.s) {
			return total, true
		}
		if p.s[p.i] != ',' {
			return 0, false
		}
		p.i++
	}
}

// fwdParser reads one Forwarded line from s[i:].
type fwdParser struct {
	s string
	i int
}

// ows skips optional white space (RFC 7230), which this parser allows around ",", ";"
// and at the line's ends.
func (p *fwdParser) ows() {
	for p.i < len(p.s) && (p.s[p.i] == ' ' || p.s[p.i] == '\t') {
		p.i++
	}
}

// element parses one forwarded-element; ok is false on a syntax error. The entry's ok is
// false if the element gives no usable for= (none, twice, or not an IP address).
func (p *fwdParser) element() (e entry, ok bool) {
	fors := 0
	for {
		p.ows()
		name := p.token()
		if name == "" || p.i == len(p.s) || p.s[p.i] != '=' {
			return entry{}, false
		}
		p.i++
		value, escaped, ok := p.value()
		if !ok {
			return entry{}, false
		}
		if strings.EqualFold(name, "for") {
			fors++
			// No node needs a quoted-pair: an escaped one is odd enough to be unusable.
			if !escaped {
				e.ap, e.ok = parseHostPort(value, true)
			}
		}
		p.ows()
		if p.i == len(p.s) || p.s[p.i] != ';' {
			break
		}
		p.i++
	}
	if fors != 1 {
		e = entry{}
	}
	return e, true
}

// token reads a token (RFC 7230 tchar), empty if there is none.
func (p *fwdParser) token() string {
	start := p.i
	for p.i < len(p.s) && isTchar(p.s[p.i]) {
		p.i++
	}
	return p.s[start:p.i]
}

// value reads a token or a quoted string, returning the quoted string's content without
// its quotes and whether it held a quoted-pair (then content is not unescaped).
func (p *fwdParser) value() (content string, escaped, ok bool) {
	if p.i == len(p.s) || p.s[p.i] != '"' {
		t := p.token()
		return t, false, t != ""
	}
	p.i++
	start := p.i
	for p.i < len(p.s) {
		c := p.s[p.i]
		switch {
		case c == '"':
			p.i++
			return p.s[start : p.i-1], escaped, true
		case c == '\\':
			if p.i+1 == len(p.s) || !isQuotedPairChar(p.s[p.i+1]) {
				return "", false, false
			}
			escaped = true
			p.i += 2
		case isQdtext(c):
			p.i++
		default:
			return "", false, false
		}
	}
	return "", false, false // no closing quote
}

func isAlnum(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
}

func isTchar(c byte) bool {
	return isAlnum(c) || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0
}

// isQdtext: HTAB, SP, VCHAR but '"' and '\', obs-text.
func isQdtext(c byte) bool {
	return c == '\t' || c == ' ' || c >= 0x21 && c != '"' && c != '\\' && c != 0x7f
}

// isQuotedPairChar: what may follow '\' in a quoted string: HTAB, SP, VCHAR, obs-text.
func isQuotedPairChar(c byte) bool {
	return c == '\t' || c == ' ' || c >= 0x21 && c != 0x7f
}
