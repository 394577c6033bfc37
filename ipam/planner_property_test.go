package ipam

import (
	"flag"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"testing"
	"time"
)

var (
	plannerCases = flag.Int("planner.cases", 5000, "random snapshots for the planner property tests")
	plannerSeed  = flag.Uint64("planner.seed", 1, "seed for the planner property tests")
)

// randomCase draws limits, a config and a snapshot that respects the
// limits, with ENIs of every age, blocks in every state, some blocks of
// the other kind, and sometimes waiting requests.
func randomCase(r *rand.Rand) (Snapshot, PlanConfig, Limits) {
	lim := Limits{MaxENIs: 1 + r.IntN(8), IPv4PerENI: 2 + r.IntN(49)}
	cfg := testConfig()
	cfg.PrefixDelegation = r.IntN(2) == 0
	cfg.CustomNetworking = r.IntN(8) == 0
	cfg.WarmENITarget = r.IntN(4)
	cfg.WarmPrefixTarget = r.IntN(4)
	switch r.IntN(4) {
	case 0:
		cfg.WarmIPTarget = r.IntN(40)
	case 1:
		cfg.MinimumIPTarget = r.IntN(80)
	case 2:
		cfg.WarmIPTarget, cfg.MinimumIPTarget = r.IntN(40), r.IntN(80)
	}
	if r.IntN(3) == 0 {
		cfg.MaxENI = r.IntN(lim.MaxENIs + 2)
	}
	if r.IntN(3) == 0 {
		cfg.MaxPods = 1 + r.IntN(300)
	}
	cfg.ENIGracePeriod = time.Duration(r.IntN(3)) * time.Minute

	slots := lim.IPv4PerENI - 1
	s := Snapshot{}
	if r.IntN(4) == 0 {
		s.Waiting = r.IntN(20)
	}
	var next uint32 = 10<<24 | 16
	for dev := range 1 + r.IntN(lim.MaxENIs) {
		e := ENIState{ENI: ENI{
			ID: fmt.Sprintf("eni-%d", dev), DeviceIndex: dev, Primary: dev == 0,
			SubnetID: "subnet-a", CreatedAt: t0.Add(-time.Duration(r.IntN(240)) * time.Second),
		}}
		for range r.IntN(slots + 1) {
			prefix := cfg.PrefixDelegation
			if r.IntN(10) == 0 {
				prefix = !prefix // left over from the other mode
			}
			size, bits := 1, 32
			if prefix {
				size, bits = 16, 28
				next = (next + 15) &^ 15
			}
			b := BlockState{Prefix: netip.PrefixFrom(numAddr(next), bits)}
			next += uint32(size)
			b.Assigned = r.IntN(size + 1)
			if r.IntN(3) == 0 {
				b.Assigned = 0 // plenty of entirely free blocks
			}
			b.Cooling = r.IntN(size - b.Assigned + 1)
			if r.IntN(2) == 0 {
				b.Cooling = 0
			}
			b.Free = size - b.Assigned - b.Cooling
			e.Blocks = append(e.Blocks, b)
		}
		s.ENIs = append(s.ENIs, e)
	}
	return s, cfg, lim
}

func numAddr(n uint32) netip.Addr {
	return netip.AddrFrom4([4]byte{byte(n >> 24), byte(n >> 16), byte(n >> 8), byte(n)})
}

func grows(actions []Action) bool {
	for _, a := range actions {
		if a.Kind == AssignBlocks || a.Kind == AttachENI {
			return true
		}
	}
	return false
}

func shrinks(actions []Action) bool {
	for _, a := range actions {
		if a.Kind == ReleaseBlocks || a.Kind == DetachENI {
			return true
		}
	}
	return false
}

// TestPlanNeverFlaps checks, over many random pools and settings, that a
// plan applied and planned again under the same demand is not undone: a
// pass that shrank the pool is not followed by one that grows it, nor the
// reverse. ApplyActions refuses anything unsafe (an address in use or
// cooling released, the primary ENI detached, a limit exceeded), so the
// same run checks safety too.
func TestPlanNeverFlaps(t *testing.T) {
	r := rand.New(rand.NewPCG(*plannerSeed, 0))
	for i := range *plannerCases {
		s, cfg, lim := randomCase(r)
		first, _ := Plan(s, cfg, lim, t0)
		after, err := ApplyActions(s, first, lim, t0)
		if err != nil {
			t.Fatalf("case %d: unsafe plan: %v\nconfig %+v limits %+v\n%s", i, err, cfg, lim, dump(first))
		}
		checkPlanRules(t, i, s, cfg, lim, t0, first)
		second, _ := Plan(after, cfg, lim, t0)
		if (grows(first) && shrinks(second)) || (shrinks(first) && grows(second)) {
			t.Fatalf("case %d flaps:\nconfig %+v limits %+v waiting %d\nfirst:\n%ssecond:\n%s",
				i, cfg, lim, s.Waiting, dump(first), dump(second))
		}
	}
}

// checkPlanRules checks what ApplyActions cannot see: the grace period,
// MAX_ENI, max pods, and that only the documented housekeeping mixes
// growth and shrinking.
func checkPlanRules(t *testing.T, i int, s Snapshot, cfg PlanConfig, lim Limits, now time.Time, actions []Action) {
	t.Helper()
	maxENIs := lim.MaxENIs
	if cfg.MaxENI > 0 {
		maxENIs = min(maxENIs, cfg.MaxENI)
	}
	attached, addedBlocks := len(s.ENIs), 0
	for _, a := range actions {
		switch a.Kind {
		case DetachENI:
			for _, e := range s.ENIs {
				if e.ID == a.ENIID && now.Sub(e.CreatedAt) < cfg.ENIGracePeriod {
					t.Fatalf("case %d: detached %s, %v old, grace %v", i, e.ID, now.Sub(e.CreatedAt), cfg.ENIGracePeriod)
				}
			}
		case AttachENI:
			if attached++; attached > maxENIs {
				t.Fatalf("case %d: %d ENIs attached, MAX_ENI %d, instance %d", i, attached, cfg.MaxENI, lim.MaxENIs)
			}
			addedBlocks += a.Count
		case AssignBlocks:
			addedBlocks += a.Count
		}
	}
	if addedBlocks == 0 {
		return
	}
	bits, size := 32, 1
	if cfg.PrefixDelegation {
		bits, size = 28, 16
	}
	maxPods := cfg.MaxPods
	if maxPods == 0 {
		podENIs := lim.MaxENIs
		if cfg.CustomNetworking {
			podENIs--
		}
		maxPods = podENIs*(lim.IPv4PerENI-1)*size + 2
	}
	// Never a whole block past max pods.
	if got := poolOf(s, bits).total + addedBlocks*size; got >= maxPods+size {
		t.Fatalf("case %d: grew to %d addresses, max pods %d", i, got, maxPods)
	}
}

// TestPlanConverges checks that plan-and-apply reaches a pool needing
// nothing within a few passes under fixed demand, and that a settled pool
// without a shortfall meets its target.
func TestPlanConverges(t *testing.T) {
	r := rand.New(rand.NewPCG(*plannerSeed, 1))
	for i := range *plannerCases / 5 {
		s, cfg, lim := randomCase(r)
		got, short := settle(t, s, cfg, lim, t0)
		if short.Short() {
			continue
		}
		bits, size := 32, 1
		if cfg.PrefixDelegation {
			bits, size = 28, 16
		}
		c := poolOf(got, bits)
		var ok bool
		switch {
		case cfg.WarmIPTarget > 0 || cfg.MinimumIPTarget > 0:
			ok = c.avail >= cfg.WarmIPTarget+got.Waiting && c.total >= cfg.MinimumIPTarget
		case cfg.PrefixDelegation:
			ok = c.avail >= max(cfg.WarmPrefixTarget*size+got.Waiting, 1)
		default:
			ok = c.avail >= max(cfg.WarmENITarget*(lim.IPv4PerENI-1)+got.Waiting, 1)
		}
		if !ok {
			t.Fatalf("case %d: settled without shortfall but below target: %+v\nconfig %+v limits %+v", i, c, cfg, lim)
		}
	}
}

// TestPlanRandomWalk runs the planner as the agent would, on nodes whose
// pods come and go while time passes, and checks that every plan is safe
// to apply and that no pass undoes the one before while demand stays put.
func TestPlanRandomWalk(t *testing.T) {
	r := rand.New(rand.NewPCG(*plannerSeed, 2))
	for walk := range max(*plannerCases/250, 1) {
		s, cfg, lim := randomCase(r)
		n := &scriptNode{lim: lim, cfg: cfg, now: t0, snap: s}
		var last []Action
		for i := range 50 {
			changed := true
			switch r.IntN(5) {
			case 0:
				n.startPods(r.IntN(20))
			case 1:
				n.stopPods(r.IntN(20))
			case 2:
				n.cooldown()
				n.startPods(0)
			case 3:
				n.now = n.now.Add(time.Duration(r.IntN(90)) * time.Second)
			default:
				changed = false
			}
			actions, _ := Plan(n.snap, n.cfg, n.lim, n.now)
			if !changed && ((grows(last) && shrinks(actions)) || (shrinks(last) && grows(actions))) {
				t.Fatalf("walk %d step %d flaps:\nbefore:\n%snow:\n%s", walk, i, dump(last), dump(actions))
			}
			checkPlanRules(t, i, n.snap, n.cfg, n.lim, n.now, actions)
			var err error
			if n.snap, err = ApplyActions(n.snap, actions, n.lim, n.now); err != nil {
				t.Fatalf("walk %d step %d: unsafe plan: %v\n%s", walk, i, err, dump(actions))
			}
			n.startPods(0)
			last = actions
		}
	}
}
