package nodestate

import (
	"errors"
	"net/netip"
	"testing"
	"time"

	"github.com/vpcnet/vpcnet/ipam"
)

// Issue 24: on a cordoned node with AWS_MANAGE_ENIS_NON_SCHEDULABLE=false
// (aws-node's default) the pool neither grows nor detaches ENIs; a pod
// left without an address is told why; lifting the hold lets the pool
// follow its targets again.
func TestACordonHoldStopsGrowthAndDetaches(t *testing.T) {
	cfg := testConfig() // DetachHold: no detach at boot, before the cordon is heard
	spare := ENIInfo{ID: "eni-s", DeviceIndex: 1, SubnetID: "subnet-a", SubnetCIDR: netip.MustParsePrefix("10.0.0.0/24"),
		PrimaryIP: netip.MustParseAddr("10.0.0.7"), AttachmentID: "att-s", DeleteOnTermination: true, CreatedAt: t0.Add(-time.Hour),
		Blocks: []netip.Prefix{netip.MustParsePrefix("10.0.0.8/32"), netip.MustParsePrefix("10.0.0.9/32")}}
	n, err := New(cfg, Boot{CheckpointMissing: true, ENIs: []ENIInfo{primaryENI("10.0.0.5/32", "10.0.0.6/32"), spare}, Devices: []int{0, 1}}, t0)
	if err != nil {
		t.Fatal(err)
	}
	n.Step(t0, CordonUpdate{Hold: true})
	n.Step(t0, HostResult{Routed: nil})
	kinds := func(jobs []Job) map[ipam.ActionKind]int {
		k := map[ipam.ActionKind]int{}
		for _, j := range jobs {
			if j.Kind == JobAction {
				k[j.Action.Kind]++
			}
		}
		return k
	}
	// Idle, the spare ENI is surplus: held, not detached.
	now := t0.Add(time.Hour)
	n.Step(now, Tick{})
	jobs, _ := drain(t, n, now)
	if k := kinds(jobs); k[ipam.DetachENI] != 0 {
		t.Fatalf("ENI detached on a cordoned node: %v", jobs)
	}
	// Five pods for four addresses: the fifth gets none, and no growth.
	var replies []Reply
	for i := range 5 {
		n.Step(now, AddRequest{ID: uint64(i + 1), Key: podKey(i), Pod: ipam.Pod{Namespace: "default", Name: "p" + string(rune('0'+i))}})
		_, r := drain(t, n, now)
		replies = append(replies, r...)
	}
	later := now.Add(cfg.AddWait + time.Second)
	n.Step(later, Tick{})
	jobs, r := drain(t, n, later)
	replies = append(replies, r...)
	if k := kinds(jobs); k[ipam.AttachENI]+k[ipam.AssignBlocks] != 0 {
		t.Fatalf("the pool grew on a cordoned node: %v", jobs)
	}
	var noAddr *NoAddressError
	for _, r := range replies {
		if r.Err != nil && errors.As(r.Err, &noAddr) {
			break
		}
	}
	if noAddr == nil || noAddr.Reason != ReasonCordoned {
		t.Fatalf("replies %+v; want one pod told %s", replies, ReasonCordoned)
	}
	// Uncordoned, the waiting demand is met again.
	n.Step(later, CordonUpdate{Hold: false})
	n.Step(later, AddRequest{ID: 9, Key: podKey(9), Pod: ipam.Pod{Namespace: "default", Name: "p9"}})
	jobs, _ = drain(t, n, later)
	if k := kinds(jobs); k[ipam.AttachENI]+k[ipam.AssignBlocks] == 0 {
		t.Fatalf("no growth once uncordoned; jobs %v", jobs)
	}
}
