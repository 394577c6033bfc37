package scale

import (
	"slices"
	"time"

	"github.com/vpcnet/vpcnet/agent/nodestate"
	"github.com/vpcnet/vpcnet/ipam"
)

// budget models the cluster-wide design issue 15 asks about (point 4),
// not code that ships: one grant queue per EC2 action, shared by every
// node, that hands out the account's tokens at a fraction of EC2's
// refill, to nodes whose pods wait before nodes filling a warm pool. A node runs a job only once every
// call it makes has a grant, so the account's buckets never run dry and
// no call is answered RequestLimitExceeded. With Options.SharedBudget the
// driver runs every job through it, jobs of nodes with pods waiting for
// an address first; the figures show what such a controller could buy
// before it is built.
type budget struct {
	acc    Account
	margin float64
	// tat is, per action, the theoretical arrival time of GCRA: grants
	// are a virtual schedule, so reservations queue up in order.
	tat map[string]time.Time
	// waiting are the jobs not granted yet; armed is when pump is due.
	waiting []grant
	seq     uint64
	armed   time.Time
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

// grant is a job waiting for its tokens.
type grant struct {
	seq     uint64
	urgent  bool
	actions []string
	run     func()
}

// request queues a job's calls; urgent ones (the node has pods waiting
// for an address) go before the rest, each class first come first
// served. run is called when every token is granted.
func (b *budget) request(r *run, urgent bool, actions []string, fn func()) {
	b.seq++
	g := grant{seq: b.seq, urgent: urgent, actions: actions, run: fn}
	i := len(b.waiting)
	if urgent {
		i = slices.IndexFunc(b.waiting, func(w grant) bool { return !w.urgent })
		if i < 0 {
			i = len(b.waiting)
		}
	}
	b.waiting = slices.Insert(b.waiting, i, g)
	b.pump(r)
}

// pump grants, in priority order, every waiting job whose tokens are all
// free now (a job waiting for one bucket does not hold up jobs of other
// buckets), and comes back when the next one can be granted.
func (b *budget) pump(r *run) {
	now := r.now()
	var next time.Time
	var granted []func()
	b.waiting = slices.DeleteFunc(b.waiting, func(g grant) bool {
		at := now
		for _, a := range g.actions {
			_, tol := b.params(a)
			at = maxTime(at, maxTime(b.tat[a], now).Add(-tol))
		}
		if at.After(now) {
			if next.IsZero() || at.Before(next) {
				next = at
			}
			return false
		}
		for _, a := range g.actions {
			gap, _ := b.params(a)
			b.tat[a] = maxTime(b.tat[a], now).Add(gap)
		}
		granted = append(granted, g.run)
		return true
	})
	if !next.IsZero() && (b.armed.IsZero() || next.Before(b.armed) || !b.armed.After(now)) {
		b.armed = next
		r.q.at(next, func() {
			if b.armed.Equal(next) {
				b.armed = time.Time{}
			}
			b.pump(r)
		})
	}
	for _, run := range granted {
		run()
	}
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
