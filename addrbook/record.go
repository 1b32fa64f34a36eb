package addrbook

import (
	"time"

	ma "github.com/multiformats/go-multiaddr"

	"github.com/tendril-p2p/tendril/peerrecord"
	"github.com/tendril-p2p/tendril/secio"
)

// heldRecord is a peer's latest signed record, with what Sample asks of it precomputed.
type heldRecord struct {
	rec *peerrecord.Record
	// local reports whether the record lists an address that is unroutable or in-process:
	// such a record is never handed to a public peer (SampleOptions.OmitLocal), since a
	// signed record cannot be trimmed.
	local bool
}

func newHeldRecord(rec *peerrecord.Record) *heldRecord {
	h := &heldRecord{rec: rec}
	for _, a := range rec.Addrs() {
		if g := GroupOf(a); g == GroupLocal || g == GroupMemory {
			h.local = true
		}
	}
	return h
}

// lists reports whether the record lists the address of key (its binary form): an entry
// is shared with the record only if the record lists its address.
func (h *heldRecord) lists(key string) bool { return h.rec.Lists([]byte(key)) }

// AddRecord adds the addresses of a verified peer record for its peer, as Add does with
// src, and keeps rec as the peer's record if it supersedes the one held (a higher
// sequence number). A record older than the one held is ignored altogether, addresses
// included: the peer has since said where it is. A newer record than the one held resets
// the failures of the addresses it lists, which the book may have stopped offering: the
// owner has said afresh that it is there. It returns how many addresses were new.
//
// Only addresses that came with a record are shared in peer exchange (SampleRecords), and
// only as that record, which the receiver verifies against the peer's key: an address
// given by a user or a bootstrap list is dialled but never passed on as the peer's word.
func (b *Book) AddRecord(now time.Time, rec *peerrecord.Record, src Source) (added int) {
	if rec == nil {
		return 0
	}
	return b.AddRecordAddrs(now, rec, rec.Addrs(), src)
}

// AddRecordAddrs is AddRecord for the addresses of rec in addrs only: the caller's filter
// (its own addresses, unroutable ones from a public peer) keeps the rest out of the book.
// Addresses that rec does not list are ignored. The record is kept (if it supersedes the
// held one) when its peer is in the book afterwards, whichever addresses were added.
func (b *Book) AddRecordAddrs(now time.Time, rec *peerrecord.Record, addrs []ma.Multiaddr, src Source) (added int) {
	if rec == nil || src.Kind < SourcePeer || src.Kind > SourceIdentify {
		return 0
	}
	if src.Kind != SourcePeer {
		src.Via = ""
	}
	peer := rec.Peer()
	h := newHeldRecord(rec)
	b.mu.Lock()
	defer b.mu.Unlock()
	old := b.records[peer]
	if old != nil && rec.Seq() < old.rec.Seq() {
		return 0
	}
	// A newer record is the owner saying afresh where it is (it restarted, or moved):
	// its addresses' failures, counted against what it said before, start again. Only the
	// peer's own key can sign one, so a stranger can refresh no address but its own.
	fresh := old != nil && rec.Supersedes(old.rec)
	for _, a := range addrs {
		key := string(a.Bytes())
		if !h.lists(key) {
			continue
		}
		if b.add(now, peer, a, src) {
			added++
		} else if e := b.find(peer, key); fresh && e != nil {
			e.failures = 0
		}
	}
	if _, in := b.peers[peer]; in && (old == nil || rec.Supersedes(old.rec)) {
		b.records[peer] = h
	}
	return added
}

// Record returns the latest signed record held for peer, or nil. The book holds one only
// while the peer has an address in it.
func (b *Book) Record(peer secio.PeerID) *peerrecord.Record {
	b.mu.Lock()
	defer b.mu.Unlock()
	if h := b.records[peer]; h != nil {
		return h.rec
	}
	return nil
}
