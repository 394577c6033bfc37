package nodestate

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/vpcnet/vpcnet/ipam"
)

// m5.4xlarge: 8 ENIs of 30 addresses, 29 for pods each; EKS's max pods
// 234.
func m54xlarge() Config {
	cfg := testConfig()
	cfg.InstanceType = "m5.4xlarge"
	cfg.Limits = ipam.Limits{MaxENIs: 8, IPv4PerENI: 30}
	cfg.Plan.MaxPods = 234
	return cfg
}

// primaryWith is the primary ENI with k secondary addresses.
func primaryWith(k int) ENIInfo {
	var blocks []string
	for i := range k {
		blocks = append(blocks, fmt.Sprintf("10.0.0.%d/32", 10+i))
	}
	return primaryENI(blocks...)
}

// Issue 25, "burst anticipation overshoots without the Kubernetes layer":
// on the local cloud with no API server, 40 pods started 5 ms apart on an
// m5.4xlarge made the agent attach 7 ENIs where 2 were needed (232
// addresses held for 40 pods), logging "936 Add requests waiting" when
// at most 40 existed. The guess from the Adds' arrival rate is bounded
// by the pods that can exist, and reported as a guess.
func TestABurstWithoutTheAPIServerAttachesOnlyTheENIsItsPodsCanUse(t *testing.T) {
	n, err := New(m54xlarge(), Boot{CheckpointMissing: true, ENIs: []ENIInfo{primaryWith(29)}}, t0)
	if err != nil {
		t.Fatal(err)
	}
	jobs, _ := drain(t, n, t0)
	var reasons []string
	for i := range 40 {
		now := t0.Add(time.Duration(i) * 5 * time.Millisecond)
		n.Step(now, AddRequest{ID: uint64(i + 1), Key: podKey(i), Pod: ipam.Pod{Namespace: "default", Name: fmt.Sprint("web-", i)}})
		js, _ := drain(t, n, now)
		jobs = append(jobs, js...)
	}
	attaches := 0
	for _, j := range jobs {
		if isAttach(j) {
			attaches++
			reasons = append(reasons, j.Action.Reason)
		}
	}
	// 29 pods fit on the primary; 11 wait. One ENI holds them, and the
	// warm target (WARM_ENI_TARGET=1) asks for one more.
	if attaches > 2 {
		t.Fatalf("%d ENIs attached for a burst of 40 pods on an m5.4xlarge; want at most 2 (the waiting pods' and the warm one). Reasons:\n%s", attaches, strings.Join(reasons, "\n"))
	}
	for _, r := range reasons {
		var waiting int
		if i := strings.Index(r, " Add requests waiting"); i >= 0 {
			fmt.Sscan(r[strings.LastIndex(r[:i], " ")+1:i], &waiting)
		}
		if waiting > 40 {
			t.Errorf("attach reason %q counts %d Adds waiting; at most 40 exist", r, waiting)
		}
	}
}

// Whatever the arrival rate suggests, the guess never exceeds the pods
// that can still come: max pods less the pods holding addresses and those
// already waiting; and the plan's reason says it is a guess.
func TestBurstGuessIsBoundedByThePodsThatCanExist(t *testing.T) {
	cfg := m54xlarge()
	cfg.Plan.MaxPods = 35 // MAX_PODS: 29 on the primary, 6 more at most
	n, err := New(cfg, Boot{CheckpointMissing: true, ENIs: []ENIInfo{primaryWith(29)}}, t0)
	if err != nil {
		t.Fatal(err)
	}
	drain(t, n, t0)
	for i := range 29 {
		n.Step(t0, AddRequest{ID: uint64(i + 1), Key: podKey(i)})
	}
	drain(t, n, t0)
	var jobs []Job
	for i := range 4 {
		now := t0.Add(time.Duration(i) * 20 * time.Millisecond)
		n.Step(now, AddRequest{ID: uint64(100 + i), Key: podKey(100 + i)})
		js, _ := drain(t, n, now)
		jobs = append(jobs, js...)
	}
	now := t0.Add(60 * time.Millisecond)
	if n.burst.anticipated(now, 4) == 0 {
		t.Fatal("4 Adds 20 ms apart not taken for a burst: the test shows nothing")
	}
	if got := expectedAdds(n, now); got > 2 {
		t.Fatalf("%d more Adds expected with max pods 35, 29 pods holding addresses and 4 waiting; want at most 2", got)
	}
	for _, j := range jobs {
		if isAttach(j) && strings.Contains(j.Action.Reason, "Add requests waiting") && !strings.Contains(j.Action.Reason, "4 Add requests waiting") {
			t.Errorf("attach reason %q counts guessed Adds as waiting; 4 wait", j.Action.Reason)
		}
	}
}
