package ipam

import (
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

var (
	walkSteps = flag.Int("ipam.steps", 2500, "steps in each random walk of TestPoolAgainstModel (try 50000 for a long run)")
	walkSeed  = flag.Uint64("ipam.seed", 1, "first seed of TestPoolAgainstModel's random walks")
)

// TestPoolAgainstModel drives the pool and a deliberately simple model of
// it (pool_model_test.go: maps and scans) through the same long random
// sequence of operations, in the manner of etcd raft's quorum quick test.
// After every step it checks that they agree and that the pool's own
// bookkeeping holds: no address owned twice, Stats equal to a recount, no
// cooling address handed out, removals refused while in use, Assign
// idempotent. Time advances, stands still and goes backwards.
func TestPoolAgainstModel(t *testing.T) {
	for _, cooldown := range []time.Duration{30 * time.Second, 0} {
		for seed := *walkSeed; seed < *walkSeed+2; seed++ {
			t.Run(fmt.Sprintf("cooldown=%v/seed=%d", cooldown, seed), func(t *testing.T) {
				w := &walk{
					t:   t,
					rng: rand.New(rand.NewPCG(seed, 0x1dea)),
					p:   NewPool(cooldown),
					m:   newModel(cooldown),
					now: time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC),
				}
				for w.step = 0; w.step < *walkSteps; w.step++ {
					w.randomOp()
					w.check()
				}
				t.Logf("outcomes: %v", w.outcomes)
			})
		}
	}
}

type walk struct {
	t    *testing.T
	rng  *rand.Rand
	p    *Pool
	m    *model
	now  time.Time
	step int
	// shrinking is true in phases where pods leave and blocks go.
	shrinking bool
	trace     []string // recent operations, for the failure report
	lastOp    string
	// outcomes counts each operation's results, to show with -v that the
	// walk reaches the paths it is meant to.
	outcomes map[string]int
}

func (w *walk) fail(format string, args ...any) {
	w.t.Helper()
	w.t.Fatalf("step %d: %s\nlast operations:\n  %s\nreproduce with -ipam.seed and -ipam.steps",
		w.step, fmt.Sprintf(format, args...), strings.Join(w.trace, "\n  "))
}

// log records an operation, named by format's first word.
func (w *walk) log(format string, args ...any) {
	w.lastOp, _, _ = strings.Cut(format, " ")
	w.trace = append(w.trace, w.now.Format("15:04:05 ")+fmt.Sprintf(format, args...))
	if len(w.trace) > 25 {
		w.trace = w.trace[1:]
	}
}

// expect checks the pool refused an operation for one of the reasons the
// model found, or accepted it when the model found none.
func (w *walk) expect(why []string, err error) {
	w.t.Helper()
	w.count(err)
	switch {
	case len(why) == 0 && err != nil:
		w.fail("unexpected error: %v", err)
	case len(why) > 0 && err == nil:
		w.fail("accepted, want one of %v", why)
	case len(why) > 0 && !slices.Contains(why, errType(err)):
		w.fail("refused with %s (%v), want one of %v", errType(err), err, why)
	}
}

func (w *walk) count(err error) {
	if w.outcomes == nil {
		w.outcomes = map[string]int{}
	}
	w.outcomes[w.lastOp+":"+strings.TrimPrefix(errType(err), "*ipam.")]++
}

func errType(err error) string {
	if err == nil {
		return "ok"
	}
	for ; err != nil; err = errors.Unwrap(err) {
		if name := fmt.Sprintf("%T", err); strings.HasPrefix(name, "*ipam.") {
			return name
		}
	}
	return "untyped"
}

// check compares the whole pool with the model after a step.
func (w *walk) check() {
	w.t.Helper()
	if err := w.p.checkInvariants(); err != nil {
		w.fail("broken invariant: %v", err)
	}
	// stats() does not move the clock, so the walk's timing is untouched.
	got, want := w.p.stats(), w.m.stats()
	if !got.NextFree.Equal(want.NextFree) {
		w.fail("NextFree %v, recount says %v", got.NextFree, want.NextFree)
	}
	got.NextFree, want.NextFree = time.Time{}, time.Time{}
	if !reflect.DeepEqual(got, want) {
		w.fail("Stats differ from a recount:\n got %v %+v\nwant %v %+v", got, got.ENIs, want, want.ENIs)
	}
	seen := map[netip.Addr]Key{}
	for _, a := range w.p.Assignments() {
		if k, dup := seen[a.Addr]; dup {
			w.fail("%s owned by both %s and %s", a.Addr, k, a.Key)
		}
		seen[a.Addr] = a.Key
		if w.m.owners[a.Key] != a.Addr {
			w.fail("%s holds %s, the model says %s", a.Key, a.Addr, w.m.owners[a.Key])
		}
		if l, ok := w.p.LookupAddr(a.Addr); !ok || l != a {
			w.fail("LookupAddr(%s) = %+v, %v; want %+v", a.Addr, l, ok, a)
		}
	}
	if len(seen) != len(w.m.owners) {
		w.fail("%d assignments, the model has %d", len(seen), len(w.m.owners))
	}
}
