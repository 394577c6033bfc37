package executor

import (
	"slices"

	"github.com/vpcnet/vpcnet/agent/nodestate"
	"github.com/vpcnet/vpcnet/ipam"
)

// Calls are the EC2 actions job will make as far as this executor can
// tell before it runs: job.Calls(), the most a job of its kind makes,
// less the reads it will answer from what it has learned. The cluster's
// budget books every listed call against its action's bucket, so a read
// made once per agent must not be booked at every job: booked at every
// attach (the primary ENI's connection tracking, read at start-up) and
// every confirm (the new ENI's subnet, known from IMDS), they held a
// 300-node join at 1.41 times its lower bound instead of 1.19, the
// Describe buckets' schedule running behind the creates'. A grant books
// every listed action at the slot of the busiest, so a read listed with
// a create is booked behind the cluster's whole create backlog, and
// every later request that lists that read waits there too.
func (x *Executor) Calls(job nodestate.Job) []string {
	calls := job.Calls()
	// Fresh subnets answer every DescribeSubnets an attach or a read of
	// the attached ENIs would make: the create's subnets, and with
	// discovery every subnet of the node's VPC and zone, where all its
	// ENIs are.
	zone := x.cachedSubnets()
	x.mu.Lock()
	defer x.mu.Unlock()
	attach := job.Kind == nodestate.JobAction && job.Action.Kind == ipam.AttachENI
	if attach && zone != nil && !job.Action.Prefixes {
		// The attach creates in these subnets, however long its grant
		// waits and whatever the cache holds when it runs: it was not
		// granted a read of its own.
		if x.booked == nil {
			x.booked = map[uint64]*zoneSubnets{}
		}
		x.booked[job.ID] = zone
	}
	return slices.DeleteFunc(slices.Clone(calls), func(action string) bool {
		switch {
		case attach && action == "DescribeNetworkInterfaces":
			return x.primaryCTRead
		case attach && action == "DescribeSubnets" && !job.Action.Prefixes:
			// With prefixes a create refused for fragmentation asks the
			// subnet's free count (subnetFree): booked still.
			return x.CustomNetwork || zone != nil
		case job.Kind == nodestate.JobResync && action == "DescribeSubnets":
			return zone != nil && len(zone.all) > 0
		case job.Kind == nodestate.JobConfirmAttach && action == "DescribeSubnets":
			subnet, ok := x.created[job.ENIID]
			return ok && x.knownCIDRLocked(subnet)
		}
		return false
	})
}

// bookedSubnets takes the subnets Calls booked job's attach with, if any.
func (x *Executor) bookedSubnets(id uint64) *zoneSubnets {
	x.mu.Lock()
	defer x.mu.Unlock()
	z := x.booked[id]
	delete(x.booked, id)
	return z
}

// knownCIDRLocked says whether subnetCIDR answers for subnet without a
// call. Callers hold mu.
func (x *Executor) knownCIDRLocked(subnet string) bool {
	if _, ok := x.subnets[subnet]; ok {
		return true
	}
	for _, i := range x.Self.Interfaces {
		if i.SubnetID == subnet && i.SubnetCIDR.IsValid() {
			return true
		}
	}
	return false
}
