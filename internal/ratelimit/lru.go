package ratelimit

import "container/list"

// LRU maps keys to state, keeping at most a fixed number of keys: adding one more forgets
// the least recently used. It bounds what a limiter remembers of peers it cannot refuse to
// meet; the state of a forgotten key starts again from its zero value, so a limiter that
// keeps Buckets in it needs a global limit too (a swarm of keys each gets a full bucket).
// Not safe for concurrent use.
type LRU[K comparable, V any] struct {
	max   int
	items map[K]*list.Element
	order list.List // front: most recently used; values are *lruItem[K, V]
}

type lruItem[K comparable, V any] struct {
	key K
	v   V
}

// NewLRU returns an empty LRU of at most n keys (at least one: a bound of none would
// have nowhere to put the key being added).
func NewLRU[K comparable, V any](n int) *LRU[K, V] {
	return &LRU[K, V]{max: max(n, 1), items: make(map[K]*list.Element)}
}

// Get returns key's state, or nil if there is none, and marks it used. The pointer is
// valid until key is forgotten.
func (l *LRU[K, V]) Get(key K) *V {
	e := l.items[key]
	if e == nil {
		return nil
	}
	l.order.MoveToFront(e)
	return &e.Value.(*lruItem[K, V]).v
}

// GetOrAdd returns key's state, adding a zero one if there is none (and forgetting the
// least recently used key beyond the bound), and marks it used.
func (l *LRU[K, V]) GetOrAdd(key K) *V {
	if v := l.Get(key); v != nil {
		return v
	}
	if len(l.items) >= l.max {
		old := l.order.Back()
		l.order.Remove(old)
		delete(l.items, old.Value.(*lruItem[K, V]).key)
	}
	it := &lruItem[K, V]{key: key}
	l.items[key] = l.order.PushFront(it)
	return &it.v
}

// Len returns how many keys are kept.
func (l *LRU[K, V]) Len() int { return len(l.items) }
