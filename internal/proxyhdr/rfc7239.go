package proxyhdr

import (
	"slices"
	"strings"
)

// The Forwarded header's syntax (RFC 7239 section 4, on RFC 7230's tokens and quoted
// strings), parsed into a chain for ClientAddr.

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
// in a ring, then puts them rightmost first. Only the lines whole within the header's
// window are read. A line that does not parse counts as one unusable element: its own
// elements cannot be told apart, but a quoted string cannot span lines, so the lines
// after it (those a proxy added, if the client sent the broken one) still count.
func (c *chain) fillForwarded(lines []string) {
	lines, _, cut := window(lines)
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
	c.more = cut || total > maxChain
	k := c.n
	if total > maxChain {
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
