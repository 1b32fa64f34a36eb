package connmgr

// The decisions of a round, as plain code: which address of a peer may be dialled now,
// and whether a dial fits the outbound slots and its group's share of them.

import (
	"fmt"
	"time"

	ma "github.com/multiformats/go-multiaddr"

	"github.com/tendril-p2p/tendril/addrbook"
	"github.com/tendril-p2p/tendril/secio"
)

// addrState is what the Manager remembers of one address it dialled: its failures in a
// row (as the backoff counts them) and when it may be dialled next.
type addrState struct {
	failures int
	last     time.Time // when its last attempt ended
	next     time.Time
}

// readyAt returns when an address may be dialled: as its state says, or, for one the
// Manager has no state of (it never dialled it since it started, or forgot it), as the
// book's history says: its last attempt plus the backoff of its failures, without
// jitter. So a node restarted with its book does not redial at once what had failed.
func readyAt(st *addrState, e *addrbook.Entry, c BackoffConfig) time.Time {
	if st != nil {
		return st.next
	}
	if e == nil || e.Failures == 0 {
		return time.Time{}
	}
	return e.LastAttempt.Add(Backoff(e.Failures, c, 0.5))
}

// choice is an address picked for a dial.
type choice struct {
	addr  ma.Multiaddr
	key   string // addr's binary form
	group addrbook.Group
}

// chooseAddr returns the first of a peer's addresses that may be dialled at now: the
// book's, best first, then extra ones (a kept peer's, given by the application) the book
// does not list. If none may, ok is false and at is when the first becomes ready (zero
// if there is no address at all).
func chooseAddr(now time.Time, book []addrbook.Entry, extra []ma.Multiaddr, states map[string]*addrState, c BackoffConfig) (ch choice, at time.Time, ok bool) {
	consider := func(a ma.Multiaddr, key string, e *addrbook.Entry) bool {
		r := readyAt(states[key], e, c)
		if !r.After(now) {
			ch = choice{addr: a, key: key, group: addrbook.GroupOf(a)}
			return true
		}
		if at.IsZero() || r.Before(at) {
			at = r
		}
		return false
	}
	seen := make(map[string]bool, len(book))
	for i := range book {
		key := string(book[i].Addr.Bytes())
		seen[key] = true
		if consider(book[i].Addr, key, &book[i]) {
			return ch, time.Time{}, true
		}
	}
	for _, a := range extra {
		key := string(a.Bytes())
		if seen[key] {
			continue
		}
		seen[key] = true
		if consider(a, key, nil) {
			return ch, time.Time{}, true
		}
	}
	return choice{}, at, false
}

// exempt reports whether a group is spared MaxPerGroup: every peer on a LAN is in the
// local group and every in-process peer in the memory group, so they cannot be diverse.
func exempt(g addrbook.Group) bool { return g == addrbook.GroupLocal || g == addrbook.GroupMemory }

// slots is the outbound budget of a round: sessions and book dials counted against
// Target, in total and per group.
type slots struct {
	target      int
	maxPerGroup int // -1: no cap
	used        int
	perGroup    map[addrbook.Group]int
}

func newSlots(target, maxPerGroup int) *slots {
	return &slots{target: target, maxPerGroup: maxPerGroup, perGroup: make(map[addrbook.Group]int)}
}

// take counts one session or dial of group g.
func (s *slots) take(g addrbook.Group) {
	s.used++
	s.perGroup[g]++
}

// refuse returns why one more of group g does not fit, or "" if it does.
func (s *slots) refuse(g addrbook.Group) string {
	if s.used >= s.target {
		return fmt.Sprintf("outbound slots full (%d/%d)", s.used, s.target)
	}
	if s.maxPerGroup >= 0 && !exempt(g) && s.perGroup[g] >= s.maxPerGroup {
		return fmt.Sprintf("group %s at its cap (%d outbound)", g, s.maxPerGroup)
	}
	return ""
}

// cappedGroups counts the groups at their cap.
func (s *slots) cappedGroups() int {
	n := 0
	for g, c := range s.perGroup {
		if s.maxPerGroup >= 0 && !exempt(g) && c >= s.maxPerGroup {
			n++
		}
	}
	return n
}

// selectSize is how many candidates to ask the book for when room dials may start: the
// book spreads its answer across groups, one per group and round, so asking for room
// plus one per capped group, doubled, finds room acceptable ones whenever the book has
// them, except when most groups are capped (the next round asks again).
func selectSize(room, capped int) int { return min(2*(room+capped)+8, 256) }

// dial is a dial pick decided.
type dial struct {
	peer secio.PeerID
	choice
}

// pick chooses up to room book dials that fit sl, taking their slots. exclude skips
// peers (connected, dialling, kept, known to be backing off; it runs with the book
// locked); states returns a peer's address states (nil: none). A candidate none of whose
// addresses is ready is handed to later with the time its first one will be; if later
// notes it (so that exclude skips it from now on), the book is asked again, at most four
// times: after a restart the book's history, not the Manager's, says who is backing off.
func pick(now time.Time, book *addrbook.Book, sl *slots, room int, c BackoffConfig,
	exclude func(secio.PeerID) bool, states func(secio.PeerID) map[string]*addrState,
	later func(secio.PeerID, time.Time) bool) []dial {
	var out []dial
	picked := make(map[secio.PeerID]bool)
	skip := func(p secio.PeerID) bool { return picked[p] || exclude(p) }
	for pass := 0; room > 0 && pass < 4; pass++ {
		n := selectSize(room, sl.cappedGroups())
		cands := book.Select(now, n, skip)
		again := false
		for _, cand := range cands {
			if room == 0 {
				break
			}
			ch, at, ok := chooseAddr(now, book.Addrs(now, cand.Peer), nil, states(cand.Peer), c)
			if !ok {
				if !at.IsZero() && later(cand.Peer, at) {
					again = true
				}
				continue
			}
			if sl.refuse(ch.group) != "" {
				continue
			}
			sl.take(ch.group)
			room--
			picked[cand.Peer] = true
			out = append(out, dial{peer: cand.Peer, choice: ch})
		}
		if !again || len(cands) < n {
			break
		}
	}
	return out
}
