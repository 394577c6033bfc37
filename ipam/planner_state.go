package ipam

import (
	"net/netip"
	"slices"
	"time"
)

// planMode is which of aws-node's three policies is in force.
type planMode int

const (
	// modeENIs: WARM_ENI_TARGET, secondary addresses, grow by whole
	// ENIs, shrink only by detaching whole ENIs.
	modeENIs planMode = iota
	// modeIPs: WARM_IP_TARGET and/or MINIMUM_IP_TARGET, counted in
	// addresses, grown and shrunk by addresses or by /28 prefixes.
	modeIPs
	// modePrefixes: WARM_PREFIX_TARGET, counted in free prefixes.
	modePrefixes
)

// planner is one pass of Plan: the snapshot, the settings resolved
// against the limits, running totals that every planned action updates,
// and the actions so far.
type planner struct {
	cfg       PlanConfig
	now       time.Time
	mode      planMode
	blockBits int // 32 for secondary addresses, 28 for prefixes
	blockSize int // addresses per block: 1 or 16
	slots     int // blocks one ENI can carry
	maxENIs   int // the instance's limit, or MAX_ENI when lower
	instENIs  int // the instance's limit
	maxPods   int
	// waiting is the demand on top of the targets: Add requests waiting
	// and, of those, expected ones (a guess, told apart in reasons).
	waiting  int
	expected int
	enis     []eniPlan // ascending device index

	// poolTotals describe the pool as it will be once the actions planned
	// so far are done; start keeps them as found, for reasons.
	poolTotals
	start    poolTotals
	attached int // ENIs attached, primary included

	attaches []Action
	found    string // see reason
}

// poolTotals count blocks of the kind in use.
type poolTotals struct {
	total, avail       int // addresses in the pool, and free ones
	blocks, freeBlocks int // blocks, and blocks with every address free
}

// eniPlan is one ENI as the planner sees it.
type eniPlan struct {
	st *ENIState
	// kindBlocks counts blocks of the kind in use; foreign blocks are of
	// the other kind (see scanENI).
	kindBlocks   int
	inUse        bool           // some address, of any block, assigned or cooling
	foreignFree  []netip.Prefix // foreign blocks with every address free: released
	slotsUsed    int            // slots taken once foreignFree is released
	assign       int            // blocks planned to be assigned
	release      []netip.Prefix // surplus blocks planned to be released
	detach       bool
	detachReason string
}

func newPlanner(s Snapshot, cfg PlanConfig, lim Limits, now time.Time) *planner {
	p := &planner{
		cfg:       cfg,
		now:       now,
		blockBits: 32,
		blockSize: 1,
		slots:     lim.MaxSecondaryIPsPerENI(),
		maxENIs:   lim.MaxENIs,
		instENIs:  lim.MaxENIs,
		waiting:   max(s.Waiting, 0) + max(s.Expected, 0),
		expected:  max(s.Expected, 0),
		enis:      make([]eniPlan, len(s.ENIs)),
		attached:  len(s.ENIs),
	}
	switch {
	case cfg.ipTargets():
		p.mode = modeIPs
	case cfg.PrefixDelegation:
		p.mode = modePrefixes
	default:
		p.mode = modeENIs
	}
	if cfg.PrefixDelegation {
		p.blockBits, p.blockSize, p.slots = PrefixBits, PrefixAddrs, lim.MaxPrefixesPerENI()
	}
	if cfg.MaxENI > 0 && cfg.MaxENI < p.maxENIs {
		p.maxENIs = cfg.MaxENI
	}
	p.maxPods = cfg.MaxPods
	if p.maxPods == 0 {
		podENIs := lim.MaxENIs
		if cfg.CustomNetworking {
			podENIs--
		}
		// Every address the pod ENIs can hold, in blocks of the kind in
		// use: with prefixes 16 per slot, not 1 (issue 12).
		p.maxPods = podENIs*p.slots*p.blockSize + 2
	}
	for i := range s.ENIs {
		p.enis[i] = p.scanENI(&s.ENIs[i])
	}
	slices.SortStableFunc(p.enis, func(a, b eniPlan) int { return a.st.DeviceIndex - b.st.DeviceIndex })
	p.start = p.poolTotals
	return p
}

// reason is the target and the pool as found, the start of every
// action's Reason; built only when some action needs it.
func (p *planner) reason() string {
	if p.found == "" {
		p.found = p.describe()
	}
	return p.found
}

// scanENI classifies one ENI's blocks and adds them to the pool totals.
// A foreign block, of the kind not in use (left from before
// ENABLE_PREFIX_DELEGATION changed), is released when entirely free;
// while a pod holds one of its addresses its other free addresses still
// serve pods, so they count as available, but it is never grown or
// released by target.
func (p *planner) scanENI(e *ENIState) eniPlan {
	ep := eniPlan{st: e, slotsUsed: len(e.Blocks)}
	for i := range e.Blocks {
		b := &e.Blocks[i]
		free := b.Assigned == 0 && b.Cooling == 0
		kind := b.Prefix.Bits() == p.blockBits
		switch {
		case !kind && free && !p.cfg.KeepForeignBlocks:
			ep.foreignFree = append(ep.foreignFree, b.Prefix)
			ep.slotsUsed--
			continue
		case kind:
			ep.kindBlocks++
			p.blocks++
			if free {
				p.freeBlocks++
			}
		}
		ep.inUse = ep.inUse || !free
		p.total += b.Assigned + b.Cooling + b.Free
		p.avail += b.Free
	}
	return ep
}

// primary reports whether e is the instance's primary ENI, which is never
// detached. Device index 0 is checked too, in case a snapshot forgot the
// flag.
func (e *eniPlan) primary() bool { return e.st.Primary || e.st.DeviceIndex == 0 }

// detachable reports whether e may be detached at all, whatever the
// targets: not primary, past the grace period, no address in use, and not
// grown in this pass.
func (p *planner) detachable(e *eniPlan) bool {
	return !e.primary() && !e.inUse && !e.detach && e.assign == 0 &&
		p.now.Sub(e.st.CreatedAt) >= p.cfg.ENIGracePeriod
}

// addBlocks updates the totals for n new, entirely free blocks (n < 0
// removes free ones).
func (p *planner) addBlocks(n int) {
	p.blocks += n
	p.freeBlocks += n
	p.total += n * p.blockSize
	p.avail += n * p.blockSize
}

// ordered assembles the plan in the order documented on Action.
func (p *planner) ordered() []Action {
	var out []Action
	for i := len(p.enis) - 1; i >= 0; i-- {
		e := &p.enis[i]
		if e.detach {
			continue
		}
		if len(e.foreignFree) > 0 {
			out = append(out, Action{Kind: ReleaseBlocks, ENIID: e.st.ID, Blocks: e.foreignFree, Reason: p.foreignReason()})
		}
		if len(e.release) > 0 {
			out = append(out, Action{Kind: ReleaseBlocks, ENIID: e.st.ID, Blocks: e.release, Reason: p.surplusReason(len(e.release))})
		}
	}
	for i := range p.enis {
		if e := &p.enis[i]; e.assign > 0 {
			out = append(out, Action{Kind: AssignBlocks, ENIID: e.st.ID, Count: e.assign,
				Prefixes: p.blockBits != 32, Reason: p.reason() + "; filling existing ENIs before attaching new ones"})
		}
	}
	out = append(out, p.attaches...)
	for i := len(p.enis) - 1; i >= 0; i-- {
		if e := &p.enis[i]; e.detach {
			blocks := make([]netip.Prefix, len(e.st.Blocks))
			for j, b := range e.st.Blocks {
				blocks[j] = b.Prefix
			}
			out = append(out, Action{Kind: DetachENI, ENIID: e.st.ID, Blocks: blocks, Reason: e.detachReason})
		}
	}
	return out
}
