package simulation

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"runtime"
	"runtime/debug"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vpcnet/vpcnet/sim/simtest"
)

var (
	seeds     = flag.Int("seeds", 200, "how many seeded schedules TestSimulation runs")
	first     = flag.Uint64("first", 1, "the first seed")
	seed      = flag.Uint64("seed", 0, "replay this one seed, with a trace of every step under -v")
	stepsFlag = flag.Int("steps", 150, "steps per schedule")
	maxFail   = flag.Int("maxfail", 0, "stop handing out schedules after this many violations (0: play them all); make mutants needs only one")
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
	// A schedule allocates much and keeps little (an SDK client, an
	// emulator, the agent): a larger heap goal cuts the collector's CPU
	// by a third or more, which keeps SEEDS=10000 within 10 minutes on
	// two cores. It changes no schedule.
	defer debug.SetGCPercent(debug.SetGCPercent(800))
	var next, done atomic.Uint64
	var stopped atomic.Bool
	next.Store(*first)
	end := *first + uint64(*seeds)
	var mu sync.Mutex // guards failed and the output
	var failed []*Violation
	start := time.Now()
	var wg sync.WaitGroup
	for range runtime.GOMAXPROCS(0) {
		wg.Go(func() {
			for {
				s := next.Add(1) - 1
				if s >= end || stopped.Load() {
					return
				}
				err := Run(ctx, topo, s, Options{Steps: *stepsFlag, GC: s%2 == 0})
				n := done.Add(1)
				mu.Lock()
				if err != nil {
					// Said at once, replay command included: a long run
					// that is stopped still told what it found.
					var v *Violation
					if !errors.As(err, &v) {
						v = &Violation{Seed: s, What: err.Error()}
					}
					failed = append(failed, v)
					fmt.Printf("VIOLATION %v\n", v)
					if *maxFail > 0 && len(failed) >= *maxFail {
						stopped.Store(true)
					}
				}
				if n%progressEvery == 0 && n < uint64(*seeds) {
					fmt.Printf("%d of %d schedules played, %d invariant violations so far (%s)\n", n, *seeds, len(failed), time.Since(start).Round(time.Second))
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	// Workers finish in any order; the summary lists seeds in order.
	slices.SortFunc(failed, func(a, b *Violation) int { return cmp.Compare(a.Seed, b.Seed) })
	for i, v := range failed {
		if i == 10 {
			t.Errorf("... and %d more", len(failed)-10)
			break
		}
		t.Error(v)
	}
	fmt.Printf("%d schedules, %d invariant violations\n", done.Load(), len(failed))
}

// progressEvery is how often a long run says how far it got.
const progressEvery = 1000
