package ratelimit

import (
	"testing"
	"time"
)

func TestLRUEvictsLeastRecentlyUsed(t *testing.T) {
	l := NewLRU[int, int](3)
	for i := range 3 {
		*l.GetOrAdd(i) += 10 + i
	}
	l.Get(0)      // 1 is now the least recently used
	l.GetOrAdd(2) // and still is
	*l.GetOrAdd(3) = 13
	if l.Len() != 3 || l.Get(1) != nil {
		t.Fatalf("after an eviction: len %d, 1 kept %v", l.Len(), l.Get(1) != nil)
	}
	for k, want := range map[int]int{0: 10, 2: 12, 3: 13} {
		if v := l.Get(k); v == nil || *v != want {
			t.Fatalf("key %d: %v, want %d", k, v, want)
		}
	}
	// A forgotten key comes back with the zero state.
	if v := l.GetOrAdd(1); *v != 0 {
		t.Fatalf("a forgotten key came back with %d", *v)
	}
	if l.Len() != 3 {
		t.Fatalf("len %d, bound 3", l.Len())
	}
}

func TestLRUGetOrAddKeepsState(t *testing.T) {
	l := NewLRU[string, Bucket](2)
	r := Rate{Burst: 2, Interval: time.Second}
	for range 2 {
		if !l.GetOrAdd("a").Allow(t0, r) {
			t.Fatal("refused within the burst")
		}
	}
	if l.GetOrAdd("a").Allow(t0, r) {
		t.Fatal("the state of a kept key was lost")
	}
	if l.Get("b") != nil || l.Len() != 1 {
		t.Fatal("Get added a key")
	}
}

func TestLRUBoundBelowOne(t *testing.T) {
	l := NewLRU[int, int](0)
	*l.GetOrAdd(1) = 1
	*l.GetOrAdd(2) = 2
	if l.Len() != 1 || l.Get(1) != nil || *l.Get(2) != 2 {
		t.Fatalf("bound 0: len %d", l.Len())
	}
}
