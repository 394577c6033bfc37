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
	worlds, err := Worlds()
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if *seed != 0 {
		if err := play(ctx, worlds, *seed, func(s string) { t.Log(s) }); err != nil {
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
				err := play(ctx, worlds, s, nil)
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

// play runs the schedule of seed: on world seed mod len(worlds), with the
// runtime's CNI GC on every other round of worlds, so that each world
// plays with and without it.
func play(ctx context.Context, worlds []*world, seed uint64, trace func(string)) error {
	n := uint64(len(worlds))
	return Run(ctx, worlds[seed%n], seed, Options{Steps: *stepsFlag, GC: seed/n%2 == 0, Trace: trace})
}

// A seed's schedule is a function of the seed alone: played twice, on
// every world, it traces the same lines, so a failing seed replays.
func TestScheduleReplaysIdentically(t *testing.T) {
	simtest.IsolateAWSEnv(t)
	t.Setenv("AWS_CA_BUNDLE", "")
	worlds, err := Worlds()
	if err != nil {
		t.Fatal(err)
	}
	for seed := uint64(1); seed <= uint64(len(worlds)); seed++ {
		var traces [2][]string
		for i := range traces {
			err := play(context.Background(), worlds, seed, func(s string) { traces[i] = append(traces[i], s) })
			if err != nil {
				t.Fatalf("seed %d: %v", seed, err)
			}
		}
		if !slices.Equal(traces[0], traces[1]) {
			for j := range min(len(traces[0]), len(traces[1])) {
				if traces[0][j] != traces[1][j] {
					t.Fatalf("seed %d (%s): replay differs at line %d:\n%s\n%s", seed, worlds[seed%uint64(len(worlds))].name, j, traces[0][j], traces[1][j])
				}
			}
			t.Fatalf("seed %d: replay has %d lines, first run %d", seed, len(traces[1]), len(traces[0]))
		}
	}
}

// progressEvery is how often a long run says how far it got.
const progressEvery = 1000
