package nodestate

import (
	"net/netip"
	"slices"
	"time"

	"github.com/vpcnet/vpcnet/checkpoint"
	"github.com/vpcnet/vpcnet/ipam"
)

// ENIView is one ENI of the pool with what the machine keeps beside it.
type ENIView struct {
	ipam.ENI
	MAC                 string
	DeleteOnTermination bool
}

// View is a copy of what the machine knows, for /v1 and readiness. It is
// built in the owner goroutine and then read anywhere.
type View struct {
	Stats       ipam.Stats
	Assignments []ipam.Assignment
	ENIs        map[string]ENIView
	Quarantined []netip.Addr
	Stale       []checkpoint.Entry
	Waiting     int
	// Demand is waiting Adds plus those that timed out recently.
	Demand          int
	Planned         []ipam.Action
	Shortfall       ipam.Shortfall
	GrowthHeldUntil time.Time
	// ReleaseHold says why nothing may be released now, or "".
	ReleaseHold string
	CloudOK     bool
	LastEC2Err  string
	LastGrowErr error
	LastPlan    time.Time
	Reclaimed   int
	Attaching   int
	// CheckpointVersion and Written say whether the pool's state is on
	// disk yet.
	CheckpointVersion, Written uint64
	ENIConfigOK                bool
	ENIConfigMessage           string
	// CordonHold says the pool is held because the node is cordoned
	// (CordonUpdate).
	CordonHold bool
	// InFlight counts jobs handed out and not yet answered.
	InFlight int
	// PendingDOT lists ENIs of the pool without DeleteOnTermination.
	PendingDOT []string
	// Growing says EC2 is being asked for more addresses right now.
	Growing bool
	// Unmanaged are the attached interfaces vpcnet leaves alone.
	Unmanaged []UnmanagedENI
	// PrefixFallback is set while the node grows by single addresses
	// because the subnet is fragmented for prefixes.
	PrefixFallback *PrefixFallback
	// Urgent are the jobs in flight that pods wait for, sorted: a
	// cluster-wide EC2 budget grants them before warm-pool work.
	Urgent []uint64
	// WaitingSince is when the longest-waiting Add began waiting; zero
	// when none waits. A budget controller that gathers the requests
	// held through its takeover books the node's by it.
	WaitingSince time.Time
	// Subnets are the subnets the pool uses; Exhausted those EC2 found
	// out of addresses lately, and UnderPressure those the budget
	// controller says are nearly full (SubnetPressure).
	Subnets, Exhausted, UnderPressure []string
	// MaxENIs is the instance's ENI limit on network card 0 less the
	// slots unmanaged interfaces hold: what the pool may attach.
	MaxENIs int
}

// growing says an assign or attach is under way.
func (n *Node) growing() bool {
	return len(n.cloud.attaching) > 0 || n.jobs.running(func(j Job) bool { return j.Kind == JobAction && isGrowth(j.Action) })
}

// View copies the machine's state at now: the Summary and the
// per-address, per-ENI and planning parts.
func (n *Node) View(now time.Time) View {
	v := n.Summary(now)
	v.Assignments = n.pool.Assignments()
	v.ENIs = make(map[string]ENIView)
	v.LastPlan = n.cloud.lastPlan
	v.CheckpointVersion, v.Written = n.dur.version, n.dur.written
	v.ENIConfigMessage = n.cloud.eniCfgMsg
	v.Unmanaged = slices.Clone(n.unmanaged.enis)
	v.MaxENIs = n.limits().MaxENIs
	for _, e := range n.pool.ENIs() {
		m := n.meta[e.ID]
		v.ENIs[e.ID] = ENIView{ENI: e, MAC: m.MAC, DeleteOnTermination: m.DOT}
		if !m.DOT {
			v.PendingDOT = append(v.PendingDOT, e.ID)
		}
	}
	slices.Sort(v.PendingDOT)
	if n.cloud.grow.blocked(now) {
		v.GrowthHeldUntil = n.cloud.grow.until
	}
	// What the pool lacks, held back or under way: /v1/status shows it
	// with GrowthHeldUntil and ReleaseHold beside it, and is empty only
	// at target.
	v.Planned, _ = n.planWith(now, false)
	return v
}

// Lookup returns what key holds, if anything durable or on its way.
func (n *Node) Lookup(key ipam.Key) (ipam.Assignment, ipam.ENI, bool) {
	as, ok := n.pool.Lookup(key)
	if !ok || n.dur.releasing[key] {
		return ipam.Assignment{}, ipam.ENI{}, false
	}
	eni, _ := n.pool.ENI(as.ENIID)
	return as, eni, true
}

// Summary is View without the per-address and per-ENI parts and the
// plan: cheap enough to publish after every event.
func (n *Node) Summary(now time.Time) View {
	v := View{
		Stats:         n.pool.Stats(now),
		Waiting:       n.reqs.waiting(),
		Demand:        n.reqs.demandCount(),
		Shortfall:     n.cloud.lastShortfall,
		ReleaseHold:   n.host.hold,
		CloudOK:       n.cloud.ok,
		LastEC2Err:    n.cloud.lastErr,
		LastGrowErr:   n.cloud.lastGrowErr,
		Reclaimed:     n.host.reclaimed,
		Attaching:     len(n.cloud.attaching),
		InFlight:      len(n.jobs.inFlight),
		Growing:       n.growing(),
		Quarantined:   quarantinedAddrs(n.host.quarantined),
		Stale:         slices.Clone(n.stale),
		ENIConfigOK:   n.cloud.eniCfgOK,
		CordonHold:    n.cloud.cordonHold,
		Urgent:        slices.Clone(n.urgentJobs),
		WaitingSince:  n.reqs.since(),
		Subnets:       poolSubnets(n),
		Exhausted:     n.pressure.recent(now),
		UnderPressure: slices.Clone(n.pressure.under),
	}
	v.PrefixFallback = n.frag.view()
	return v
}

func quarantinedAddrs(q map[netip.Addr]bool) []netip.Addr {
	out := make([]netip.Addr, 0, len(q))
	for ip := range q {
		out = append(out, ip)
	}
	slices.SortFunc(out, netip.Addr.Compare)
	return out
}

// Holder is who holds addr in the pool, if anyone.
func (n *Node) Holder(addr netip.Addr) (ipam.Key, bool) {
	as, ok := n.pool.LookupAddr(addr)
	return as.Key, ok
}

// Idle says no job, write or attachment is under way and no growth is
// deferred or waiting to be asked again.
func (n *Node) Idle() bool {
	// Growth deferred while EC2 throttles the account (demand-only mode)
	// is work still to do, even though the plan shows none; so is the
	// prefix fallback on a fragmented subnet, which asks for prefixes
	// again when its wait ends and then gives back the single addresses
	// it grew by (a restart forgets the fallback and asks at once).
	return len(n.jobs.inFlight) == 0 && len(n.jobs.later) == 0 && len(n.cloud.attaching) == 0 && n.dur.inFlight == 0 && n.dur.version == n.dur.written &&
		!n.demandOnly(n.last) && !n.frag.active
}
