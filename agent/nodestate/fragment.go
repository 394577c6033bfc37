package nodestate

import (
	"fmt"
	"time"

	"github.com/vpcnet/vpcnet/ipam"
)

// Prefix fallback. With prefix delegation, EC2's InsufficientCidrBlocks
// says the subnet has no free aligned /28 although it may have many free
// addresses (a fragmented subnet). Pods must keep starting, so the node
// grows by single secondary addresses, keeping every /28 it holds, and
// asks for a prefix again after a backoff: 30 s, doubling to 10 minutes.
// Once the backoff passes the pool grows by prefixes again, still keeping
// the single addresses; the first prefix EC2 grants ends the fallback,
// and free single addresses are released as usual for the kind not in
// use.
const (
	minPrefixRetry = 30 * time.Second
	maxPrefixRetry = 10 * time.Minute
)

// ReasonSubnetFragmented: the subnet has free addresses but no free /28.
const ReasonSubnetFragmented = "subnet_fragmented"

// fragmentFix is what an operator does about a fragmented subnet.
const fragmentFix = "reserve a range of the subnet for prefixes (aws ec2 create-subnet-cidr-reservation --reservation-type prefix), " +
	"or add a subnet for pods (tag it kubernetes.io/role/cni=1, or use custom networking)"

// fallback is the prefix fallback's state.
type fallback struct {
	active bool
	subnet string
	// free is the subnet's free address count when EC2 refused, -1 if
	// unknown.
	free  int
	since time.Time
	delay time.Duration
	// until is when prefixes are asked for again.
	until time.Time
}

// PrefixFallback is the prefix fallback as /v1/status shows it.
type PrefixFallback struct {
	Reason        string
	SubnetID      string
	FreeAddresses int
	Since         time.Time
	// RetryAt is when the pool grows by prefixes again; past it, the
	// next growth asks for a prefix.
	RetryAt time.Time
	Fix     string
}

// planConfig is the planner's policy now: during the fallback's backoff,
// single secondary addresses with the prefixes kept, and as many
// addresses kept available as the prefix target would (WARM_PREFIX_TARGET
// whole /28s) unless an IP target is set.
func (f *fallback) planConfig(cfg ipam.PlanConfig, now time.Time) ipam.PlanConfig {
	if !f.active || !cfg.PrefixDelegation {
		return cfg
	}
	cfg.KeepForeignBlocks = true
	if !now.Before(f.until) {
		return cfg // asking for prefixes again
	}
	cfg.PrefixDelegation = false
	if cfg.WarmIPTarget == 0 && cfg.MinimumIPTarget == 0 {
		cfg.WarmIPTarget = max(cfg.WarmPrefixTarget, 1) * ipam.PrefixAddrs
	}
	return cfg
}

// observe takes in the outcome of a growth action: a prefix refused for
// fragmentation starts (or prolongs) the fallback and lifts the growth
// backoff so single addresses are asked for at once; a prefix granted
// ends it.
func (f *fallback) observe(n *Node, act ipam.Action, ev ActionResult, c ErrorClass, now time.Time) {
	// An IPv6 /80 has no IPv4 fallback: it is the mode's only source.
	if !act.Prefixes || act.IPv6 {
		return
	}
	switch {
	case ev.Err == nil && f.active:
		subnet := act.SubnetID
		if ev.SubnetID != "" {
			subnet = ev.SubnetID
		}
		n.log.Info("EC2 granted a /28 prefix again: prefix fallback over", "subnet", subnet, "after", now.Sub(f.since).String())
		n.notice("SubnetFragmentationCleared", fmt.Sprintf("EC2 grants /28 prefixes in subnet %s again; the node grows by prefixes", subnet))
		*f = fallback{}
	case ev.Err != nil && c.SubnetFragmented:
		if !f.active {
			f.since = now
		}
		f.active, f.subnet, f.free = true, act.SubnetID, ev.SubnetFree
		if ev.SubnetID != "" {
			f.subnet = ev.SubnetID
		}
		f.delay = min(max(2*f.delay, minPrefixRetry), maxPrefixRetry)
		f.until = now.Add(f.delay)
		n.cloud.grow.reset()
		n.log.Warn("subnet fragmented: no free /28 for a prefix; growing by single secondary addresses meanwhile",
			"subnet", f.subnet, "freeAddresses", f.free, "retryPrefixesIn", f.delay.String(), "fix", fragmentFix)
		n.notice("SubnetFragmented", f.message())
	}
}

// elsewhere turns a prefix assign to an ENI of the fragmented subnet into
// an attach of a new ENI with those prefixes, when subnet discovery may
// put it in another subnet: the node tries the next eligible subnet
// instead of asking the fragmented one again.
func (f *fallback) elsewhere(n *Node, act ipam.Action) (ipam.Action, bool) {
	if !f.active || !act.Prefixes || act.IPv6 || !n.cfg.SubnetDiscovery || act.SubnetID != f.subnet {
		return ipam.Action{}, false
	}
	plan := n.cloud.plan
	return ipam.Action{Kind: ipam.AttachENI, Count: act.Count, Prefixes: true, SubnetID: plan.SubnetID, SecurityGroups: plan.SecurityGroups,
		Reason: act.Reason + "; subnet " + f.subnet + " is fragmented, so on a new ENI in the next eligible subnet"}, true
}

// message says what happened, what the node does and the fix.
func (f *fallback) message() string {
	free := "an unknown number of"
	if f.free >= 0 {
		free = fmt.Sprint(f.free)
	}
	return fmt.Sprintf("subnet %s has %s free addresses but no free aligned /28 for a prefix (InsufficientCidrBlocks): it is fragmented; "+
		"the node gives pods single secondary addresses meanwhile and asks for prefixes again at %s; fix: %s",
		f.subnet, free, f.until.UTC().Format(time.RFC3339), fragmentFix)
}

// view is the fallback for /v1/status, nil when off.
func (f *fallback) view() *PrefixFallback {
	if !f.active {
		return nil
	}
	return &PrefixFallback{Reason: ReasonSubnetFragmented, SubnetID: f.subnet, FreeAddresses: f.free, Since: f.since, RetryAt: f.until, Fix: fragmentFix}
}

// wakeAt is when the machine must plan again to ask for prefixes.
func (f *fallback) wakeAt(now time.Time) time.Time {
	if f.active && now.Before(f.until) {
		return f.until
	}
	return time.Time{}
}
