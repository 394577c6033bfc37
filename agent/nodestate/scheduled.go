package nodestate

import (
	"slices"
	"time"

	"github.com/vpcnet/vpcnet/ipam"
)

// PodsScheduled is what the API server says is on its way: the pods
// bound to this node that need a pod-network address (not hostNetwork,
// not finished, not being deleted). The scheduler binds a pod before
// kubelet starts its sandbox, so the bound pods that hold no address yet
// are Adds about to come: a burst's size, known before most of its Adds
// arrive and bounded by pods that exist. Without an API server no such
// event comes and the machine anticipates from the Adds alone (burst.go).
type PodsScheduled struct {
	Pods []ipam.Pod
}

func (PodsScheduled) event() {}

// boundPods holds the last PodsScheduled.
type boundPods struct {
	pods []ipam.Pod
	// known: the API server has said which pods are bound. Every pod is
	// bound before its Add, so the bound pods are the whole burst and a
	// guess from the Adds' arrival rate would only add ENIs no pod
	// needs.
	known bool
}

func (s *boundPods) set(ev PodsScheduled) {
	s.pods, s.known = slices.Clone(ev.Pods), true
}

// expectedAdds is how many Adds are expected beyond those waiting: the bound
// pods' when the API server says, else the arrival rate's guess, which
// never exceeds the pods that can still come: max pods less the pods
// holding addresses (quarantined ones are live pods too) and the Adds
// already counted as demand. Without that bound a burst of 40 pods on an
// m5.4xlarge was taken for a thousand.
func expectedAdds(n *Node, now time.Time) int {
	if n.sched.known {
		return n.sched.coming(n)
	}
	guess := n.burst.anticipated(now, len(n.reqs.waiters))
	if m := n.cloud.plan.MaxPods; m > 0 && guess > 0 {
		room := m - n.pool.Stats(now).Assigned - n.reqs.demandCount()
		guess = min(guess, max(room, 0))
	}
	return guess
}

// coming counts the scheduled pods that hold no address and whose Add is
// not already waiting (waiting Adds count in the plan by themselves).
func (s *boundPods) coming(n *Node) int {
	if len(s.pods) == 0 {
		return 0
	}
	have := make(map[ipam.Pod]bool, len(s.pods))
	for _, as := range n.pool.Assignments() {
		have[as.Pod] = true
	}
	for _, w := range n.reqs.waiters {
		have[w.pod] = true
	}
	k := 0
	for _, p := range s.pods {
		if !have[p] {
			k++
		}
	}
	return k
}
