package nodestate

import (
	"net/netip"
	"testing"
	"time"

	"github.com/vpcnet/vpcnet/checkpoint"
	"github.com/vpcnet/vpcnet/ipam"
)

// TestARestartGivesNothingBackBeforeItHearsTheBoundPods: a node restarted
// with a warm ENI the previous run kept for pods the API server had bound
// (their Adds not yet come) does not detach it at boot, before the
// Kubernetes layer has told the new run about those pods; once it has,
// the ENI stays. Found by make simtest (seeds 4415, 4634, 8184, 9018: I3)
// once release times were kept and nothing cooled after a restart any
// more, which had held shrinking for a cooldown.
func TestARestartGivesNothingBackBeforeItHearsTheBoundPods(t *testing.T) {
	cfg := testConfig()
	cfg.DetachHold = 0 // the hold after a detach is first wanted is not what is tested
	second := ENIInfo{ID: "eni-s", DeviceIndex: 1, SubnetID: "subnet-a", SubnetCIDR: netip.MustParsePrefix("10.0.0.0/24"),
		PrimaryIP: netip.MustParseAddr("10.0.0.20"), AttachmentID: "att-s", DeleteOnTermination: true, CreatedAt: t0.Add(-time.Hour),
		Blocks: []netip.Prefix{netip.MustParsePrefix("10.0.0.21/32"), netip.MustParsePrefix("10.0.0.22/32"), netip.MustParsePrefix("10.0.0.23/32")}}
	third := second
	third.ID, third.DeviceIndex, third.AttachmentID, third.PrimaryIP = "eni-t", 2, "att-t", netip.MustParseAddr("10.0.0.30")
	third.Blocks = []netip.Prefix{netip.MustParsePrefix("10.0.0.31/32"), netip.MustParsePrefix("10.0.0.32/32"), netip.MustParsePrefix("10.0.0.33/32")}
	primary := primaryENI("10.0.0.5/32", "10.0.0.6/32", "10.0.0.7/32")
	pod := ipam.Pod{Namespace: "default", Name: "p0"}
	ck := checkpoint.State{ReleasesKnown: true, Entries: []checkpoint.Entry{{Key: podKey(0), Addr: netip.MustParseAddr("10.0.0.5"), Pod: pod, AssignedAt: t0.Add(-time.Hour)}}}
	now := t0.Add(2 * time.Hour)
	n, err := New(cfg, Boot{Checkpoint: ck, ENIs: []ENIInfo{primary, second, third}, Routed: []Route{{Addr: netip.MustParseAddr("10.0.0.5")}}}, now)
	if err != nil {
		t.Fatal(err)
	}
	detaches := func(jobs []Job) int {
		k := 0
		for _, j := range jobs {
			if j.Action.Kind == ipam.DetachENI || j.Action.Kind == ipam.ReleaseBlocks {
				k++
			}
		}
		return k
	}
	jobs, _ := drain(t, n, now)
	if k := detaches(jobs); k != 0 {
		t.Fatalf("%d releases or detaches at boot, before the bound pods were heard: %+v", k, jobs)
	}
	// The API server says which pods are bound: p0 and eight on their way.
	bound := []ipam.Pod{pod}
	for _, name := range []string{"p1", "p2", "p3", "p4", "p5", "p6", "p7", "p8"} {
		bound = append(bound, ipam.Pod{Namespace: "default", Name: name})
	}
	later := now.Add(time.Second)
	n.Step(later, PodsScheduled{Pods: bound})
	jobs, _ = drain(t, n, later)
	for _, at := range []time.Duration{cfg.Cooldown, 2 * cfg.Cooldown} {
		n.Step(now.Add(at), Tick{})
		more, _ := drain(t, n, now.Add(at))
		jobs = append(jobs, more...)
	}
	if k := detaches(jobs); k != 0 {
		t.Errorf("the ENI eight bound pods are about to use was given back (%d jobs): %+v", k, jobs)
	}
}

// TestARestartFromACheckpointWithoutReleaseTimesDoesNotGrowThePool: a
// checkpoint that does not say when its addresses were freed (aws-node's
// ipam.json, or one written before release times were kept) makes every
// free address cool after the restart; those are still the pool's
// addresses, and counting them as missing would attach an ENI at every
// restart (I3). Kept for make mutants' restart-grows-pool, which the
// simulation, whose checkpoints now carry release times, no longer
// reaches.
func TestARestartFromACheckpointWithoutReleaseTimesDoesNotGrowThePool(t *testing.T) {
	cfg := testConfig()
	second := ENIInfo{ID: "eni-s", DeviceIndex: 1, SubnetID: "subnet-a", SubnetCIDR: netip.MustParsePrefix("10.0.0.0/24"),
		PrimaryIP: netip.MustParseAddr("10.0.0.20"), AttachmentID: "att-s", DeleteOnTermination: true, CreatedAt: t0.Add(-time.Hour),
		Blocks: []netip.Prefix{netip.MustParsePrefix("10.0.0.21/32"), netip.MustParsePrefix("10.0.0.22/32"), netip.MustParsePrefix("10.0.0.23/32")}}
	primary := primaryENI("10.0.0.5/32", "10.0.0.6/32", "10.0.0.7/32")
	ck := checkpoint.State{Entries: []checkpoint.Entry{{Key: podKey(0), Addr: netip.MustParseAddr("10.0.0.5"),
		Pod: ipam.Pod{Namespace: "default", Name: "p0"}, AssignedAt: t0.Add(-time.Hour)}}}
	now := t0.Add(2 * time.Hour)
	n, err := New(cfg, Boot{Checkpoint: ck, ENIs: []ENIInfo{primary, second}, Routed: []Route{{Addr: netip.MustParseAddr("10.0.0.5")}}}, now)
	if err != nil {
		t.Fatal(err)
	}
	if st := n.View(now).Stats; st.Cooling == 0 {
		t.Fatalf("nothing cools after a restart from a checkpoint without release times: %+v", st)
	}
	jobs, _ := drain(t, n, now)
	for _, j := range jobs {
		if j.Kind == JobAction && (j.Action.Kind == ipam.AttachENI || j.Action.Kind == ipam.AssignBlocks) {
			t.Errorf("a restart with no pod change grows the pool: %s", j.Action)
		}
	}
}
