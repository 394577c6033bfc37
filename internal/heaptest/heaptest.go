// Package heaptest measures what a value keeps on the heap, for tests
// that bound a structure's memory.
package heaptest

import "runtime"

// Live is the bytes the heap holds after a collection.
func Live() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}
