package nodestate

import (
	"slices"
	"time"

	"github.com/vpcnet/vpcnet/ipam"
)

// markUrgent lists the jobs in flight that pods wait for, so a
// cluster-wide EC2 budget (package budget) can grant them before jobs
// that only fill the warm pool. Of the ENIs being attached, as many as
// the waiting demand needs on its own are urgent, oldest job first: a
// node that started a warm ENI before its pods came needs that one for
// them now. Assigns, attachment confirmations and EC2 reads are urgent
// while demand waits; releases, detaches and deletes never are.
//
// A pool that holds no address at all is waited for too, before any pod
// asks: the node is not Ready (no CNI configuration) until it has one, so
// its first pod is held back by the scheduler rather than queued here.
// Its first fill is urgent; as warm-pool work it waited behind a budget
// controller's reserve (ten seconds after a controller's term began, on
// every node of a new cluster: make bench-awsnode).
func markUrgent(n *Node, now time.Time) {
	n.urgentJobs = n.urgentJobs[:0]
	empty := n.pool.Total() == 0
	if (n.reqs.demandCount() == 0 && !empty) || len(n.jobs.inFlight) == 0 {
		return
	}
	var attaches []uint64
	assigning := false
	for id, j := range n.jobs.inFlight {
		switch {
		case j.Kind == JobAction && j.Action.Kind == ipam.AttachENI:
			attaches = append(attaches, id)
		case j.Kind == JobAction && j.Action.Kind == ipam.AssignBlocks,
			j.Kind == JobConfirmAttach, j.Kind == JobResync:
			n.urgentJobs = append(n.urgentJobs, id)
			assigning = assigning || j.Kind == JobAction
		}
	}
	if len(attaches) > 0 {
		slices.Sort(attaches)
		need := demandAttaches(n, now) - len(n.cloud.attaching)
		if empty && !assigning {
			// Custom networking: the first addresses come on an ENI.
			need = max(need, 1)
		}
		n.urgentJobs = append(n.urgentJobs, attaches[:max(0, min(need, len(attaches)))]...)
	}
	slices.Sort(n.urgentJobs)
}

// demandAttaches is how many ENIs the waiting demand alone needs attached
// beyond the pool's attached ENIs: the plan with no warm target and no
// attachment under way counted.
func demandAttaches(n *Node, now time.Time) int {
	if n.cfg.IPv6 {
		return 0 // no ENI is attached for IPv6 pods
	}
	cfg := withoutWarm(n.frag.planConfig(n.cloud.plan, now))
	acts, _ := ipam.Plan(planSnapshot(n, now), cfg, n.limits(), now)
	k := 0
	for _, a := range acts {
		if a.Kind == ipam.AttachENI {
			k++
		}
	}
	return k
}
