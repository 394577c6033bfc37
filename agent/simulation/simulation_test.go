package simulation

import (
	"context"
	"flag"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/vpcnet/vpcnet/sim/simtest"
)

var (
	seeds     = flag.Int("seeds", 200, "how many seeded schedules TestSimulation runs")
	first     = flag.Uint64("first", 1, "the first seed")
	seed      = flag.Uint64("seed", 0, "replay this one seed, with a trace of every step under -v")
	stepsFlag = flag.Int("steps", 150, "steps per schedule")
)

// TestSimulation plays seeded schedules and checks the agent's invariants
// after every step. It ends with "N schedules, 0 invariant violations".
func TestSimulation(t *testing.T) {
	simtest.IsolateAWSEnv(t)
	// The simulation's in-process HTTP client has no TLS to add a CA to.
	t.Setenv("AWS_CA_BUNDLE", "")
	topo := parseTopology()
	ctx := context.Background()
	if *seed != 0 {
		opts := Options{Steps: *stepsFlag, GC: *seed%2 == 0, Trace: func(s string) { t.Log(s) }}
		if err := Run(ctx, topo, *seed, opts); err != nil {
			t.Fatal(err)
		}
		return
	}
	var next atomic.Uint64
	next.Store(*first)
	end := *first + uint64(*seeds)
	var mu sync.Mutex
	var failed []error
	var wg sync.WaitGroup
	for range runtime.GOMAXPROCS(0) {
		wg.Go(func() {
			for {
				s := next.Add(1) - 1
				if s >= end {
					return
				}
				if err := Run(ctx, topo, s, Options{Steps: *stepsFlag, GC: s%2 == 0}); err != nil {
					mu.Lock()
					failed = append(failed, err)
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	for i, err := range failed {
		if i == 10 {
			t.Errorf("... and %d more", len(failed)-10)
			break
		}
		t.Error(err)
	}
	fmt.Printf("%d schedules, %d invariant violations\n", *seeds, len(failed))
}
