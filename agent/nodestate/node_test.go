package nodestate

import (
	"errors"
	"net/netip"
	"testing"
	"time"

	"github.com/vpcnet/vpcnet/ipam"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func testConfig() Config {
	plan := ipam.DefaultPlanConfig()
	plan.SubnetID, plan.SecurityGroups = "subnet-a", []string{"sg-a"}
	return Config{InstanceID: "i-1", InstanceType: "t.test", Plan: plan, Limits: ipam.Limits{MaxENIs: 3, IPv4PerENI: 3},
		Cooldown: 30 * time.Second, AddWait: 10 * time.Second, DemandMemory: time.Minute, ReclaimAfter: 2 * time.Minute, DetachHold: 5 * time.Minute,
		ResyncInterval: time.Minute, AttachTimeout: 2 * time.Minute}
}

func primaryENI(blocks ...string) ENIInfo {
	e := ENIInfo{ID: "eni-p", DeviceIndex: 0, SubnetID: "subnet-a", SubnetCIDR: netip.MustParsePrefix("10.0.0.0/24"),
		PrimaryIP: netip.MustParseAddr("10.0.0.4"), AttachmentID: "att-p", DeleteOnTermination: true, CreatedAt: t0.Add(-time.Hour)}
	for _, b := range blocks {
		e.Blocks = append(e.Blocks, netip.MustParsePrefix(b))
	}
	return e
}

// drain acknowledges every write and returns the jobs and replies.
func drain(t *testing.T, n *Node, now time.Time) ([]Job, []Reply) {
	t.Helper()
	var jobs []Job
	var replies []Reply
	for range 10 {
		rd := n.Ready()
		jobs = append(jobs, rd.Jobs...)
		replies = append(replies, rd.Replies...)
		if rd.Persist == nil {
			return jobs, replies
		}
		n.Step(now, Persisted{Version: rd.Persist.Version})
	}
	t.Fatal("writes never settle")
	return nil, nil
}

func find(jobs []Job, f func(Job) bool) (Job, bool) {
	for _, j := range jobs {
		if f(j) {
			return j, true
		}
	}
	return Job{}, false
}

func isAttach(j Job) bool { return j.Kind == JobAction && j.Action.Kind == ipam.AttachENI }

// Issue 11, "demand vanishes at timeout": Adds that waited past AddWait
// still count as demand while kubelet retries, so the attachment started
// for them is not undone and started again.
func TestAddsThatTimedOutStillCountAsDemand(t *testing.T) {
	n, err := New(testConfig(), Boot{CheckpointMissing: true, ENIs: []ENIInfo{primaryENI("10.0.0.5/32", "10.0.0.6/32")}}, t0)
	if err != nil {
		t.Fatal(err)
	}
	drain(t, n, t0)
	for i := range 5 {
		n.Step(t0, AddRequest{ID: uint64(i + 1), Key: ipam.Key{Network: "n", ContainerID: string(rune('a' + i)), IfName: "eth0"}})
	}
	jobs, _ := drain(t, n, t0)
	attach, ok := find(jobs, isAttach)
	if !ok {
		t.Fatalf("no attach for 3 waiting Adds; jobs %v", jobs)
	}
	n.Step(t0, ActionResult{JobID: attach.ID, ENIID: "eni-new", AttachmentID: "att-new", DeleteOnTermination: true})
	later := t0.Add(15 * time.Second) // past AddWait: the waiting Adds fail
	n.Step(later, Tick{})
	jobs, replies := drain(t, n, later)
	failed := 0
	for _, r := range replies {
		if IsNoAddress(r.Err) {
			failed++
		}
	}
	if failed != 3 {
		t.Fatalf("%d Adds failed with a reason at their deadline, want 3", failed)
	}
	if v := n.View(later); v.Demand != 3 || v.Waiting != 0 {
		t.Fatalf("after the timeout: demand %d, waiting %d; want the 3 failed Adds still counted as demand", v.Demand, v.Waiting)
	}
	// The ENI attaches; with the demand remembered nothing is given back.
	info := ENIInfo{ID: "eni-new", DeviceIndex: 1, SubnetID: "subnet-a", SubnetCIDR: netip.MustParsePrefix("10.0.0.0/24"),
		PrimaryIP: netip.MustParseAddr("10.0.0.9"), AttachmentID: "att-new", DeleteOnTermination: true, CreatedAt: t0,
		Blocks: []netip.Prefix{netip.MustParsePrefix("10.0.0.10/32"), netip.MustParsePrefix("10.0.0.11/32")}}
	confirm, ok := find(jobs, func(j Job) bool { return j.Kind == JobConfirmAttach && j.ENIID == "eni-new" })
	if !ok {
		t.Fatalf("no confirm-attach job for the new ENI; jobs %v", jobs)
	}
	n.Step(later, AttachResult{JobID: confirm.ID, ENI: info})
	if v := n.View(later); v.Stats.Total != 4 {
		t.Fatalf("the attached ENI's addresses are not in the pool: %s", v.Stats)
	}
	if acts, _ := n.Plan(later); len(acts) > 0 && (acts[0].Kind == ipam.DetachENI || acts[0].Kind == ipam.ReleaseBlocks) {
		t.Fatalf("with remembered demand the planner shrinks: %v", acts)
	}
	gone := t0.Add(2 * time.Minute) // demand forgotten after DemandMemory
	n.Step(gone, Tick{})
	if v := n.View(gone); v.Demand != 0 {
		t.Fatalf("demand %d after DemandMemory; want it forgotten", v.Demand)
	}
}

// Issue 11, DeleteOnTermination: an attach that EC2 performed but the
// client saw fail leaves an ENI the next read of EC2 finds; it must be
// adopted and get DeleteOnTermination, retried until EC2 confirms.
func TestAnENIFoundAttachedWithoutDeleteOnTerminationGetsItUntilEC2Confirms(t *testing.T) {
	n, err := New(testConfig(), Boot{CheckpointMissing: true, ENIs: []ENIInfo{primaryENI("10.0.0.5/32", "10.0.0.6/32")}}, t0)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		n.Step(t0, AddRequest{ID: uint64(i + 1), Key: ipam.Key{Network: "n", ContainerID: string(rune('a' + i)), IfName: "eth0"}})
	}
	jobs, _ := drain(t, n, t0)
	attach, ok := find(jobs, isAttach)
	if !ok {
		t.Fatal("no attach")
	}
	n.Step(t0, ActionResult{JobID: attach.ID, Err: errors.New("InternalError: reported failed after the fact")})
	// The resync comes soon, not at the next periodic pass.
	soon := t0.Add(resyncSoon)
	n.Step(soon, Tick{})
	jobs, _ = drain(t, n, soon)
	resync, ok := find(jobs, func(j Job) bool { return j.Kind == JobResync })
	if !ok {
		t.Fatalf("no resync %s after an attach that reported failure; jobs %v", resyncSoon, jobs)
	}
	leaked := ENIInfo{ID: "eni-x", DeviceIndex: 1, SubnetID: "subnet-a", SubnetCIDR: netip.MustParsePrefix("10.0.0.0/24"),
		PrimaryIP: netip.MustParseAddr("10.0.0.9"), AttachmentID: "att-x", CreatedAt: t0,
		Blocks: []netip.Prefix{netip.MustParsePrefix("10.0.0.10/32")}}
	n.Step(soon, ResyncResult{JobID: resync.ID, ENIs: []ENIInfo{primaryENI("10.0.0.5/32", "10.0.0.6/32"), leaked}, Devices: []int{0, 1}})
	now := soon
	for try := range 4 {
		jobs, _ = drain(t, n, now)
		dot, ok := find(jobs, func(j Job) bool { return j.Kind == JobSetDeleteOnTermination && j.ENIID == "eni-x" })
		if !ok {
			now = now.Add(maxDOTRetry)
			n.Step(now, Tick{})
			jobs, _ = drain(t, n, now)
			if dot, ok = find(jobs, func(j Job) bool { return j.Kind == JobSetDeleteOnTermination && j.ENIID == "eni-x" }); !ok {
				t.Fatalf("try %d: DeleteOnTermination not asked again", try)
			}
		}
		if try < 3 {
			n.Step(now, DOTResult{JobID: dot.ID, Err: errors.New("RequestLimitExceeded")})
			continue
		}
		n.Step(now, DOTResult{JobID: dot.ID})
	}
	if v := n.View(now); len(v.PendingDOT) != 0 {
		t.Fatalf("ENIs still without DeleteOnTermination: %v", v.PendingDOT)
	}
}

// Issue 12: the kubelet's max pods arrives after start and lifts the cap
// the pool grew to.
func TestMaxPodsUpdateMovesTheCapOnGrowth(t *testing.T) {
	cfg := testConfig()
	cfg.Plan.MaxPods = 2
	n, err := New(cfg, Boot{CheckpointMissing: true, ENIs: []ENIInfo{primaryENI("10.0.0.5/32", "10.0.0.6/32")}}, t0)
	if err != nil {
		t.Fatal(err)
	}
	drain(t, n, t0)
	for i := range 3 {
		n.Step(t0, AddRequest{ID: uint64(i + 1), Key: ipam.Key{Network: "n", ContainerID: string(rune('a' + i)), IfName: "eth0"}})
	}
	jobs, _ := drain(t, n, t0)
	if j, ok := find(jobs, isAttach); ok {
		t.Fatalf("attach past max pods 2: %v", j)
	}
	if v := n.View(t0); v.Shortfall.Limit != ipam.MaxPodsLimit || v.Shortfall.Max != 2 {
		t.Fatalf("shortfall = %s, want max pods (2)", v.Shortfall)
	}
	n.Step(t0, MaxPodsUpdate{MaxPods: 0}) // ignored
	if jobs, _ := drain(t, n, t0); len(jobs) != 0 {
		t.Fatalf("max pods 0 changed the plan: %v", jobs)
	}
	n.Step(t0, MaxPodsUpdate{MaxPods: 110})
	jobs, _ = drain(t, n, t0)
	if _, ok := find(jobs, isAttach); !ok {
		t.Fatalf("no attach once max pods is 110; jobs %v", jobs)
	}
}
