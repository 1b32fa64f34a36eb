package addrbook

// SourceKind says how the book learnt an address. The kinds are ordered by trust, least
// first: a more trusted source's address may push out a less trusted one when a peer has
// MaxAddrsPerPeer addresses, never the reverse.
type SourceKind uint8

// The sources of an address, least trusted first.
const (
	// SourcePeer: a third peer passed the address on (peer exchange); Source.Via is that
	// peer's group.
	SourcePeer SourceKind = iota + 1
	// SourceObserved: a session with the peer ran over the address (its remote address
	// as this node saw it); an inbound session's port is often ephemeral.
	SourceObserved
	// SourceMDNS: the peer answered on the local network.
	SourceMDNS
	// SourceBootstrap: the address is in the node's bootstrap list.
	SourceBootstrap
	// SourceUser: the node's user gave the address.
	SourceUser
	// SourceIdentify: the peer itself listed the address in its signed identify record.
	SourceIdentify
)

var sourceNames = [...]string{
	SourcePeer:      "peer",
	SourceObserved:  "observed",
	SourceMDNS:      "mdns",
	SourceBootstrap: "bootstrap",
	SourceUser:      "user",
	SourceIdentify:  "identify",
}

// String returns the kind's name as Save writes it, e.g. "identify".
func (k SourceKind) String() string {
	if k >= SourcePeer && int(k) < len(sourceNames) {
		return sourceNames[k]
	}
	return "unknown"
}

// parseSourceKind is String's inverse; 0 for an unknown name.
func parseSourceKind(s string) SourceKind {
	for k, name := range sourceNames {
		if name != "" && name == s {
			return SourceKind(k)
		}
	}
	return 0
}

// Source is who told the book an address.
type Source struct {
	// Kind is how the address was learnt.
	Kind SourceKind
	// Via is the group of the peer that passed the address on (SourcePeer); other kinds
	// ignore it.
	Via Group
}

// FromPeer returns the Source of an address passed on by a peer seen at group via.
func FromPeer(via Group) Source { return Source{Kind: SourcePeer, Via: via} }

// bucketGroup is the source group that chooses an address's new-table buckets. A peer's
// word about itself (identify, observed) counts as coming from the address's own group,
// as Bitcoin Core counts a self-announcement: whoever holds a /16 then reaches one bucket
// with it. The node's own sources (bootstrap, mDNS, user) are one group each.
func (s Source) bucketGroup(addr Group) Group {
	switch s.Kind {
	case SourcePeer:
		return s.Via
	case SourceIdentify, SourceObserved:
		return addr
	}
	return Group("source:" + s.Kind.String())
}
