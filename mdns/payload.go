package mdns

import (
	"fmt"
	"strings"
)

// MaxPayload is the largest payload a Service announces, and the largest it accepts from a
// peer. 1,200 bytes keeps a whole announcement (names, SRV, addresses and the payload split
// into TXT strings) in one 1,500-byte Ethernet frame: an IP fragment lost is a whole
// answer lost, and mDNS has no retransmission of its own beyond the query schedule.
const MaxPayload = 1200

// txtChunk is the most payload bytes one TXT character-string holds (its length is one byte).
const txtChunk = 255

// checkPayload returns ErrPayloadTooLarge (wrapped with the size) for an oversized payload.
func checkPayload(p []byte) error {
	if len(p) > MaxPayload {
		return fmt.Errorf("%w: %d bytes, at most %d", ErrPayloadTooLarge, len(p), MaxPayload)
	}
	return nil
}

// splitTXT cuts a payload into TXT strings of at most 255 bytes, in the escaped presentation
// form that github.com/miekg/dns packs back to the raw bytes. The payload is binary (a
// signed record), so every byte that is not printable ASCII, and the two escape characters,
// become \DDD. An empty payload is one empty string: a TXT record needs at least one
// (RFC 6763 section 6.1).
func splitTXT(p []byte) []string {
	if len(p) == 0 {
		return []string{""}
	}
	out := make([]string, 0, (len(p)+txtChunk-1)/txtChunk)
	for len(p) > 0 {
		n := min(len(p), txtChunk)
		out = append(out, escapeTXT(p[:n]))
		p = p[n:]
	}
	return out
}

func escapeTXT(b []byte) string {
	var s strings.Builder
	s.Grow(len(b))
	for _, c := range b {
		if c < ' ' || c > '~' || c == '"' || c == '\\' {
			s.WriteByte('\\')
			s.WriteByte('0' + c/100)
			s.WriteByte('0' + c/10%10)
			s.WriteByte('0' + c%10)
			continue
		}
		s.WriteByte(c)
	}
	return s.String()
}

// joinTXT reassembles a payload from the strings miekg/dns unpacked (escaped presentation
// form: \DDD and \X). It stops with ok false once the payload would exceed MaxPayload, so a
// peer's TXT record costs at most that much memory here however many strings it carries.
func joinTXT(txt []string) (p []byte, ok bool) {
	for _, s := range txt {
		for i := 0; i < len(s); i++ {
			c := s[i]
			if c == '\\' && i+1 < len(s) {
				if i+3 < len(s) && isDigit(s[i+1]) && isDigit(s[i+2]) && isDigit(s[i+3]) {
					v := int(s[i+1]-'0')*100 + int(s[i+2]-'0')*10 + int(s[i+3]-'0')
					if v > 255 {
						return nil, false
					}
					c = byte(v)
					i += 3
				} else {
					i++
					c = s[i]
				}
			}
			if len(p) == MaxPayload {
				return nil, false
			}
			p = append(p, c)
		}
	}
	return p, true
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }
