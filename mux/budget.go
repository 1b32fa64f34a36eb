package mux

import (
	"fmt"
	"sync"
)

// Budget bounds the memory that peers can make sessions hold. Every receive window a
// session grants is reserved from its session budget first (Config.MaxSessionMemory) and
// then from the shared Budget in Config.Memory, if any: the initial window of each stream,
// and each time a stream's window grows. A window is the most a peer may send before the
// application reads, so what a session buffers never exceeds what it reserved. A
// reservation is returned as soon as its stream ends (closed both ways, reset, refused) or
// the session closes; no timer keeps it.
//
// When a budget is exhausted, windows stop growing (throughput is capped, nothing fails),
// a stream the peer opens is refused with a reset, and OpenStream fails with
// ErrMemoryBudget; the session itself lives on.
//
// A Budget is safe for concurrent use. The zero value is not usable: use NewBudget.
type Budget struct {
	parent *Budget
	limit  int64

	mu   sync.Mutex
	used int64
}

// NewBudget returns a budget of limit bytes. A non-nil parent is charged as well: a
// reservation succeeds only if it fits both.
func NewBudget(limit int64, parent *Budget) *Budget {
	return &Budget{limit: limit, parent: parent}
}

// Limit returns the budget's size in bytes.
func (b *Budget) Limit() int64 { return b.limit }

// Used returns the bytes reserved now.
func (b *Budget) Used() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.used
}

// String reports use and limit, for logs.
func (b *Budget) String() string { return fmt.Sprintf("%d/%d bytes", b.Used(), b.limit) }

// reserve takes n bytes from b and its parents, all or nothing.
func (b *Budget) reserve(n int64) bool {
	b.mu.Lock()
	if b.used+n > b.limit {
		b.mu.Unlock()
		return false
	}
	b.used += n
	b.mu.Unlock()
	if b.parent != nil && !b.parent.reserve(n) {
		b.mu.Lock()
		b.used -= n
		b.mu.Unlock()
		return false
	}
	return true
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

// free returns the bytes b and its parents could still reserve, at this moment.
func (b *Budget) free() int64 {
	b.mu.Lock()
	n := b.limit - b.used
	b.mu.Unlock()
	if b.parent != nil {
		n = min(n, b.parent.free())
	}
	return n
}

// release returns n bytes to b and its parents.
func (b *Budget) release(n int64) {
	if n == 0 {
		return
	}
	b.mu.Lock()
	b.used -= n
	if b.used < 0 {
		b.mu.Unlock()
		panic("mux: budget released more than it reserved")
	}
	b.mu.Unlock()
	if b.parent != nil {
		b.parent.release(n)
	}
}
