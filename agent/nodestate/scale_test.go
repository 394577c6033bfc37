package nodestate

import (
	"net/netip"
	"testing"
	"time"

	"github.com/vpcnet/vpcnet/ipam"
)

// Issue 15: an attachment is watched in IMDS, which costs none of the
// account's EC2 budget, and EC2 is asked once IMDS shows it; an IMDS that
// never shows it is given up on for EC2 polls with doubling gaps.
func TestAttachmentWatchedInIMDSThenConfirmedOnce(t *testing.T) {
	n, err := New(testConfig(), Boot{CheckpointMissing: true, ENIs: []ENIInfo{primaryENI("10.0.0.5/32", "10.0.0.6/32")}}, t0)
	if err != nil {
		t.Fatal(err)
	}
	drain(t, n, t0)
	for i := range 3 {
		n.Step(t0, AddRequest{ID: uint64(i + 1), Key: ipam.Key{Network: "n", ContainerID: string(rune('a' + i)), IfName: "eth0"}})
	}
	jobs, _ := drain(t, n, t0)
	attach, ok := find(jobs, isAttach)
	if !ok {
		t.Fatalf("no attach for waiting Adds; jobs %v", jobs)
	}
	n.Step(t0, ActionResult{JobID: attach.ID, ENIID: "eni-new", MAC: "0a:00:00:00:00:01", AttachmentID: "att-new", DeleteOnTermination: true})
	drain(t, n, t0)
	now := t0
	var confirm Job
	next := func() Job {
		t.Helper()
		wake := n.Ready().Wake
		if wake.IsZero() {
			t.Fatal("no wake-up while an attachment is under way")
		}
		now = wake
		n.Step(now, Tick{})
		jobs, _ := drain(t, n, now)
		j, ok := find(jobs, func(j Job) bool { return j.Kind == JobConfirmAttach })
		if !ok {
			t.Fatalf("at %s: no confirm job; jobs %v", now.Sub(t0), jobs)
		}
		return j
	}
	// IMDS does not show it yet: looked at again every 500 ms, still in
	// IMDS only.
	for range 4 {
		confirm = next()
		if confirm.MAC != "0a:00:00:00:00:01" {
			t.Fatalf("at %s: confirm without the MAC asks EC2 before IMDS shows the ENI", now.Sub(t0))
		}
		if gap := now.Sub(t0); gap%imdsAttachPoll != 0 {
			t.Fatalf("confirm at %s, not on IMDS's 500 ms pace", gap)
		}
		n.Step(now, AttachResult{JobID: confirm.ID, NotYet: true, IMDSOnly: true})
	}
	// IMDS shows it; EC2's one answer adopts it.
	confirm = next()
	eni := ENIInfo{ID: "eni-new", DeviceIndex: 1, SubnetID: "subnet-a", SubnetCIDR: netip.MustParsePrefix("10.0.0.0/24"),
		PrimaryIP: netip.MustParseAddr("10.0.0.7"), AttachmentID: "att-new", DeleteOnTermination: true, CreatedAt: t0,
		Blocks: []netip.Prefix{netip.MustParsePrefix("10.0.0.8/32"), netip.MustParsePrefix("10.0.0.9/32")}}
	n.Step(now, AttachResult{JobID: confirm.ID, ENI: eni})
	if _, ok := n.pool.ENI("eni-new"); !ok {
		t.Fatal("ENI confirmed by EC2 not in the pool")
	}
}

func TestAttachmentIMDSNotTrustedForever(t *testing.T) {
	at := &attaching{since: t0, poll: firstAttachPoll, mac: "0a:00:00:00:00:01"}
	if got := at.firstPoll(); got != imdsAttachPoll {
		t.Fatalf("first look after %s; want IMDS's %s", got, imdsAttachPoll)
	}
	n, err := New(testConfig(), Boot{CheckpointMissing: true, ENIs: []ENIInfo{primaryENI("10.0.0.5/32", "10.0.0.6/32")}}, t0)
	if err != nil {
		t.Fatal(err)
	}
	drain(t, n, t0)
	n.cloud.attaching["eni-new"] = at
	j := n.jobs.start(Job{Kind: JobConfirmAttach, ENIID: "eni-new", MAC: at.mac, Device: 1})
	late := t0.Add(imdsAttachWatch)
	n.Step(late, AttachResult{JobID: j.ID, NotYet: true, IMDSOnly: true})
	drain(t, n, late)
	var sched []scheduled
	for _, s := range n.jobs.later {
		if s.job.Kind == JobConfirmAttach {
			sched = append(sched, s)
		}
	}
	if len(sched) != 1 {
		t.Fatalf("%d confirms scheduled; want 1", len(sched))
	}
	if sched[0].job.MAC != "" {
		t.Error("IMDS still trusted after it failed to show the ENI for the whole watch")
	}
	if gap := sched[0].at.Sub(late); gap <= imdsAttachPoll {
		t.Errorf("EC2 asked again after %s; want a backed-off gap", gap)
	}
}

// Issue 15: bursts of pods a minute apart must not make the pool detach
// an ENI and create a new one for the next burst; an ENI the pool has not
// needed for testConfig().DetachHold is detached.
func TestIdleENIHeldBetweenBursts(t *testing.T) {
	cfg := testConfig()
	spare := ENIInfo{ID: "eni-s", DeviceIndex: 1, SubnetID: "subnet-a", SubnetCIDR: netip.MustParsePrefix("10.0.0.0/24"),
		PrimaryIP: netip.MustParseAddr("10.0.0.7"), AttachmentID: "att-s", DeleteOnTermination: true, CreatedAt: t0.Add(-time.Hour),
		Blocks: []netip.Prefix{netip.MustParsePrefix("10.0.0.8/32"), netip.MustParsePrefix("10.0.0.9/32")}}
	n, err := New(cfg, Boot{CheckpointMissing: true, ENIs: []ENIInfo{primaryENI("10.0.0.5/32", "10.0.0.6/32"), spare}, Devices: []int{0, 1}}, t0)
	if err != nil {
		t.Fatal(err)
	}
	n.Step(t0, HostResult{Routed: nil})
	detaches := func(now time.Time) int {
		n.Step(now, Tick{})
		jobs, _ := drain(t, n, now)
		k := 0
		for _, j := range jobs {
			if j.Kind == JobAction && j.Action.Kind == ipam.DetachENI {
				k++
			}
		}
		return k
	}
	for _, d := range []time.Duration{0, time.Minute, 4 * time.Minute, testConfig().DetachHold - time.Second} {
		if k := detaches(t0.Add(d)); k != 0 {
			t.Fatalf("ENI detached %s after the pool stopped needing it; want it held for %s", d, testConfig().DetachHold)
		}
	}
	if k := detaches(t0.Add(testConfig().DetachHold)); k != 1 {
		t.Fatalf("%d detaches once the ENI was idle for %s; want 1", k, testConfig().DetachHold)
	}
}

// Issue 15: the periodic resync reads EC2 only when IMDS shows a change
// since the last EC2 read, or every ec2ResyncEvery intervals, or when an
// action's outcome is unknown.
func TestResyncReadsEC2OnlyWhenIMDSChanged(t *testing.T) {
	cfg := testConfig()
	n, err := New(cfg, Boot{CheckpointMissing: true, ENIs: []ENIInfo{primaryENI("10.0.0.5/32", "10.0.0.6/32")}}, t0)
	if err != nil {
		t.Fatal(err)
	}
	drain(t, n, t0)
	resync := func(now time.Time) Job {
		t.Helper()
		n.Step(now, Tick{})
		jobs, _ := drain(t, n, now)
		j, ok := find(jobs, func(j Job) bool { return j.Kind == JobResync })
		if !ok {
			t.Fatalf("at %s: no resync; jobs %v", now.Sub(t0), jobs)
		}
		return j
	}
	now := t0.Add(cfg.ResyncInterval)
	j := resync(now)
	if j.IMDSDigest != "" {
		t.Fatal("first resync skips EC2 without a digest from an EC2 read")
	}
	n.Step(now, ResyncResult{JobID: j.ID, ENIs: []ENIInfo{primaryENI("10.0.0.5/32", "10.0.0.6/32")}, IMDSDigest: "d1"})
	for i := 2; i <= ec2ResyncEvery; i++ {
		now = t0.Add(time.Duration(i) * cfg.ResyncInterval)
		j = resync(now)
		if j.IMDSDigest != "d1" {
			t.Fatalf("resync %d: digest %q; want EC2 skipped while IMDS shows d1", i, j.IMDSDigest)
		}
		n.Step(now, ResyncResult{JobID: j.ID, IMDSDigest: "d1", Unchanged: true})
	}
	now = t0.Add(time.Duration(ec2ResyncEvery+1) * cfg.ResyncInterval)
	if j = resync(now); j.IMDSDigest != "" {
		t.Fatalf("EC2 not read after %d intervals", ec2ResyncEvery)
	}
	n.Step(now, ResyncResult{JobID: j.ID, ENIs: []ENIInfo{primaryENI("10.0.0.5/32", "10.0.0.6/32")}, IMDSDigest: "d2"})
	// An attach that failed may have happened: EC2 is read, whatever
	// IMDS shows.
	n.cloud.resyncSoonFromEC2(now)
	now = now.Add(resyncSoon)
	if j = resync(now); j.IMDSDigest != "" {
		t.Fatal("resync after an unknown outcome skipped EC2")
	}
}
