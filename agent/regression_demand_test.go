package agent

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"
)

// Issue 11, "demand vanishes at timeout": Adds that wait for an ENI
// longer than VPCNET_ADD_WAIT fail, and kubelet retries them 10 s later
// (its pod worker's back-off). The ENI attaching for them must not be
// detached in between and attached again for the retries.
func TestAddsRetriedAfterATimeoutDoNotMakeThePoolDetachAndReattach(t *testing.T) {
	w := newWorldOf(t, strings.Replace(topology, "attachDelay: 50ms", "attachDelay: 3s", 1))
	// m5.large: 9 pod addresses per ENI. 14 Adds at once: 9 served, 5
	// wait for a second ENI past VPCNET_ADD_WAIT.
	n := w.node("i-node1", map[string]string{"VPCNET_ADD_WAIT": "1s", "IP_COOLDOWN_PERIOD": "1"})
	a := n.start(t)
	a.waitReady(t)
	ctx := context.Background()
	var wg sync.WaitGroup
	errs := make([]error, 14)
	for i := range 14 {
		wg.Go(func() {
			// kubelet's way: after a failure, try again 10 s later.
			for start := time.Now(); time.Since(start) < 40*time.Second; time.Sleep(10 * time.Second) {
				if _, errs[i] = a.Add(ctx, key(i), pod(i)); errs[i] == nil {
					return
				}
			}
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("pod %d never got an address in 40 s of retries: %v", i, err)
		}
	}
	if d, c := w.callCount("DetachNetworkInterface"), w.callCount("CreateNetworkInterface"); d != 0 {
		t.Fatalf("14 pods whose Adds were retried after a timeout: %d ENIs detached and %d created; want none detached", d, c)
	}
}
