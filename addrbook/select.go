package addrbook

import (
	"cmp"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/tendril-p2p/tendril/peerrecord"
	"github.com/tendril-p2p/tendril/secio"
)

// groupQueue is one group's candidates in selection order.
type groupQueue struct {
	g            Group
	tried, fresh []*entry
}

func (q *groupQueue) empty() bool { return len(q.tried) == 0 && len(q.fresh) == 0 }

// pop returns the group's next candidate, tried ones first.
func (q *groupQueue) pop() *entry {
	if len(q.tried) > 0 {
		e := q.tried[0]
		q.tried = q.tried[1:]
		return e
	}
	e := q.fresh[0]
	q.fresh = q.fresh[1:]
	return e
}

// spread picks up to n entries from queues, one group at a time: each round takes one
// entry from every group that has one left, in an order that draws from groups offering
// a tried entry and from the others alike (a coin flip per pick, as Bitcoin Core mixes
// its tables), so a second entry of a group is picked only when every group has given
// one. Rounds repeat until n are picked or the queues are empty.
func (b *Book) spread(queues map[Group]*groupQueue, n int) []*entry {
	var out []*entry
	for len(out) < n {
		var withTried, without []*groupQueue
		for _, q := range queues {
			if q.empty() {
				continue
			}
			if len(q.tried) > 0 {
				withTried = append(withTried, q)
			} else {
				without = append(without, q)
			}
		}
		if len(withTried)+len(without) == 0 {
			break
		}
		// Map order is neither random enough to rely on nor reproducible: sort, then
		// shuffle with the book's generator, so that a fixed key gives a fixed draw.
		byGroup := func(x, y *groupQueue) int { return strings.Compare(string(x.g), string(y.g)) }
		slices.SortFunc(withTried, byGroup)
		slices.SortFunc(without, byGroup)
		b.rng.Shuffle(len(withTried), func(i, j int) { withTried[i], withTried[j] = withTried[j], withTried[i] })
		b.rng.Shuffle(len(without), func(i, j int) { without[i], without[j] = without[j], without[i] })
		for len(out) < n && len(withTried)+len(without) > 0 {
			var q *groupQueue
			if len(without) == 0 || (len(withTried) > 0 && b.rng.IntN(2) == 0) {
				q, withTried = withTried[0], withTried[1:]
			} else {
				q, without = without[0], without[1:]
			}
			out = append(out, q.pop())
		}
	}
	return out
}

// queue appends e to its group's queue.
func queue(queues map[Group]*groupQueue, e *entry) {
	q := queues[e.group]
	if q == nil {
		q = &groupQueue{g: e.group}
		queues[e.group] = q
	}
	if e.tried {
		q.tried = append(q.tried, e)
	} else {
		q.fresh = append(q.fresh, e)
	}
}

// shuffleQueues puts each group's candidates in random order, tried and new apart.
func (b *Book) shuffleQueues(queues map[Group]*groupQueue) {
	// In group order: the generator's draws must not follow the map's order.
	for _, g := range slices.Sorted(maps.Keys(queues)) {
		q := queues[g]
		for _, s := range [][]*entry{q.tried, q.fresh} {
			slices.SortFunc(s, func(x, y *entry) int {
				return cmp.Or(strings.Compare(x.key, y.key), x.peer.Compare(y.peer))
			})
			b.rng.Shuffle(len(s), func(i, j int) { s[i], s[j] = s[j], s[i] })
		}
	}
}

// Select returns up to n addresses to dial, at most one per peer and spread across
// groups: no two of one group while another group has a candidate left, tried addresses
// and new ones mixed about evenly while both are on offer. Peers for which exclude
// returns true (connected already, dialling, backing off) are skipped, as are worthless
// and expired addresses; exclude runs with the book locked and must not call it. Each peer is offered at its best address (Addrs' order).
func (b *Book) Select(now time.Time, n int, exclude func(secio.PeerID) bool) []Entry {
	if n <= 0 {
		return nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	queues := make(map[Group]*groupQueue)
	for peer, list := range b.peers {
		if exclude != nil && exclude(peer) {
			continue
		}
		var best *entry
		for _, e := range list {
			if b.terrible(now, e) {
				continue
			}
			if best == nil || b.compare(now, e, best) < 0 {
				best = e
			}
		}
		if best != nil {
			queue(queues, best)
		}
	}
	b.shuffleQueues(queues)
	return b.exportAll(b.spread(queues, n))
}

func (b *Book) exportAll(es []*entry) []Entry {
	out := make([]Entry, len(es))
	for i, e := range es {
		out[i] = b.export(e)
	}
	return out
}

// SampleOptions shape a Sample.
type SampleOptions struct {
	// Asker is the group of the peer the sample is for. Its group's addresses make at
	// most a quarter of the sample's other addresses, so an answer is never only the
	// asker's own group (an attacker asking from its /16 learns little about itself,
	// and cannot have its own addresses echoed back to make them look widely known).
	Asker Group
	// OmitLocal leaves out unroutable addresses (GroupLocal) and in-process ones
	// (GroupMemory): set it when answering a peer that is not on the local network.
	OmitLocal bool
}

// Sample returns up to n addresses (at most MaxSample) to answer a peer-exchange
// request, spread across groups as Select spreads them, tried addresses first within a
// group. Worthless and expired addresses are never shared.
func (b *Book) Sample(now time.Time, n int, opts SampleOptions) []Entry {
	n = min(n, b.cfg.MaxSample)
	if n <= 0 {
		return nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	var cands []*entry
	for _, t := range []*table{&b.triedT, &b.newT} {
		for _, e := range t.slots {
			if e != nil && !b.terrible(now, e) && !(opts.OmitLocal && localGroup(e.group)) {
				cands = append(cands, e)
			}
		}
	}
	return b.exportAll(b.sample(cands, n, opts))
}

// SampleRecords returns up to n signed records (at most MaxSample) to answer a
// peer-exchange request: one per peer, chosen as Sample chooses addresses (spread across
// groups, the asker's own group a quarter of the rest at most), among the addresses that
// came with the peer's current record and are neither worthless nor expired. With
// OmitLocal, a record that lists any unroutable or in-process address is left out whole:
// a signed record cannot be trimmed, and such addresses are never handed to public peers.
func (b *Book) SampleRecords(now time.Time, n int, opts SampleOptions) []*peerrecord.Record {
	n = min(n, b.cfg.MaxSample)
	if n <= 0 {
		return nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	var cands []*entry
	for peer, h := range b.records {
		if opts.OmitLocal && h.local {
			continue
		}
		// The peer's best recorded address stands for it, so a record is drawn once.
		var best *entry
		for _, e := range b.peers[peer] {
			if b.terrible(now, e) || !h.lists(e.key) {
				continue
			}
			if best == nil || b.compare(now, e, best) < 0 {
				best = e
			}
		}
		if best != nil {
			cands = append(cands, best)
		}
	}
	picked := b.sample(cands, n, opts)
	out := make([]*peerrecord.Record, len(picked))
	for i, e := range picked {
		out[i] = b.records[e.peer].rec
	}
	return out
}

// localGroup reports whether g's addresses are of no use to a peer elsewhere on the
// Internet.
func localGroup(g Group) bool { return g == GroupLocal || g == GroupMemory }

// sample spreads up to n of cands across groups, holding the asker's group back to a
// quarter of the others.
func (b *Book) sample(cands []*entry, n int, opts SampleOptions) []*entry {
	queues := make(map[Group]*groupQueue)
	askers := groupQueue{g: opts.Asker}
	for _, e := range cands {
		if opts.Asker != "" && e.group == opts.Asker {
			if e.tried {
				askers.tried = append(askers.tried, e)
			} else {
				askers.fresh = append(askers.fresh, e)
			}
			continue
		}
		queue(queues, e)
	}
	b.shuffleQueues(queues)
	out := b.spread(queues, n)
	if k := min(len(out)/4, n-len(out)); k > 0 {
		b.shuffleQueues(map[Group]*groupQueue{opts.Asker: &askers})
		out = append(out, b.spread(map[Group]*groupQueue{opts.Asker: &askers}, k)...)
	}
	return out
}
