package nodestate

import (
	"fmt"
	"net/netip"
	"slices"
	"time"

	"github.com/vpcnet/vpcnet/ipam"
)

// Growth backoff: when EC2 refuses to grow the pool (the subnet is full,
// the instance has no ENI slot left, the account is throttled, a
// permission is missing), asking again on every event only spends the
// account's API budget. After a refusal growth waits 5 s, doubling to 2
// minutes; growth EC2 accepts resets it. Shrinking is never held back.
const (
	minGrowBackoff = 5 * time.Second
	maxGrowBackoff = 2 * time.Minute
)

// demandOnlyAfterThrottle: after EC2 answered RequestLimitExceeded the
// account's budget is spent by every node at once, so for this long the
// pool grows only for pods that wait, not for its warm target, and
// shrinks nothing: a warm ENI bought now is paid for with a pod's ENI on
// some other node. The warm target is met once the account is quiet.
const demandOnlyAfterThrottle = 2 * time.Minute

type growBackoff struct {
	delay time.Duration
	until time.Time
	// seed spreads the waits of different nodes (see refused).
	seed  uint64
	tries uint64
}

func (b *growBackoff) blocked(now time.Time) bool { return now.Before(b.until) }

// refused doubles the delay and waits between half of it and all of it.
// The jitter matters at scale: nodes throttled together would otherwise
// come back together, one wave after another, and the account's bucket,
// which holds only so many tokens, would refill unused between waves.
// It is drawn from the node's seed (its instance id) and the try count,
// so the machine stays deterministic.
func (b *growBackoff) refused(now time.Time) time.Duration {
	b.delay = min(max(2*b.delay, minGrowBackoff), maxGrowBackoff)
	b.tries++
	half := b.delay / 2
	wait := half + time.Duration(splitmix(b.seed^b.tries)%uint64(half+1))
	b.until = now.Add(wait)
	return wait
}

// splitmix is SplitMix64's finaliser: a well-spread hash of x.
func splitmix(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ x>>30) * 0xbf58476d1ce4e5b9
	x = (x ^ x>>27) * 0x94d049bb133111eb
	return x ^ x>>31
}

func (b *growBackoff) reset() { b.delay, b.until = 0, time.Time{} }

// planSnapshot is the pool as the planner sees it at now: addresses
// cooling only because of a restart count as free, and the waiting and
// remembered Adds are its demand.
func planSnapshot(n *Node, now time.Time) ipam.Snapshot {
	snap := n.pool.Snapshot(now)
	snap.Waiting = n.reqs.demandCount()
	n.countRestartCoolingAsFree(&snap)
	return snap
}

// withoutWarm is cfg with no warm or minimum target: the pool for the
// pods that wait, and nothing more.
func withoutWarm(cfg ipam.PlanConfig) ipam.PlanConfig {
	cfg.WarmENITarget, cfg.WarmIPTarget, cfg.MinimumIPTarget, cfg.WarmPrefixTarget = 0, 0, 0, 0
	return cfg
}

func isGrowth(act ipam.Action) bool {
	return act.Kind == ipam.AssignBlocks || act.Kind == ipam.AttachENI
}

func isShrink(act ipam.Action) bool {
	return act.Kind == ipam.ReleaseBlocks || act.Kind == ipam.DetachENI
}

// Plan is what the planner would do now, with waiting and remembered Adds
// counted as demand and attachments under way counted as capacity, and
// the shortfall it found.
func (n *Node) Plan(now time.Time) ([]ipam.Action, ipam.Shortfall) {
	return n.planWith(now, true)
}

// planWith plans with or without the attachments under way counted as
// capacity: without, it says what the pool still lacks until they land.
func (n *Node) planWith(now time.Time, pending bool) ([]ipam.Action, ipam.Shortfall) {
	snap := planSnapshot(n, now)
	if n.cfg.IPv6 {
		return ipam.PlanIPv6(snap), ipam.Shortfall{}
	}
	if pending {
		snap.ENIs = append(snap.ENIs, n.pendingENIs(now)...)
	}
	cfg := n.frag.planConfig(n.cloud.plan, now)
	if n.shrinkHeld(now) {
		// Blocks of the kind not in use cannot be released now (filter
		// drops it), so they keep their slots: growth planned into those
		// slots would be refused by EC2 for as long as the hold lasts.
		cfg.KeepForeignBlocks = true
	}
	lim := n.limits()
	if n.pressure.on(n) {
		// The subnet is nearly full: hold what waiting pods need and
		// give the rest back for other nodes' pods, whole ENIs and the
		// free addresses of the others alike (pods that landed on a
		// higher device first leave no lower ENI whole to detach).
		c := withoutWarm(cfg)
		c.ReleaseFree = true
		return ipam.Plan(snap, c, lim, now)
	}
	if n.demandOnly(now) {
		acts, short := ipam.Plan(snap, withoutWarm(cfg), lim, now)
		return slices.DeleteFunc(acts, isShrink), short
	}
	ahead := expectedAdds(n, now)
	if ahead == 0 {
		return ipam.Plan(snap, cfg, lim, now)
	}
	snap.Expected = ahead
	acts, short := ipam.Plan(snap, cfg, lim, now)
	if short.Missing > 0 {
		// A limit stops the growth: what the pods are told must be about
		// the Adds that exist, not the ones expected.
		snap.Expected = 0
		_, short = ipam.Plan(snap, cfg, lim, now)
	}
	return acts, short
}

// demandOnly says the pool grows only for waiting pods now (see
// demandOnlyAfterThrottle); a burst's expected Adds do not count then
// either.
func (n *Node) demandOnly(now time.Time) bool {
	t := n.cloud.throttledAt
	return !t.IsZero() && now.Sub(t) < demandOnlyAfterThrottle
}

// countRestartCoolingAsFree: addresses cooling only because the agent
// restarted are not demand the pool failed to meet, and must not make it
// grow (a restart with no pod change makes no EC2 change). They stand in
// for the warm pool only: an Add cannot take a cooling address, so while
// more Adds wait than addresses are free they count as cooling, as any
// other cooling address does, and the pool grows for those pods instead
// of failing them until the cooldown ends (issue 24).
func (n *Node) countRestartCoolingAsFree(snap *ipam.Snapshot) {
	rc := n.host.restartCooling
	if len(rc) == 0 {
		return
	}
	for ip := range rc {
		if !n.pool.IsCooling(ip) {
			delete(rc, ip)
		}
	}
	free := 0
	for _, e := range snap.ENIs {
		for _, b := range e.Blocks {
			free += b.Free
		}
	}
	if snap.Waiting > free {
		return
	}
	for i := range snap.ENIs {
		for j := range snap.ENIs[i].Blocks {
			b := &snap.ENIs[i].Blocks[j]
			k := 0
			for ip := range rc {
				if b.Prefix.Contains(ip) {
					k++
				}
			}
			k = min(k, b.Cooling)
			b.Cooling -= k
			b.Free += k
		}
	}
}

// pendingENIs stands each attachment under way in for the ENI it will
// add: its device index and blocks, all free. The block prefixes are
// placeholders in 0.0.0.0/8, which no VPC uses.
func (n *Node) pendingENIs(now time.Time) []ipam.ENIState {
	var out []ipam.ENIState
	add := func(dev int, act ipam.Action) {
		e := ipam.ENIState{ENI: ipam.ENI{
			ID: fmt.Sprintf("attaching-%d", dev), DeviceIndex: dev,
			SubnetID: act.SubnetID, SecurityGroups: act.SecurityGroups, CreatedAt: now,
		}}
		size, bits := 1, 32
		if act.Prefixes {
			size, bits = ipam.PrefixAddrs, ipam.PrefixBits
		}
		for i := range act.Count {
			k := i * size
			p := netip.PrefixFrom(netip.AddrFrom4([4]byte{0, byte(dev), byte(k >> 8), byte(k)}), bits)
			e.Blocks = append(e.Blocks, ipam.BlockState{Prefix: p, Free: size})
		}
		out = append(out, e)
	}
	for _, at := range n.cloud.attaching {
		add(at.device, at.action)
	}
	for _, j := range n.jobs.inFlight {
		if j.Kind == JobAction && j.Action.Kind == ipam.AttachENI {
			add(j.Device, j.Action)
		}
	}
	// Map order must not reach the planner: a seed replays exactly.
	slices.SortFunc(out, func(a, b ipam.ENIState) int { return a.DeviceIndex - b.DeviceIndex })
	return out
}

// plan runs the planner and hands out its actions, unless actions other
// than attachments are still under way: then the next event plans again
// from what actually happened. While ENIs attach, only further attaches
// are started, so a burst gets every ENI it needs at once.
func (n *Node) plan(now time.Time) {
	n.dropFreePrimaryBlocks(now)
	if n.jobs.running(func(j Job) bool { return j.Kind == JobAction && j.Action.Kind != ipam.AttachENI }) {
		return
	}
	attachesUnderWay := len(n.cloud.attaching) + n.jobs.count(func(j Job) bool { return j.Kind == JobAction })
	actions, short := n.Plan(now)
	n.cloud.lastShortfall = short
	n.cloud.lastPlan = now
	if short.Short() && n.reqs.waiting() > 0 {
		n.shortfallNotice(short)
	}
	actions = n.holdDetach(actions, now)
	for _, act := range n.filter(actions, now, attachesUnderWay > 0) {
		n.start(act, now, &attachesUnderWay)
	}
}

// holdDetach drops the plan's detaches until plans have wanted one for
// Config.DetachHold without a break (see there).
func (n *Node) holdDetach(actions []ipam.Action, now time.Time) []ipam.Action {
	isDetach := func(a ipam.Action) bool { return a.Kind == ipam.DetachENI }
	if !slices.ContainsFunc(actions, isDetach) || n.pressure.on(n) {
		n.cloud.detachWanted = time.Time{}
		return actions
	}
	if n.cloud.detachWanted.IsZero() {
		n.cloud.detachWanted = now
	}
	if now.Sub(n.cloud.detachWanted) >= n.cfg.DetachHold {
		return actions
	}
	return slices.DeleteFunc(actions, isDetach)
}

// filter drops what may not happen now: ENI changes while the ENIConfig
// is unusable, growth and detaches while the node is cordoned (with
// AWS_MANAGE_ENIS_NON_SCHEDULABLE=false), growth while EC2's refusal is
// backed off, anything but attaches while attaches are under way, and
// shrinking while the host's pods are unknown or quarantined addresses
// exist.
func (n *Node) filter(actions []ipam.Action, now time.Time, attaching bool) []ipam.Action {
	hold := n.shrinkHeld(now)
	return slices.DeleteFunc(actions, func(act ipam.Action) bool {
		switch {
		case n.cloud.plan.CustomNetworking && !n.cloud.eniCfgOK && (act.Kind == ipam.AttachENI || act.Kind == ipam.DetachENI):
			return true
		case n.cloud.cordonHold && (isGrowth(act) || act.Kind == ipam.DetachENI):
			return true
		case isGrowth(act) && n.cloud.grow.blocked(now):
			return true
		case attaching && act.Kind != ipam.AttachENI:
			return true
		case isShrink(act) && hold:
			return true
		}
		return false
	})
}

// shrinkHeld says nothing may leave the pool now: the host's pods are
// unknown, quarantined addresses exist, or shrinking waits (a cooldown
// after a boot, a backoff after EC2 refused a release).
func (n *Node) shrinkHeld(now time.Time) bool {
	return !n.host.ok || len(n.host.quarantined) > 0 || n.cloud.shrink.blocked(now)
}

// start hands one action out. Blocks and ENIs leave the pool before EC2
// is asked to release them, so no pod can be given an address on its way
// out; what the release does not give back returns with its result.
func (n *Node) start(act ipam.Action, now time.Time, attaches *int) {
	switch act.Kind {
	case ipam.ReleaseBlocks:
		var removed []netip.Prefix
		for _, b := range act.Blocks {
			if n.pool.RemoveBlock(b, now) == nil {
				removed = append(removed, b)
			}
		}
		if len(removed) == 0 {
			return
		}
		for _, b := range removed {
			n.cloud.released[b] = releaseInFlight
		}
		act.Blocks = removed
		n.log.Info("EC2 change", "action", act.String(), "reason", act.Reason)
		n.job(Job{Kind: JobAction, Action: act})
	case ipam.DetachENI:
		pe, ok := n.pool.ENI(act.ENIID)
		if !ok || n.pool.RemoveENI(act.ENIID, now) != nil {
			return
		}
		m := n.meta[act.ENIID]
		delete(n.meta, act.ENIID)
		n.log.Info("EC2 change", "action", act.String(), "reason", act.Reason)
		n.job(Job{Kind: JobAction, Action: act, ENI: ENIInfo{ID: pe.ID, DeviceIndex: pe.DeviceIndex, SubnetID: pe.SubnetID,
			SubnetCIDR: pe.SubnetCIDR, PrimaryIP: pe.PrimaryIP, MAC: m.MAC, AttachmentID: m.AttachmentID}})
	case ipam.AssignBlocks:
		if e, ok := n.pool.ENI(act.ENIID); ok && act.SubnetID == "" {
			act.SubnetID = e.SubnetID // named if EC2 refuses for fragmentation
		}
		if alt, ok := n.frag.elsewhere(n, act); ok {
			if *attaches >= maxInFlightAttaches {
				return
			}
			limit := n.limits().MaxENIs
			if m := n.cloud.plan.MaxENI; m > 0 {
				limit = min(limit, m)
			}
			if dev, free := n.freeDevice(); free && len(n.pool.ENIs())+*attaches < limit {
				*attaches++
				n.log.Info("EC2 change", "action", alt.String(), "device", dev, "reason", alt.Reason)
				n.job(Job{Kind: JobAction, Action: alt, Device: dev})
				return
			}
		}
		n.log.Info("EC2 change", "action", act.String(), "reason", act.Reason)
		n.job(Job{Kind: JobAction, Action: act})
	case ipam.AttachENI:
		if *attaches >= maxInFlightAttaches {
			return
		}
		dev, ok := n.freeDevice()
		if !ok {
			n.cloud.lastGrowErr = fmt.Errorf("attach ENI: no free device index below %d", n.cfg.Limits.MaxENIs)
			return
		}
		*attaches++
		n.log.Info("EC2 change", "action", act.String(), "device", dev, "reason", act.Reason)
		n.job(Job{Kind: JobAction, Action: act, Device: dev})
	}
}

// freeDevice is the lowest device index no ENI uses, EC2 reported taken,
// or an attachment under way claims.
func (n *Node) freeDevice() (int, bool) {
	used := make(map[int]bool)
	for d := range n.cloud.devices {
		used[d] = true
	}
	for _, e := range n.pool.ENIs() {
		used[e.DeviceIndex] = true
	}
	for _, at := range n.cloud.attaching {
		used[at.device] = true
	}
	for _, j := range n.jobs.inFlight {
		if j.Kind == JobAction && j.Action.Kind == ipam.AttachENI {
			used[j.Device] = true
		}
		if j.Kind == JobAction && j.Action.Kind == ipam.DetachENI {
			used[j.ENI.DeviceIndex] = true
		}
	}
	for d := 0; d < n.cfg.Limits.MaxENIs; d++ {
		if !used[d] {
			return d, true
		}
	}
	return 0, false
}

// dropFreePrimaryBlocks takes out of the pool, with custom networking,
// the blocks no pod holds any more on ENIs pods must not use (the primary,
// and ENIs outside the ENIConfig's subnet), so no new pod is given one.
// They stay assigned in EC2; an ENI left empty is the planner's to detach.
func (n *Node) dropFreePrimaryBlocks(now time.Time) {
	if !n.cfg.CustomNetwork {
		return
	}
	for _, es := range n.pool.Stats(now).ENIs {
		e, _ := n.pool.ENI(es.ID)
		if !n.offSubnet(es.DeviceIndex, e.SubnetID) {
			continue
		}
		for _, b := range es.Blocks {
			if b.Assigned > 0 || b.Cooling > 0 {
				continue
			}
			if err := n.pool.RemoveBlock(b.Prefix, now); err == nil {
				n.log.Info("custom networking: address outside the ENIConfig's subnet no longer used for pods", "eni", es.ID, "block", b.Prefix.String())
			}
		}
	}
}
