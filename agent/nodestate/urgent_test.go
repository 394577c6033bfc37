package nodestate

import (
	"net/netip"
	"slices"
	"testing"
	"time"

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
	n.Step(now, AttachResult{JobID: watch.ID, NotYet: true, IMDSOnly: true, AskEC2: true})
	jobs, _ = drain(t, n, now)
	ask, ok := find(jobs, func(j Job) bool { return j.Kind == JobConfirmAttach })
	if !ok || ask.MAC != "" || !slices.Equal(ask.Calls(), []string{"DescribeNetworkInterfaces", "DescribeSubnets"}) {
		t.Fatalf("after IMDS showed the interface: %+v, ok %v; want at once a confirm that asks EC2", ask, ok)
	}

	// A resync that finds IMDS changed hands the EC2 read on likewise.
	n.cloud.imdsDigest, n.cloud.ec2ReadAt = "d1", now
	n.startResync()
	jobs, _ = drain(t, n, now)
	rs, ok := find(jobs, func(j Job) bool { return j.Kind == JobResync })
	if !ok || rs.IMDSDigest != "d1" || len(rs.Calls()) != 0 {
		t.Fatalf("resync %+v; want one that reads IMDS only", rs)
	}
	n.Step(now, ResyncResult{JobID: rs.ID, IMDSDigest: "d2", Changed: true})
	jobs, _ = drain(t, n, now)
	rs, ok = find(jobs, func(j Job) bool { return j.Kind == JobResync })
	if !ok || rs.IMDSDigest != "" || !slices.Equal(rs.Calls(), []string{"DescribeNetworkInterfaces", "DescribeSubnets"}) {
		t.Fatalf("after IMDS changed: %+v, ok %v; want a resync that reads EC2", rs, ok)
	}
}

// Issue 15's subnet-pressure mode: on a nearly full subnet the pool
// keeps no warm ENI, detaching a free one at once (no detach hold), and
// asks for none; when the pressure is over the warm target is back.
func TestUnderSubnetPressureThePoolGivesBackWhatPodsDoNotUse(t *testing.T) {
	cfg := testConfig()
	cfg.Plan.ENIGracePeriod = 0
	warmENI := ENIInfo{ID: "eni-warm", DeviceIndex: 1, SubnetID: "subnet-a", SubnetCIDR: netip.MustParsePrefix("10.0.0.0/24"),
		PrimaryIP: netip.MustParseAddr("10.0.0.7"), AttachmentID: "att-warm", DeleteOnTermination: true, CreatedAt: t0.Add(-time.Hour),
		Blocks: []netip.Prefix{netip.MustParsePrefix("10.0.0.8/32"), netip.MustParsePrefix("10.0.0.9/32")}}
	n, err := New(cfg, Boot{CheckpointMissing: true, ENIs: []ENIInfo{primaryENI("10.0.0.5/32", "10.0.0.6/32"), warmENI}}, t0)
	if err != nil {
		t.Fatal(err)
	}
	// One pod on the primary: the warm ENI is what WARM_ENI_TARGET=1
	// keeps, and nothing is detached.
	for i := range 1 {
		n.Step(t0, AddRequest{ID: uint64(i + 1), Key: ipam.Key{Network: "n", ContainerID: string(rune('a' + i)), IfName: "eth0"}})
	}
	jobs, replies := drain(t, n, t0)
	if _, ok := find(jobs, func(j Job) bool { return j.Kind == JobAction }); ok || len(replies) != 1 {
		t.Fatalf("jobs %v, %d replies for a pool at its warm target; want no EC2 change and the pod served", jobs, len(replies))
	}
	// The host routes the pod: nothing is in doubt, so the pool may
	// shrink.
	var routed []Route
	for _, r := range replies {
		routed = append(routed, Route{Addr: r.Assignment.Addr, Link: "veth"})
	}
	n.Step(t0, HostResult{Routed: routed})
	if jobs, _ := drain(t, n, t0); len(jobs) != 0 {
		t.Fatalf("jobs %v once the host is known; want none", jobs)
	}
	if got := n.Summary(t0).Subnets; !slices.Equal(got, []string{"subnet-a"}) {
		t.Fatalf("pool subnets %v; want [subnet-a]", got)
	}
	now := t0.Add(time.Second)
	n.Step(now, SubnetPressure{Subnets: []string{"subnet-a"}})
	jobs, _ = drain(t, n, now)
	detach, ok := find(jobs, func(j Job) bool { return j.Kind == JobAction && j.Action.Kind == ipam.DetachENI })
	if !ok || detach.Action.ENIID != "eni-warm" {
		t.Fatalf("under pressure: jobs %v; want the free warm ENI detached at once", jobs)
	}
	if _, ok := find(jobs, isAttach); ok {
		t.Fatalf("under pressure the pool asked for an ENI no pod waits for: %v", jobs)
	}
	n.Step(now, ActionResult{JobID: detach.ID})
	drain(t, n, now)
	// Pressure over: the warm target wants its ENI again.
	n.Step(now, SubnetPressure{})
	jobs, _ = drain(t, n, now)
	if _, ok := find(jobs, isAttach); !ok {
		t.Fatalf("after the pressure: jobs %v; want the warm ENI back", jobs)
	}
}

// A node whose pool is empty is not Ready, so no pod can ask yet: its
// first fill is what the first pod waits for, and urgent. Before, it was
// warm-pool work, and a budget controller that had just begun its term
// deferred it ten seconds on every node of a new cluster.
func TestAnEmptyPoolsFirstFillIsUrgentThoughNoPodWaits(t *testing.T) {
	n, err := New(testConfig(), Boot{CheckpointMissing: true, ENIs: []ENIInfo{primaryENI()}}, t0)
	if err != nil {
		t.Fatal(err)
	}
	jobs, _ := drain(t, n, t0)
	fill, ok := find(jobs, isAssign)
	if !ok {
		t.Fatalf("jobs %v on an empty pool; want addresses assigned to the primary ENI", jobs)
	}
	if u := n.Summary(t0).Urgent; !slices.Contains(u, fill.ID) {
		t.Fatalf("urgent jobs %v; want the first fill %d", u, fill.ID)
	}
	// Filled, the pool's next warm-pool work waits behind pods again.
	n.Step(t0, ActionResult{JobID: fill.ID, Blocks: []netip.Prefix{netip.MustParsePrefix("10.0.0.5/32"), netip.MustParsePrefix("10.0.0.6/32")}})
	drain(t, n, t0)
	if u := n.Summary(t0).Urgent; len(u) != 0 {
		t.Fatalf("urgent jobs %v once the pool holds addresses and no pod waits; want none", u)
	}
}

// The summary says since when the longest-waiting Add has waited, and
// nothing when none waits: a budget controller that takes over books
// the requests held through its takeover by it.
func TestTheSummarySaysSinceWhenTheLongestWaitingAddWaits(t *testing.T) {
	n, err := New(testConfig(), Boot{CheckpointMissing: true, ENIs: []ENIInfo{primaryENI("10.0.0.5/32", "10.0.0.6/32")}}, t0)
	if err != nil {
		t.Fatal(err)
	}
	drain(t, n, t0)
	add := func(i int, at time.Time) {
		n.Step(at, AddRequest{ID: uint64(i + 1), Key: ipam.Key{Network: "n", ContainerID: string(rune('a' + i)), IfName: "eth0"}})
		drain(t, n, at)
	}
	add(0, t0)
	add(1, t0) // the primary's two addresses are taken
	if s := n.Summary(t0).WaitingSince; !s.IsZero() {
		t.Fatalf("waiting since %v with every Add served; want none", s)
	}
	add(2, t0.Add(time.Second))
	add(3, t0.Add(3*time.Second))
	if s := n.Summary(t0.Add(4 * time.Second)).WaitingSince; !s.Equal(t0.Add(time.Second)) {
		t.Errorf("waiting since %v; want the first waiting Add's arrival, 1s", s.Sub(t0))
	}
}
