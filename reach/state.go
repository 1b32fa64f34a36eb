package reach

import (
	"time"

	"github.com/tendril-p2p/tendril/addrbook"
	"github.com/tendril-p2p/tendril/secio"
)

// State is what dial-backs say of an address, or of the node.
type State uint8

// The states of an address. Unknown until enough groups agree.
const (
	Unknown State = iota // not enough answers yet, or they disagree
	Public               // dialled back from Config.Confirmations groups, more than failed
	Private              // dial-backs failed from Config.Confirmations groups, more than succeeded
)

// String returns "unknown", "public" or "private".
func (s State) String() string {
	switch s {
	case Public:
		return "public"
	case Private:
		return "private"
	}
	return "unknown"
}

// result is one group's last answer about an address.
type result struct {
	ok   bool
	at   time.Time
	peer secio.PeerID // the server that answered
}

// decide is the rule that turns groups' answers into a state: an address is Public once
// at least k groups dialled it back and more groups succeeded than failed, Private once at
// least k groups failed and more failed than succeeded, Unknown otherwise. One liar (or one
// group) can thus never decide alone, and a public address that one group cannot reach
// (its outbound firewall, a lost SYN) stays public while the others agree: go-libp2p's
// public nodes reported private (#3087) came from letting recent failures outvote.
func decide(succeeded, failed, k int) State {
	switch {
	case succeeded >= k && succeeded > failed:
		return Public
	case failed >= k && failed > succeeded:
		return Private
	}
	return Unknown
}

// tallyResults counts the groups whose last answer is not older than maxAge at now.
func tallyResults(results map[addrbook.Group]result, now time.Time, maxAge time.Duration) (succeeded, failed int) {
	for _, r := range results {
		if now.Sub(r.at) > maxAge {
			continue
		}
		if r.ok {
			succeeded++
		} else {
			failed++
		}
	}
	return succeeded, failed
}

// overall is the node's reachability from its addresses': Public if any is, else
// Private if any is, else Unknown.
func overall(states []State) State {
	out := Unknown
	for _, s := range states {
		switch s {
		case Public:
			return Public
		case Private:
			out = Private
		}
	}
	return out
}
