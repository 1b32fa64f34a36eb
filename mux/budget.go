package mux

import (
	"fmt"
	"sync/atomic"
)

// NewcomerShare is what a budget's child may hold and still draw on the budget's reserve:
// the last eighth of every budget that is the parent of others is kept for children
// holding at most this much (a new session, a session with little in flight), so that
// however many bytes a set of sessions holds, the next session can still receive its first
// messages and the node's own streams to other peers keep working.
const NewcomerShare = 1 << 20

// reserveFraction: a parent keeps 1/reserveFraction of its limit for its newcomers.
const reserveFraction = 8

// Budget bounds the memory that peers can make sessions hold. What a session buffers for
// its streams is reserved from its session budget first (Config.MaxSessionMemory) and then
// from the shared Budget in Config.Memory, if any, before it is held:
//
//   - data that arrives on a stream, chunk by chunk as it is buffered, and returned as the
//     application reads it, so that an idle stream holds nothing;
//   - over a connection read a record at a time (see the package documentation), each
//     record's buffer, whole, from before the record is read until the last of it is let
//     go: a large data frame stays in the record's buffer for its stream, and the whole
//     buffer (its headers, the frames copied out, dropped or already read) stays counted
//     while any frame in it is held unread (data a stream with a grown window holds there
//     is thus counted twice, with the window);
//   - a stream's whole window once it has grown (a stream moving bulk data keeps its window
//     backed, so that it never has to be refused halfway), until the stream ends.
//
// A reservation is returned as soon as its data is read or its stream ends (closed both
// ways, reset, refused) or the session closes; no timer keeps it.
//
// When a budget is exhausted, windows stop growing (throughput is capped, nothing fails)
// and a stream whose arriving data does not fit is reset with an error matching both
// ErrStreamReset and ErrMemoryBudget; the session itself lives on.
//
// A budget that is the parent of others (the Service's shared budget, whose children are
// its sessions) is not first come, first served: it keeps its last eighth for children that
// hold at most NewcomerShare, so that no set of sessions can starve the others or the node
// itself.
//
// A Budget is safe for concurrent use and takes no lock: two reservations racing for the
// last bytes may both fail where one alone would have fit. The zero value is not usable:
// use NewBudget.
type Budget struct {
	parent *Budget
	limit  int64
	used   atomic.Int64
}

// NewBudget returns a budget of limit bytes. A non-nil parent is charged as well: a
// reservation succeeds only if it fits both.
func NewBudget(limit int64, parent *Budget) *Budget {
	return &Budget{limit: limit, parent: parent}
}

// Limit returns the budget's size in bytes.
func (b *Budget) Limit() int64 { return b.limit }

// Used returns the bytes reserved now.
func (b *Budget) Used() int64 { return b.used.Load() }

// String reports use and limit, for logs.
func (b *Budget) String() string { return fmt.Sprintf("%d/%d bytes", b.Used(), b.limit) }

// Reserve takes n bytes from b and its parents, all or nothing, and reports whether it
// did. It is for other layers that buffer on a session's behalf (secio's record buffers):
// what they hold then counts against the same limits as the session's streams.
func (b *Budget) Reserve(n int64) bool { return b.reserve(n) }

// Release returns n bytes taken with Reserve.
func (b *Budget) Release(n int64) { b.release(n) }

// openLimit is what b lends to children holding more than NewcomerShare.
func (b *Budget) openLimit() int64 { return b.limit - b.limit/reserveFraction }

// reserve takes n bytes from b and its parents, all or nothing.
func (b *Budget) reserve(n int64) bool {
	if n <= 0 {
		return n == 0
	}
	u := b.used.Add(n)
	if u > b.limit || (b.parent != nil && !b.parent.lend(n, u)) {
		b.used.Add(-n)
		return false
	}
	return true
}

// lend takes n bytes from b (and its parents) for a child that holds childUsed bytes
// counting them: past openLimit, only for a newcomer.
func (b *Budget) lend(n, childUsed int64) bool {
	u := b.used.Add(n)
	ok := u <= b.limit && (u <= b.openLimit() || childUsed <= NewcomerShare)
	if ok && b.parent != nil {
		ok = b.parent.lend(n, u)
	}
	if !ok {
		b.used.Add(-n)
	}
	return ok
}

// reserveUpTo takes want bytes from b and its parents or, if they do not have that much
// free, what they have if that is at least least bytes; it returns what it took (0: none).
// A window grows by what the budget has left rather than not at all, so that a budget is
// used up to its limit (eight streams growing by doubling would otherwise stop with a whole
// step's worth unused).
func (b *Budget) reserveUpTo(want, least int64) int64 {
	if b.reserve(want) {
		return want
	}
	n := min(want, b.free())
	if n < least || !b.reserve(n) {
		return 0
	}
	return n
}

// free returns the bytes b and its parents could still lend to b, at this moment.
func (b *Budget) free() int64 {
	used := b.used.Load()
	n := b.limit - used
	if b.parent != nil {
		n = min(n, b.parent.freeFor(used))
	}
	return max(n, 0)
}

// freeFor returns the bytes b could lend to a child holding childUsed bytes.
func (b *Budget) freeFor(childUsed int64) int64 {
	used := b.used.Load()
	n := max(b.openLimit()-used, min(b.limit-used, NewcomerShare-childUsed))
	if b.parent != nil {
		n = min(n, b.parent.freeFor(used))
	}
	return max(n, 0)
}

// release returns n bytes to b and its parents.
func (b *Budget) release(n int64) {
	if n == 0 {
		return
	}
	if b.used.Add(-n) < 0 {
		panic("mux: budget released more than it reserved")
	}
	if b.parent != nil {
		b.parent.release(n)
	}
}
