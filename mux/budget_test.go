package mux

import "testing"

// TestBudgetReserveUpTo: a reservation that does not fit takes what is left, down to its
// least, from the tightest of the budget and its parents; never more than either has free.
func TestBudgetReserveUpTo(t *testing.T) {
	parent := NewBudget(10<<20, nil)
	b := NewBudget(8<<20, parent)
	if got := b.reserveUpTo(6<<20, 64<<10); got != 6<<20 {
		t.Fatalf("a reservation that fits: took %d", got)
	}
	if got := b.reserveUpTo(6<<20, 64<<10); got != 2<<20 {
		t.Fatalf("a reservation larger than what is left: took %d, want the 2 MiB left", got)
	}
	if got := b.reserveUpTo(1<<20, 64<<10); got != 0 {
		t.Fatalf("an exhausted budget: took %d", got)
	}
	other := NewBudget(8<<20, parent)
	if got := other.reserveUpTo(4<<20, 64<<10); got != 2<<20 {
		t.Fatalf("a parent with 2 MiB left: took %d", got)
	}
	b.release(8 << 20)
	if got := b.reserveUpTo(16<<20, 9<<20); got != 0 {
		t.Fatalf("less free than the least asked for: took %d", got)
	}
	if b.Used() != 0 || parent.Used() != 2<<20 {
		t.Fatalf("after the refusals: used %d (parent %d), want 0 (2 MiB)", b.Used(), parent.Used())
	}
}
