package scale

import (
	"time"

	"github.com/vpcnet/vpcnet/agent/nodestate"
	"github.com/vpcnet/vpcnet/ipam"
)

// budget models the cluster-wide design issue 15 asks about (point 4),
// not code that ships: one grant queue per EC2 action, shared by every
// node, that hands out the account's tokens at a fraction of EC2's
// refill, first come first served. A node runs a job only once every
// call it makes has a grant, so the account's buckets never run dry and
// no call is answered RequestLimitExceeded. With Options.SharedBudget the
// driver runs every job through it; the figures show what such a
// controller could buy before it is built.
type budget struct {
	acc    Account
	margin float64
	// tat is, per action, the theoretical arrival time of GCRA: grants
	// are a virtual schedule, so reservations queue up in order.
	tat map[string]time.Time
}

func newBudget(acc Account) *budget {
	return &budget{acc: acc, margin: 0.9, tat: map[string]time.Time{}}
}

// params are an action's gap between grants and how far ahead of now its
// schedule may run (its burst), both at margin of EC2's.
func (b *budget) params(a string) (gap, tolerance time.Duration) {
	bs := b.acc.bucketFor(a)
	gap = time.Duration(float64(time.Second) / (bs.Refill * b.margin))
	return gap, time.Duration(max(float64(bs.Burst)*b.margin-1, 0)) * gap
}

// reserve books one token of each action's bucket for a job that asks at
// now, and says when all of them are granted.
func (b *budget) reserve(now time.Time, actions []string) time.Time {
	at := now
	for _, a := range actions {
		_, tol := b.params(a)
		at = maxTime(at, maxTime(b.tat[a], now).Add(-tol))
	}
	for _, a := range actions {
		gap, _ := b.params(a)
		b.tat[a] = maxTime(b.tat[a], at).Add(gap)
	}
	return at
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// jobCalls are the EC2 actions a job makes at most.
func jobCalls(j nodestate.Job) []string {
	switch j.Kind {
	case nodestate.JobResync, nodestate.JobConfirmAttach:
		if j.MAC != "" || j.IMDSDigest != "" {
			return nil // IMDS first; EC2 once, when IMDS shows a change
		}
		return []string{"DescribeNetworkInterfaces"}
	case nodestate.JobSetDeleteOnTermination:
		return []string{"ModifyNetworkInterfaceAttribute"}
	case nodestate.JobDeleteENI:
		return []string{"DescribeNetworkInterfaces", "DeleteNetworkInterface"}
	case nodestate.JobAction:
		switch j.Action.Kind {
		case ipam.AttachENI:
			return []string{"CreateNetworkInterface", "AttachNetworkInterface", "ModifyNetworkInterfaceAttribute"}
		case ipam.AssignBlocks:
			return []string{"AssignPrivateIpAddresses"}
		case ipam.ReleaseBlocks:
			return []string{"DescribeNetworkInterfaces", "UnassignPrivateIpAddresses"}
		case ipam.DetachENI:
			return []string{"DescribeNetworkInterfaces", "DetachNetworkInterface"}
		}
	}
	return nil
}
