package protocol

import (
	"fmt"
	"strconv"
	"strings"
)

// Limits on names and versions. They bound the negotiation messages (see
// MaxNegotiationSize) and are checked on both sides.
const (
	// MaxNameLen is the maximum length of a protocol name in bytes.
	MaxNameLen = 128
	// MaxVersionLen is the maximum length of a version string in bytes.
	MaxVersionLen = 24
	// MaxVersionComponent is the maximum number of digits in one component of
	// a version ("123456789" is the largest component).
	MaxVersionComponent = 9
	// MaxVersions is the maximum number of versions one side may offer.
	MaxVersions = 32
)

// Version is a parsed version: its numeric components, most significant
// first.
type Version []uint32

// String formats v as dot-separated decimal numbers.
func (v Version) String() string {
	var b strings.Builder
	for i, c := range v {
		if i > 0 {
			b.WriteByte('.')
		}
		b.WriteString(strconv.FormatUint(uint64(c), 10))
	}
	return b.String()
}

// Compare returns -1, 0 or +1 as v is older than, equal to or newer than w.
// Missing trailing components count as zero.
func (v Version) Compare(w Version) int {
	for i := range max(len(v), len(w)) {
		var a, b uint32
		if i < len(v) {
			a = v[i]
		}
		if i < len(w) {
			b = w[i]
		}
		if a != b {
			if a < b {
				return -1
			}
			return 1
		}
	}
	return 0
}

// ParseVersion parses a version string: one or more components of 1 to
// MaxVersionComponent decimal digits separated by single dots, at most
// MaxVersionLen bytes in all. Leading zeros are allowed and ignored.
func ParseVersion(s string) (Version, error) {
	if !ValidVersion(s) {
		return nil, fmt.Errorf("%w: %q", ErrInvalidVersion, truncate(s))
	}
	v := make(Version, 0, strings.Count(s, ".")+1)
	for c := range strings.SplitSeq(s, ".") {
		n, err := strconv.ParseUint(c, 10, 32)
		if err != nil { // unreachable after ValidVersion, kept as a guard
			return nil, fmt.Errorf("%w: %q", ErrInvalidVersion, truncate(s))
		}
		v = append(v, uint32(n))
	}
	return v, nil
}

// ValidVersion reports whether s is a well-formed version (see ParseVersion).
func ValidVersion(s string) bool {
	if len(s) == 0 || len(s) > MaxVersionLen {
		return false
	}
	digits := 0
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c >= '0' && c <= '9':
			digits++
			if digits > MaxVersionComponent {
				return false
			}
		case c == '.':
			if digits == 0 {
				return false
			}
			digits = 0
		default:
			return false
		}
	}
	return digits > 0
}

// CompareVersions compares two version strings as versions, not as strings:
// components are compared as numbers from left to right and missing trailing
// components count as zero. It returns -1, 0 or +1 as a is older than, equal
// to or newer than b. So "10.0" > "9.0", "1.10" > "1.9" and "1" == "1.0".
//
// An invalid version sorts before every valid one; two invalid versions are
// compared as strings. CompareVersions does not allocate.
func CompareVersions(a, b string) int {
	va, vb := ValidVersion(a), ValidVersion(b)
	switch {
	case !va && !vb:
		return strings.Compare(a, b)
	case !va:
		return -1
	case !vb:
		return 1
	}
	for a != "" || b != "" {
		var ca, cb string
		ca, a = nextComponent(a)
		cb, b = nextComponent(b)
		ca, cb = strings.TrimLeft(ca, "0"), strings.TrimLeft(cb, "0")
		if len(ca) != len(cb) {
			if len(ca) < len(cb) {
				return -1
			}
			return 1
		}
		if c := strings.Compare(ca, cb); c != 0 {
			return c
		}
	}
	return 0
}

// nextComponent splits the first component off a valid version string; an
// empty string yields an empty component, which compares as zero.
func nextComponent(s string) (comp, rest string) {
	comp, rest, _ = strings.Cut(s, ".")
	return comp, rest
}

// SelectFunc chooses the version to speak on a new stream. local is the
// acceptor's list (as registered), remote the opener's list (validated). It
// returns the chosen version and true, or false to refuse the stream with
// CodeNoCommonVersion. The chosen version must be one the remote offered
// (compared with CompareVersions); otherwise Accept refuses with CodeRefused.
type SelectFunc func(local, remote []string) (version string, ok bool)

// SelectHighest is the default SelectFunc: the highest version (compared with
// CompareVersions) supported by both sides, in the acceptor's spelling.
func SelectHighest(local, remote []string) (string, bool) {
	best, found := "", false
	for _, l := range local {
		if !ValidVersion(l) || (found && CompareVersions(l, best) <= 0) {
			continue
		}
		for _, r := range remote {
			if CompareVersions(l, r) == 0 {
				best, found = l, true
				break
			}
		}
	}
	return best, found
}

// truncate shortens a string for inclusion in an error message.
func truncate(s string) string {
	const n = 40
	if len(s) > n {
		return s[:n] + "..."
	}
	return s
}
