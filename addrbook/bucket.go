package addrbook

import (
	"encoding/binary"
	"slices"
	"time"

	"github.com/tendril-p2p/tendril/hash/blake3"
)

// The tables follow Bitcoin Core's address manager. An address has one position in the
// new table and one in the tried table, both chosen by a keyed hash that peers cannot
// predict, so they cannot aim at a slot:
//
//	new:   bucket = H(source group, H(group, source group) mod NewBucketsPerSource) mod NewBuckets
//	tried: bucket = H(group, H(address) mod TriedBucketsPerGroup) mod TriedBuckets
//	slot   = H(table, bucket, address) mod slots
//
// One source group therefore reaches at most NewBucketsPerSource new buckets, one group
// with one source group a single bucket, and one group at most TriedBucketsPerGroup
// tried buckets. The address (not the peer) picks the slot, so one address claimed by
// many peer IDs contends for one slot.
//
// The local and in-process groups are the exception in the new table: every LAN address
// and every /memory/N is in one of them, so "one group, one bucket" would leave a node 32
// slots for its whole LAN (a swarm of 50 in one process kept 26 of its peers). Their
// addresses take the address itself in place of the group in the first hash, spreading
// over the source's NewBucketsPerSource buckets: the source's own cap still holds, and
// such addresses come only from peers on the same LAN, mDNS or identify (peer exchange
// drops them from public peers).

// table is a fixed array of slots, buckets*slots long, each empty or holding one entry.
type table struct {
	slots     []*entry
	perBucket int
}

func newTable(buckets, slots int) table {
	return table{slots: make([]*entry, buckets*slots), perBucket: slots}
}

func (t *table) buckets() int { return len(t.slots) / t.perBucket }

// hasher computes the keyed position hashes.
type hasher struct{ h *blake3.Hasher }

func newHasher(key [32]byte) hasher {
	h, err := blake3.NewKeyed(key[:])
	if err != nil {
		panic(err) // the key has KeySize bytes by its type
	}
	return hasher{h}
}

// sum hashes the length-prefixed fields, so that no two field lists hash alike.
func (k hasher) sum(fields ...string) uint64 {
	k.h.Reset()
	var n [4]byte
	for _, f := range fields {
		binary.LittleEndian.PutUint32(n[:], uint32(len(f)))
		k.h.Write(n[:])
		k.h.WriteString(f)
	}
	var out [32]byte
	return binary.LittleEndian.Uint64(k.h.Sum(out[:0]))
}

func itoa(v uint64) string { return string(binary.LittleEndian.AppendUint64(nil, v)) }

// newPos returns e's index in the new table.
func (b *Book) newPos(e *entry) int {
	src := e.src.bucketGroup(e.group)
	spread := string(e.group)
	if localGroup(e.group) {
		spread = e.key
	}
	h1 := b.hash.sum("new1", spread, string(src)) % uint64(b.cfg.NewBucketsPerSource)
	bucket := b.hash.sum("new2", string(src), itoa(h1)) % uint64(b.newT.buckets())
	slot := b.hash.sum("newslot", itoa(bucket), e.key) % uint64(b.newT.perBucket)
	return int(bucket)*b.newT.perBucket + int(slot)
}

// triedPos returns e's index in the tried table.
func (b *Book) triedPos(e *entry) int {
	h1 := b.hash.sum("tried1", e.key) % uint64(b.cfg.TriedBucketsPerGroup)
	bucket := b.hash.sum("tried2", string(e.group), itoa(h1)) % uint64(b.triedT.buckets())
	slot := b.hash.sum("triedslot", itoa(bucket), e.key) % uint64(b.triedT.perBucket)
	return int(bucket)*b.triedT.perBucket + int(slot)
}

// expires returns when e stops being worth keeping.
func (b *Book) expires(e *entry) time.Time {
	if e.tried || !e.lastSuccess.IsZero() {
		return later(e.lastSuccess, e.lastSeen).Add(b.cfg.TriedTTL)
	}
	return e.lastSeen.Add(b.cfg.TTL)
}

func later(a, c time.Time) time.Time {
	if a.After(c) {
		return a
	}
	return c
}

// terrible reports whether e is worthless: expired, or failed too often in a row. A
// terrible entry is never selected or shared and gives way to any newcomer; it stays
// until something needs its slot, so that Addrs can still say why a peer is not dialled.
func (b *Book) terrible(now time.Time, e *entry) bool {
	if !now.Before(b.expires(e)) {
		return true
	}
	if e.lastSuccess.IsZero() {
		return e.failures >= b.cfg.MaxFailuresNew
	}
	return e.failures >= b.cfg.MaxFailuresTried
}

// worse reports whether a is a worse entry to keep than c: terrible before not, then
// more failures in a row, then never connected before connected, then older news.
func (b *Book) worse(now time.Time, a, c *entry) bool {
	if ta, tc := b.terrible(now, a), b.terrible(now, c); ta != tc {
		return ta
	}
	if a.failures != c.failures {
		return a.failures > c.failures
	}
	if sa, sc := a.lastSuccess.IsZero(), c.lastSuccess.IsZero(); sa != sc {
		return sa
	}
	return later(a.lastSuccess, a.lastSeen).Before(later(c.lastSuccess, c.lastSeen))
}

// promote moves e from the new table to the tried table after a success. When e's tried
// slot is taken, Bitcoin Core tests the occupant before evicting it; this book uses its
// own history as the test: an occupant that has not failed since its last success and
// has not expired stays, and e waits in the new table for a later success. Otherwise the
// occupant goes back to the new table (its new slot's holder leaving the book).
func (b *Book) promote(now time.Time, e *entry) {
	pos := b.triedPos(e)
	occ := b.triedT.slots[pos]
	if occ != nil && occ.failures == 0 && now.Before(b.expires(occ)) {
		return
	}
	b.newT.slots[e.pos] = nil
	b.triedT.slots[pos] = e
	e.pos, e.tried = pos, true
	if occ == nil {
		return
	}
	npos := b.newPos(occ)
	if held := b.newT.slots[npos]; held != nil {
		b.drop(held)
	}
	b.newT.slots[npos] = occ
	occ.pos, occ.tried = npos, false
}

// drop removes e from its table and from its peer's list, and the peer (and its record)
// with its last address.
func (b *Book) drop(e *entry) {
	if e.tried {
		b.triedT.slots[e.pos] = nil
	} else {
		b.newT.slots[e.pos] = nil
	}
	e.pos = -1
	list := b.peers[e.peer]
	if i := slices.Index(list, e); i >= 0 {
		list = slices.Delete(list, i, i+1)
	}
	if len(list) == 0 {
		delete(b.peers, e.peer)
		delete(b.records, e.peer)
	} else {
		b.peers[e.peer] = list
	}
	b.n--
}
