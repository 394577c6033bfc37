package nodestate

import (
	"errors"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/vpcnet/vpcnet/ipam"
)

// An Add whose address is on its way waits up to AddWait: failed sooner,
// kubelet tears its sandbox down and asks again only after its backoff
// (10 to 15 s), and the pod starts that long after the address came. An
// Add no address can come for (here a cordoned node that may not grow)
// fails after hopelessWait with the reason, as every Add did before
// AddWait grew.
func TestAnAddWaitsForAnAddressOnItsWayAndFailsSoonWhenNoneCanCome(t *testing.T) {
	cfg := testConfig()
	cfg.AddWait = time.Minute
	full := func(t *testing.T) (*Node, []Job) { return fullNode(t, cfg) }
	add := func(n *Node, now time.Time) {
		n.Step(now, AddRequest{ID: 2, Key: podKey(2), Pod: ipam.Pod{Namespace: "default", Name: "p2"}})
	}

	t.Run("on its way", func(t *testing.T) {
		n, jobs := full(t)
		add(n, t0)
		more, replies := drain(t, n, t0)
		grow, ok := find(append(jobs, more...), func(j Job) bool { return j.Kind == JobAction && j.Action.Kind == ipam.AssignBlocks })
		if !ok || len(replies) != 0 {
			t.Fatalf("the second pod on a full node: jobs %v, replies %v; want the pool to grow and the Add to wait", jobs, replies)
		}
		if wake := n.wake(); wake.Before(t0.Add(hopelessWait)) {
			t.Fatalf("the node wants to be woken at %v, before the Add could be judged", wake.Sub(t0))
		}
		at := t0.Add(hopelessWait + 5*time.Second)
		n.Step(at, Tick{})
		if _, replies := drain(t, n, at); len(replies) != 0 {
			t.Fatalf("after %v, with the pool's growth under way, the Add was answered: %+v", at.Sub(t0), replies)
		}
		// EC2 assigns the address 20 s in: the Add gets it.
		at = t0.Add(20 * time.Second)
		n.Step(at, ActionResult{JobID: grow.ID, Blocks: []netip.Prefix{netip.MustParsePrefix("10.0.0.6/32")}})
		_, replies = drain(t, n, at)
		if len(replies) != 1 || replies[0].Err != nil || replies[0].ID != 2 {
			t.Fatalf("once the address came: replies %+v; want the waiting Add given it", replies)
		}
	})

	t.Run("none can come", func(t *testing.T) {
		n, _ := full(t)
		n.Step(t0, CordonUpdate{Hold: true})
		add(n, t0)
		if _, replies := drain(t, n, t0); len(replies) != 0 {
			t.Fatalf("the Add was answered at once: %+v", replies)
		}
		wake := n.wake()
		if wake.IsZero() || wake.After(t0.Add(hopelessWait)) {
			t.Fatalf("the node wants to be woken at %v; want by %v, to tell the Add why it gets nothing", wake.Sub(t0), hopelessWait)
		}
		at := t0.Add(hopelessWait)
		n.Step(at, Tick{})
		_, replies := drain(t, n, at)
		var noAddr *NoAddressError
		if len(replies) != 1 || !errors.As(replies[0].Err, &noAddr) || noAddr.Reason != ReasonCordoned {
			t.Fatalf("after %v on a cordoned node: replies %+v; want the Add failed with %s", hopelessWait, replies, ReasonCordoned)
		}
	})
}

// fullNode starts a node whose primary ENI holds one address, and gives
// it to an Add at t0; it returns the jobs handed out.
func fullNode(t *testing.T, cfg Config) (*Node, []Job) {
	t.Helper()
	n, err := New(cfg, Boot{CheckpointMissing: true, ENIs: []ENIInfo{primaryENI("10.0.0.5/32")}, Devices: []int{0}}, t0)
	if err != nil {
		t.Fatal(err)
	}
	n.Step(t0, HostResult{})
	n.Step(t0, AddRequest{ID: 1, Key: podKey(1), Pod: ipam.Pod{Namespace: "default", Name: "p1"}})
	jobs, _ := drain(t, n, t0)
	return n, jobs
}

// secondAddWaits is fullNode with a second Add at t0, which waits for
// the job that grows the pool (an assign), returned.
func secondAddWaits(t *testing.T, cfg Config) (*Node, Job) {
	t.Helper()
	n, jobs := fullNode(t, cfg)
	n.Step(t0, AddRequest{ID: 2, Key: podKey(2), Pod: ipam.Pod{Namespace: "default", Name: "p2"}})
	more, _ := drain(t, n, t0)
	grow, ok := find(append(jobs, more...), func(j Job) bool { return j.Kind == JobAction && j.Action.Kind == ipam.AssignBlocks })
	if !ok {
		t.Fatalf("jobs %v; want the full pool to grow", append(jobs, more...))
	}
	return n, grow
}

// While the budget controller fails over (the node's budget client holds
// its EC2 calls for the next leader), a waiting Add's deadline stands
// still, up to failoverWait: its address comes about the takeover
// later, and failing the Add just before it comes would cost the pod
// kubelet's backoff on top (scale's failover: every pod past the
// takeover plus one attach had one more failed ADD than without it).
func TestAnAddWaitsOutABudgetFailoverOnTopOfAddWait(t *testing.T) {
	cfg := testConfig()
	cfg.AddWait = time.Minute
	start := func(t *testing.T) *Node {
		n, _ := secondAddWaits(t, cfg)
		return n
	}
	failed := func(t *testing.T, n *Node, at time.Time) bool {
		t.Helper()
		n.Step(at, Tick{})
		_, replies := drain(t, n, at)
		return len(replies) == 1 && replies[0].ID == 2 && replies[0].Err != nil
	}

	t.Run("held 15 s", func(t *testing.T) {
		n := start(t)
		n.Step(t0.Add(50*time.Second), BudgetFailover{Holding: true})
		drain(t, n, t0.Add(50*time.Second))
		if failed(t, n, t0.Add(time.Minute)) {
			t.Fatal("the Add failed at AddWait while the budget controller failed over")
		}
		n.Step(t0.Add(65*time.Second), BudgetFailover{Holding: false})
		drain(t, n, t0.Add(65*time.Second))
		if wake := n.wake(); !wake.Equal(t0.Add(75 * time.Second)) {
			t.Fatalf("the node wants to be woken at %v; want at AddWait plus the 15 s held (75s)", wake.Sub(t0))
		}
		if failed(t, n, t0.Add(74*time.Second)) {
			t.Fatal("the Add failed before AddWait plus the time held")
		}
		if !failed(t, n, t0.Add(75*time.Second)) {
			t.Fatal("the Add did not fail at AddWait plus the time held")
		}
	})

	t.Run("held for good", func(t *testing.T) {
		n := start(t)
		n.Step(t0.Add(30*time.Second), BudgetFailover{Holding: true})
		drain(t, n, t0.Add(30*time.Second))
		if failed(t, n, t0.Add(time.Minute+failoverWait-time.Second)) {
			t.Fatal("the Add failed before AddWait plus failoverWait while the budget controller failed over")
		}
		if wake := n.wake(); !wake.Equal(t0.Add(time.Minute + failoverWait)) {
			t.Fatalf("the node wants to be woken at %v; want at AddWait plus failoverWait", wake.Sub(t0))
		}
		if !failed(t, n, t0.Add(time.Minute+failoverWait)) {
			t.Fatalf("the Add still waits at AddWait plus %v: the plugin would time out first", failoverWait)
		}
	})
}

// An Add whose deadline comes while EC2 is already making its address
// (the job that brings it was granted: JobGrant, or its ENI attaches)
// waits for it, up to AnswerSlack past AddWait: failed moments before
// its address comes, its pod would pay kubelet's backoff (10 to 15 s)
// and a new sandbox (scale's 1,000-node failover: 102 pods, each failed
// 1 to 2 s before its address came). An Add whose job still waits for
// the cluster's budget fails at its deadline as before.
func TestAnAddWaitsPastItsDeadlineForAnAddressEC2IsMaking(t *testing.T) {
	cfg := testConfig()
	cfg.AddWait = time.Minute
	start := func(t *testing.T) (*Node, Job) { return secondAddWaits(t, cfg) }
	answer := func(t *testing.T, n *Node, at time.Time, ev Event) []Reply {
		t.Helper()
		n.Step(at, ev)
		_, replies := drain(t, n, at)
		return replies
	}
	failed := func(r []Reply) bool { return len(r) == 1 && r[0].ID == 2 && r[0].Err != nil }
	deadline, limit := t0.Add(time.Minute), t0.Add(time.Minute+AnswerSlack)

	t.Run("granted before the deadline, done after it", func(t *testing.T) {
		n, grow := start(t)
		answer(t, n, deadline.Add(-time.Second), JobGrant{JobID: grow.ID})
		if r := answer(t, n, deadline, Tick{}); len(r) != 0 {
			t.Fatalf("at AddWait, with EC2 assigning its address: replies %+v; want the Add to wait", r)
		}
		if wake := n.wake(); !wake.Equal(limit) {
			t.Fatalf("the node wants to be woken at %v; want at AddWait plus AnswerSlack", wake.Sub(t0))
		}
		r := answer(t, n, deadline.Add(2*time.Second), ActionResult{JobID: grow.ID, Blocks: []netip.Prefix{netip.MustParsePrefix("10.0.0.6/32")}})
		if len(r) != 1 || r[0].ID != 2 || r[0].Err != nil {
			t.Fatalf("once the address came: replies %+v; want the waiting Add given it", r)
		}
	})

	t.Run("still waiting for the budget", func(t *testing.T) {
		n, _ := start(t)
		if r := answer(t, n, deadline, Tick{}); !failed(r) {
			t.Fatalf("at AddWait, its job not granted: replies %+v; want the Add failed", r)
		}
	})

	t.Run("granted, EC2 slower than the plugin waits", func(t *testing.T) {
		n, grow := start(t)
		answer(t, n, deadline.Add(-time.Second), JobGrant{JobID: grow.ID})
		if r := answer(t, n, limit.Add(-time.Millisecond), Tick{}); len(r) != 0 {
			t.Fatalf("before AddWait plus AnswerSlack: replies %+v; want the Add to wait", r)
		}
		r := answer(t, n, limit, Tick{})
		if !failed(r) {
			t.Fatalf("at AddWait plus AnswerSlack: replies %+v; want the Add failed before the plugin times out", r)
		}
		// The pod's event says the wait it was, not AddWait alone.
		if msg := r[0].Err.Error(); !strings.Contains(msg, "in the 1m25s this ADD waited (VPCNET_ADD_WAIT=1m0s") {
			t.Errorf("the Add failed with %q; want it to say it waited 1m25s", msg)
		}
	})

	t.Run("granted, EC2 refuses", func(t *testing.T) {
		n, grow := start(t)
		answer(t, n, deadline.Add(-time.Second), JobGrant{JobID: grow.ID})
		answer(t, n, deadline, Tick{})
		r := answer(t, n, deadline.Add(time.Second), ActionResult{JobID: grow.ID, Err: errors.New("InsufficientFreeAddressesInSubnet")})
		if !failed(r) {
			t.Fatalf("once EC2 refused the address: replies %+v; want the Add failed at once", r)
		}
	})

	t.Run("the grant's news after the result", func(t *testing.T) {
		n, grow := start(t)
		answer(t, n, deadline.Add(-2*time.Second), ActionResult{JobID: grow.ID, Err: errors.New("RequestLimitExceeded")})
		answer(t, n, deadline.Add(-time.Second), JobGrant{JobID: grow.ID})
		if r := answer(t, n, deadline, Tick{}); !failed(r) {
			t.Fatalf("at AddWait, its job answered before its grant's news: replies %+v; want the Add failed", r)
		}
	})
}
