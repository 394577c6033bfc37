// Package idlegc gives a long-running program's free heap back to the
// kernel once the program has gone quiet.
//
// The Go runtime grows the heap to twice the live data (GOGC=100, and at
// least 4 MiB) before it collects, and its background scavenger returns
// freed pages to the kernel only slowly, down to a little above that
// goal. A node agent is idle nearly all the time, between bursts of
// work that leave garbage behind: in make bench, vpcnetd held 10.6 MiB
// of anonymous memory at 250 pods while about 3.5 MiB of its heap was
// live. Run watches how much the program allocates; after a period in
// which it allocated next to nothing, having allocated enough since the
// last time to be worth it, it runs debug.FreeOSMemory once: a full
// collection, and every free page back to the kernel. A soft memory
// limit (GOMEMLIMIT) would do it on every cycle, and at a fixed size it
// makes the collector run continuously when a busy node's live heap
// outgrows it (at 11 MiB, vpcnetd's CPU per ADD doubled); this costs one
// collection per quiet period.
package idlegc

import (
	"context"
	"runtime/debug"
	"runtime/metrics"
	"time"
)

// Defaults for Run.
const (
	// Period is how often allocation is sampled; a period with less
	// than Quiet allocated is idle.
	Period = 5 * time.Second
	Quiet  = 256 << 10
	// Worth is how much must have been allocated since the last trim.
	Worth = 2 << 20
)

// Trimmer decides when to trim from the total of bytes allocated, sampled
// once per period. The zero value uses the defaults.
type Trimmer struct {
	Quiet, Worth uint64

	last    uint64 // the total at the previous sample
	trimmed uint64 // the total at the last trim
	started bool
}

// Sample takes the allocation total at the end of a period and says
// whether to trim now.
func (t *Trimmer) Sample(total uint64) bool {
	quiet, worth := t.Quiet, t.Worth
	if quiet == 0 {
		quiet = Quiet
	}
	if worth == 0 {
		worth = Worth
	}
	if !t.started {
		// Start-up's garbage counts: the first quiet period after it
		// trims.
		t.started, t.last = true, total
		return false
	}
	idle := total-t.last < quiet
	t.last = total
	if idle && total-t.trimmed >= worth {
		t.trimmed = total
		return true
	}
	return false
}

// Run trims after each quiet period until ctx ends.
func Run(ctx context.Context) {
	var t Trimmer
	s := []metrics.Sample{{Name: "/gc/heap/allocs:bytes"}}
	tick := time.NewTicker(Period)
	defer tick.Stop()
	for {
		metrics.Read(s)
		if s[0].Value.Kind() == metrics.KindUint64 && t.Sample(s[0].Value.Uint64()) {
			debug.FreeOSMemory()
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}
