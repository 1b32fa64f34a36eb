package testutil

import "runtime"

// SettledMemStats returns the memory statistics after two full collections: the second
// frees what the first left in sync.Pool's victim caches, so what remains is what is held.
func SettledMemStats() runtime.MemStats {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms
}
