package nodestate

import (
	"slices"
	"testing"

	"github.com/vpcnet/vpcnet/ipam"
)

// Issue 15: a cluster-wide EC2 budget grants pods' work first, so the
// machine says which jobs pods wait for. A warm ENI started before any
// pod came becomes urgent once pods need it; the ENI a plan adds only
// for the warm target is not.
func TestTheJobsPodsWaitForAreUrgentAndWarmPoolWorkIsNot(t *testing.T) {
	cfg := testConfig()
	cfg.Limits.MaxENIs = 4 // room for the pods' two ENIs and a warm one
	n, err := New(cfg, Boot{CheckpointMissing: true, ENIs: []ENIInfo{primaryENI("10.0.0.5/32", "10.0.0.6/32")}}, t0)
	if err != nil {
		t.Fatal(err)
	}
	drain(t, n, t0)
	add := func(i int) {
		n.Step(t0, AddRequest{ID: uint64(i + 1), Key: ipam.Key{Network: "n", ContainerID: string(rune('a' + i)), IfName: "eth0"}})
	}
	// Two pods take the primary's addresses: the warm target wants an
	// ENI, and no pod waits for it.
	add(0)
	add(1)
	jobs, replies := drain(t, n, t0)
	warm, ok := find(jobs, isAttach)
	if !ok || len(replies) != 2 {
		t.Fatalf("after two pods on the primary: jobs %v, %d replies; want a warm ENI and both pods served", jobs, len(replies))
	}
	if u := n.Summary(t0).Urgent; len(u) != 0 {
		t.Fatalf("urgent jobs %v with no pod waiting; want none", u)
	}
	// Three more wait, and need two secondary ENIs (two addresses
	// each): the warm one and one more; a third is for the warm target.
	for i := 2; i < 5; i++ {
		add(i)
	}
	jobs, _ = drain(t, n, t0)
	var attaches []uint64
	for _, j := range jobs {
		if isAttach(j) {
			attaches = append(attaches, j.ID)
		}
	}
	if len(attaches) != 2 {
		t.Fatalf("%d more attaches for three waiting pods beside the warm one; want 2 (one for the pods, one for the warm target)", len(attaches))
	}
	urgent := n.Summary(t0).Urgent
	if want := []uint64{warm.ID, attaches[0]}; !slices.Equal(urgent, want) {
		t.Fatalf("urgent jobs %v; want %v: the first warm ENI, which pods now need, and the next; not %d, which only refills the warm pool", urgent, want, attaches[1])
	}
}

// The IMDS-watching jobs make no EC2 call themselves: when IMDS shows a
// change, EC2 is read in a job of its own, whose calls a budget grants.
func TestEC2IsAskedInAJobOfItsOwnOnceIMDSShowsAChange(t *testing.T) {
	n, err := New(testConfig(), Boot{CheckpointMissing: true, ENIs: []ENIInfo{primaryENI("10.0.0.5/32", "10.0.0.6/32")}}, t0)
	if err != nil {
		t.Fatal(err)
	}
	drain(t, n, t0)
	for i := range 3 {
		n.Step(t0, AddRequest{ID: uint64(i + 1), Key: ipam.Key{Network: "n", ContainerID: string(rune('a' + i)), IfName: "eth0"}})
	}
	jobs, _ := drain(t, n, t0)
	attach, _ := find(jobs, isAttach)
	n.Step(t0, ActionResult{JobID: attach.ID, ENIID: "eni-new", MAC: "0a:00:00:00:00:01", AttachmentID: "att-new", DeleteOnTermination: true})
	drain(t, n, t0)
	now := n.Ready().Wake
	n.Step(now, Tick{})
	jobs, _ = drain(t, n, now)
	watch, ok := find(jobs, func(j Job) bool { return j.Kind == JobConfirmAttach })
	if !ok || watch.MAC == "" || len(watch.Calls()) != 0 {
		t.Fatalf("first look at the attachment %+v; want IMDS only, no EC2 call", watch)
	}
	n.Step(now, AttachResult{JobID: watch.ID, NotYet: true, IMDSOnly: true, Shown: true})
	jobs, _ = drain(t, n, now)
	ask, ok := find(jobs, func(j Job) bool { return j.Kind == JobConfirmAttach })
	if !ok || ask.MAC != "" || !slices.Equal(ask.Calls(), []string{"DescribeNetworkInterfaces"}) {
		t.Fatalf("after IMDS showed the interface: %+v, ok %v; want at once a confirm that asks EC2", ask, ok)
	}

	// A resync that finds IMDS changed hands the EC2 read on likewise.
	n.cloud.imdsDigest, n.cloud.ec2ReadAt = "d1", now
	n.cloud.startResync()
	jobs, _ = drain(t, n, now)
	rs, ok := find(jobs, func(j Job) bool { return j.Kind == JobResync })
	if !ok || rs.IMDSDigest != "d1" || len(rs.Calls()) != 0 {
		t.Fatalf("resync %+v; want one that reads IMDS only", rs)
	}
	n.Step(now, ResyncResult{JobID: rs.ID, IMDSDigest: "d2", Changed: true})
	jobs, _ = drain(t, n, now)
	rs, ok = find(jobs, func(j Job) bool { return j.Kind == JobResync })
	if !ok || rs.IMDSDigest != "" || !slices.Equal(rs.Calls(), []string{"DescribeNetworkInterfaces"}) {
		t.Fatalf("after IMDS changed: %+v, ok %v; want a resync that reads EC2", rs, ok)
	}
}
