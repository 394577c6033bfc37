package nodestate

import (
	"fmt"
	"testing"
	"time"

	"github.com/vpcnet/vpcnet/ipam"
)

// Issue 16, "start every attachment a burst needs as soon as the first
// ADD waits": pods the API server has bound to the node are Adds about to
// come, so the attachments they need start before the first of them
// arrives, and pods that already hold an address or wait are not counted
// twice.
func TestPodsBoundToTheNodeStartTheirAttachmentsBeforeTheirAdds(t *testing.T) {
	podN := func(i int) ipam.Pod { return ipam.Pod{Namespace: "default", Name: fmt.Sprint("p-", i)} }
	bound := func(k int) PodsScheduled {
		var ev PodsScheduled
		for i := range k {
			ev.Pods = append(ev.Pods, podN(i))
		}
		return ev
	}
	tests := []struct {
		name string
		// added pods get an address before the event; bound are the pods
		// the API server has on the node.
		added, bound int
		want         int
	}{
		// 2 pod addresses per ENI, the primary's 2 free: 9 more pods need
		// 5 ENIs, all the instance has left.
		{"a burst bound at once", 0, 11, 5},
		// The 2 that hold addresses are not coming, and took the free
		// ones (a warm ENI started): 6 more need 3 ENIs, and the warm
		// target one more.
		{"pods with addresses are not coming", 2, 8, 4},
		{"no pod bound: the free addresses meet the warm target", 0, 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := testConfig()
			cfg.Limits = ipam.Limits{MaxENIs: 6, IPv4PerENI: 3}
			n, err := New(cfg, Boot{CheckpointMissing: true, ENIs: []ENIInfo{primaryENI("10.0.0.5/32", "10.0.0.6/32")}}, t0)
			if err != nil {
				t.Fatal(err)
			}
			var jobs []Job
			js, _ := drain(t, n, t0)
			jobs = append(jobs, js...)
			for i := range tt.added {
				n.Step(t0, AddRequest{ID: uint64(i + 1), Key: ipam.Key{Network: "n", ContainerID: fmt.Sprint(i), IfName: "eth0"}, Pod: podN(i)})
				js, _ := drain(t, n, t0)
				jobs = append(jobs, js...)
			}
			n.Step(t0, bound(tt.bound))
			js, _ = drain(t, n, t0)
			jobs = append(jobs, js...)
			attaches := 0
			for _, j := range jobs {
				if isAttach(j) {
					attaches++
				}
			}
			if attaches != tt.want {
				t.Fatalf("%d attachments started; want %d", attaches, tt.want)
			}
		})
	}
}

// With the API server's word on the bound pods, Adds arriving at a
// burst's rate add no guess of their own: the bound pods are the burst.
func TestBoundPodsReplaceTheArrivalRateGuess(t *testing.T) {
	cfg := testConfig()
	cfg.Limits = ipam.Limits{MaxENIs: 6, IPv4PerENI: 3}
	n, err := New(cfg, Boot{CheckpointMissing: true, ENIs: []ENIInfo{primaryENI("10.0.0.5/32", "10.0.0.6/32")}}, t0)
	if err != nil {
		t.Fatal(err)
	}
	drain(t, n, t0)
	var ev PodsScheduled
	for i := range 5 {
		ev.Pods = append(ev.Pods, ipam.Pod{Namespace: "default", Name: fmt.Sprint("p-", i)})
	}
	n.Step(t0, ev)
	jobs, _ := drain(t, n, t0)
	before := 0
	for _, j := range jobs {
		if isAttach(j) {
			before++
		}
	}
	// 5 pods, 2 free: 3 more need 2 ENIs, and the warm target one.
	if before != 3 {
		t.Fatalf("%d attachments for 5 bound pods; want 3", before)
	}
	after := 0
	for i, p := range ev.Pods {
		now := t0.Add(time.Duration(i) * 100 * time.Millisecond)
		n.Step(now, AddRequest{ID: uint64(i + 1), Key: ipam.Key{Network: "n", ContainerID: fmt.Sprint(i), IfName: "eth0"}, Pod: p})
		js, _ := drain(t, n, now)
		for _, j := range js {
			if isAttach(j) {
				after++
			}
		}
	}
	if after != 0 {
		t.Fatalf("%d more attachments as the bound pods' Adds came at a burst's rate; want none", after)
	}
}
