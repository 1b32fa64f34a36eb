package mux

import "testing"

// TestBudgetReserveUpTo: a reservation that does not fit takes what is left, down to its
// least, from the tightest of the budget and its parents; never more than either has free.
func TestBudgetReserveUpTo(t *testing.T) {
	parent := NewBudget(40<<20, nil) // open to children up to 35 MiB
	b := NewBudget(32<<20, parent)
	if got := b.reserveUpTo(24<<20, 64<<10); got != 24<<20 {
		t.Fatalf("a reservation that fits: took %d", got)
	}
	if got := b.reserveUpTo(24<<20, 64<<10); got != 8<<20 {
		t.Fatalf("a reservation larger than what is left: took %d, want the 8 MiB left", got)
	}
	if got := b.reserveUpTo(1<<20, 64<<10); got != 0 {
		t.Fatalf("an exhausted budget: took %d", got)
	}
	other := NewBudget(32<<20, parent)
	if got := other.reserveUpTo(8<<20, 64<<10); got != 3<<20 {
		t.Fatalf("a parent with 3 MiB open and 8 MiB left: took %d, want the 3 MiB open", got)
	}
	b.release(32 << 20)
	if got := b.reserveUpTo(40<<20, 33<<20); got != 0 {
		t.Fatalf("less free than the least asked for: took %d", got)
	}
	if b.Used() != 0 || parent.Used() != 3<<20 {
		t.Fatalf("after the refusals: used %d (parent %d), want 0 (3 MiB)", b.Used(), parent.Used())
	}
}

// TestBudgetNewcomerReserve: children that hold more than NewcomerShare can take only the
// first seven eighths of their parent; the last eighth goes to children holding little, so
// that sessions filling the shared budget cannot starve a new one.
func TestBudgetNewcomerReserve(t *testing.T) {
	shared := NewBudget(16<<20, nil) // 14 MiB open, 2 MiB kept for newcomers
	hogs := []*Budget{NewBudget(8<<20, shared), NewBudget(8<<20, shared)}
	var took int64
	for _, h := range hogs {
		for h.reserve(256 << 10) {
			took += 256 << 10
		}
	}
	if took != 14<<20 {
		t.Fatalf("two large children took %d bytes, want the 14 MiB open to them", took)
	}
	newcomer := NewBudget(8<<20, shared)
	if !newcomer.reserve(NewcomerShare) {
		t.Fatalf("a newcomer could not take its share with the open part spent (shared %v)", shared)
	}
	if newcomer.reserve(1) {
		t.Fatalf("a newcomer took more than NewcomerShare from the reserve")
	}
	second := NewBudget(8<<20, shared)
	if !second.reserve(NewcomerShare) {
		t.Fatalf("a second newcomer could not take its share (shared %v)", shared)
	}
	if third := NewBudget(8<<20, shared); third.reserve(1) {
		t.Fatalf("the reserve lent beyond the shared limit (shared %v)", shared)
	}
	if got := hogs[0].reserveUpTo(1<<20, 1); got != 0 {
		t.Fatalf("a large child grew into the reserve by %d", got)
	}
	// What a large child gives back below the open limit is open to large children again.
	hogs[0].release(4 << 20)
	if got := hogs[1].free(); got != 2<<20 {
		t.Fatalf("a large child sees %d free, want the 2 MiB given back below the open limit", got)
	}
}
