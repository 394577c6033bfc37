package ipam

import (
	"errors"
	"fmt"
	"time"
)

// PlanConfig is the warm-pool policy. Every setting that exists in the
// Amazon VPC CNI (aws-node) keeps its name and meaning there, so a node
// can switch over without retuning; the comments name the variable.
//
// The zero value is not the default: start from DefaultPlanConfig and set
// SubnetID and SecurityGroups.
type PlanConfig struct {
	// WarmENITarget is WARM_ENI_TARGET: keep WarmENITarget whole ENIs'
	// worth of addresses (WarmENITarget × (IPv4PerENI−1)) available, and
	// grow by filling whole ENIs. Used in secondary-address mode when
	// neither WarmIPTarget nor MinimumIPTarget is set. Default 1.
	WarmENITarget int
	// WarmIPTarget is WARM_IP_TARGET: keep this many addresses available.
	// 0 means unset. Setting it or MinimumIPTarget switches the planner to
	// address-precise targets and overrides WarmENITarget and
	// WarmPrefixTarget, as in aws-node.
	WarmIPTarget int
	// MinimumIPTarget is MINIMUM_IP_TARGET: keep at least this many
	// addresses in the pool, assigned or not. 0 means unset.
	MinimumIPTarget int
	// WarmPrefixTarget is WARM_PREFIX_TARGET: with prefix delegation and
	// no IP target set, keep this many /28 prefixes entirely free.
	// Default 1 (aws-node's manifest value; its code default is 0, which
	// here still keeps at least one address available).
	WarmPrefixTarget int
	// MaxENI is MAX_ENI: attach at most this many ENIs, primary included.
	// 0 or less means the instance type's limit.
	MaxENI int
	// PrefixDelegation is ENABLE_PREFIX_DELEGATION: grow by /28 prefixes
	// instead of /32 secondary addresses.
	PrefixDelegation bool
	// CustomNetworking is AWS_VPC_K8S_CNI_CUSTOM_NETWORK_CFG: pods use
	// only secondary ENIs on SubnetID, so the primary ENI is never given
	// addresses and the derived max pods leaves it out.
	CustomNetworking bool
	// MaxPods is the node's max pods (kubelet). The pool never grows past
	// what this many pods can use. 0 derives the most the ENIs can
	// address: ENIs × (IPv4PerENI−1) + 2 (aws-node's eni-max-pods), × 16
	// per slot with prefix delegation. The agent passes the kubelet's
	// value, MAX_PODS or EKS's rule (limits.DefaultMaxPods).
	MaxPods int
	// ENIGracePeriod: an ENI younger than this is never detached, so an
	// ENI attached for a burst is not torn down before the burst lands.
	// Default 1 minute (aws-node's minimum ENI lifetime).
	ENIGracePeriod time.Duration
	// KeepForeignBlocks keeps blocks of the kind not in use (the /28
	// prefixes while the agent falls back to secondary addresses on a
	// fragmented subnet): they are not released when free, they keep
	// their slot, and their free addresses count as available.
	KeepForeignBlocks bool
	// ReleaseFree gives back the free addresses of partly used ENIs
	// beyond the targets in WARM_ENI_TARGET mode too, which otherwise
	// keeps them (as aws-node does) and gives back only whole free ENIs.
	// The agent sets it while its subnet is nearly full: addresses idle
	// on a node are then what another node's waiting pods lack.
	ReleaseFree bool
	// SubnetID and SecurityGroups are given to every new ENI. The agent
	// chooses them (the primary ENI's, or the ENIConfig's).
	SubnetID       string
	SecurityGroups []string
}

// DefaultPlanConfig returns aws-node's defaults: WARM_ENI_TARGET=1,
// WARM_PREFIX_TARGET=1, no IP targets, no MAX_ENI, derived max pods and a
// one-minute ENI grace period. The caller sets SubnetID and
// SecurityGroups.
func DefaultPlanConfig() PlanConfig {
	return PlanConfig{
		WarmENITarget:    1,
		WarmPrefixTarget: 1,
		ENIGracePeriod:   time.Minute,
	}
}

// Validate reports the first setting Plan cannot work with, named by its
// environment variable.
func (c PlanConfig) Validate() error {
	for _, f := range []struct {
		name string
		v    int
	}{
		{"WARM_ENI_TARGET", c.WarmENITarget},
		{"WARM_IP_TARGET", c.WarmIPTarget},
		{"MINIMUM_IP_TARGET", c.MinimumIPTarget},
		{"WARM_PREFIX_TARGET", c.WarmPrefixTarget},
		{"max pods", c.MaxPods},
	} {
		if f.v < 0 {
			return fmt.Errorf("%s=%d: must be 0 or more", f.name, f.v)
		}
	}
	if c.ENIGracePeriod < 0 {
		return fmt.Errorf("ENI grace period %v: must be 0 or more", c.ENIGracePeriod)
	}
	if c.SubnetID == "" {
		return errors.New("no subnet for new ENIs: set PlanConfig.SubnetID (the primary ENI's subnet, or the ENIConfig's)")
	}
	return nil
}

// ipTargets reports whether WARM_IP_TARGET or MINIMUM_IP_TARGET is set,
// which makes them override the ENI and prefix targets.
func (c PlanConfig) ipTargets() bool { return c.WarmIPTarget > 0 || c.MinimumIPTarget > 0 }

// Limits are the instance type's networking limits as EC2 reports them
// (DescribeInstanceTypes, network card 0).
type Limits struct {
	// MaxENIs is how many ENIs the planner may have attached, primary
	// included. The agent subtracts ENIs it does not manage (trunk, EFA,
	// tagged no_manage) before passing it.
	MaxENIs int
	// IPv4PerENI is the IPv4 address limit per ENI, the ENI's own primary
	// address included. A /28 prefix takes one of these slots.
	IPv4PerENI int
}

// MaxSecondaryIPsPerENI is how many pod addresses one ENI can carry in
// secondary-address mode.
func (l Limits) MaxSecondaryIPsPerENI() int { return l.IPv4PerENI - 1 }

// MaxPrefixesPerENI is how many /28 prefixes one ENI can carry.
func (l Limits) MaxPrefixesPerENI() int { return l.IPv4PerENI - 1 }

// Validate reports limits no instance type has.
func (l Limits) Validate() error {
	if l.MaxENIs < 1 {
		return fmt.Errorf("ENI limit %d: an instance has at least its primary ENI", l.MaxENIs)
	}
	if l.IPv4PerENI < 2 {
		return fmt.Errorf("IPv4 limit per ENI %d: must be at least 2 (the ENI's primary address and one more)", l.IPv4PerENI)
	}
	return nil
}

// Plan decides what to change so the pool meets its targets: a pure
// function of the pool, the policy, the instance's limits and the time.
// It returns the actions in the order they must be performed (see
// Action) and, when growth is cut short by a limit, a Shortfall saying
// which; the zero Shortfall means none.
//
// Plan panics if cfg or lim fails Validate: the agent validates both once
// at start, so an invalid value here is a bug.
func Plan(s Snapshot, cfg PlanConfig, lim Limits, now time.Time) ([]Action, Shortfall) {
	if err := cfg.Validate(); err != nil {
		panic("ipam.Plan: invalid PlanConfig: " + err.Error())
	}
	if err := lim.Validate(); err != nil {
		panic("ipam.Plan: invalid Limits: " + err.Error())
	}
	p := newPlanner(s, cfg, lim, now)
	var short Shortfall
	if want := p.growBlocks(); want > 0 {
		short = p.grow(want)
		// Growth can leave an untouched ENI surplus (filling whole ENIs
		// overshoots); taking it now keeps the next pass from undoing
		// this one.
		p.detachWhole(p.surplusBlocks())
	} else {
		budget := p.surplusBlocks()
		budget = p.detachWhole(budget)
		if p.mode != modeENIs || p.cfg.ReleaseFree {
			p.releaseBlocks(budget)
		}
	}
	return p.ordered(), short
}
