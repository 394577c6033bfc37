package e2e

import (
	"context"
	"fmt"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/vpcnet/vpcnet/simcluster"
)

// vpcnetd is killed with SIGKILL while the runtime is adding and deleting
// pods, then restarted, as the kubelet restarts a crashed agent. Story 2:
// the restarted agent must not hand out, release or detach anything a
// live pod uses.
func TestAgentKilledMidChurnKeepsEveryLivePodsAddress(t *testing.T) {
	c := startCluster(t, twoNodes, nil)
	a, b := c.Nodes[0], c.Nodes[1]
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	warm, err := a.ENIs(ctx)
	if err != nil {
		t.Fatal(err)
	}

	// Twelve steady pods, so the second ENI is in use, and one on the
	// other node to talk to.
	var steady []*simcluster.Pod
	for i := range 12 {
		p, err := a.AddPod(ctx, fmt.Sprintf("steady-%d", i))
		if err != nil {
			t.Fatal(err)
		}
		steady = append(steady, p)
	}
	peer, err := b.AddPod(ctx, "peer")
	if err != nil {
		t.Fatal(err)
	}

	// Churn: two workers create and delete pods as fast as the node lets
	// them, retrying like the kubelet while the agent is down.
	churnCtx, stopChurn := context.WithCancel(ctx)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var live []*simcluster.Pod // churn pods whose ADD succeeded and DEL has not
	for w := range 2 {
		wg.Go(func() {
			for i := 0; churnCtx.Err() == nil; i++ {
				p, _ := addWithRetry(churnCtx, a, fmt.Sprintf("churn-%d-%d", w, i))
				if p == nil {
					return
				}
				mu.Lock()
				live = append(live, p)
				mu.Unlock()
				if i%2 == 1 {
					continue // keep every other one
				}
				for a.DelPod(ctx, p) != nil {
					time.Sleep(200 * time.Millisecond) // the kubelet retries DEL until it succeeds
				}
				mu.Lock()
				live = remove(live, p)
				mu.Unlock()
			}
		})
	}
	time.Sleep(time.Second)
	if err := a.KillAgent(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second) // ADDs and DELs fail while it is down
	if err := a.StartAgent(); err != nil {
		t.Fatal(err)
	}
	if err := a.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second)
	stopChurn()
	wg.Wait()
	running := append(append([]*simcluster.Pod{}, steady...), live...)
	t.Logf("%d pods running on %s after the crash (%d from churn)", len(running), a.ID, len(live))

	// The runtime's periodic GC tells the agent which sandboxes exist, so
	// addresses of ADDs the crash interrupted are released. The agent
	// spares assignments younger than the cooldown (an ADD may be in
	// flight), so the GC comes after it.
	time.Sleep(1500 * time.Millisecond)
	if err := a.GC(ctx, running); err != nil {
		t.Fatal(err)
	}

	t.Run("no address is held by two pods and the agent agrees with the runtime", func(t *testing.T) {
		holders, err := a.Holders(ctx)
		if err != nil {
			t.Fatal(err)
		}
		byAddr := map[netip.Addr]string{}
		for _, h := range holders {
			if prev, dup := byAddr[h.Address]; dup {
				t.Errorf("%s is recorded for both %s and %s", h.Address, prev, h.ContainerID)
			}
			byAddr[h.Address] = h.ContainerID
		}
		seen := map[netip.Addr]string{}
		for _, p := range running {
			if prev, dup := seen[p.Addr]; dup {
				t.Errorf("%s and %s both use %s", prev, p.Name, p.Addr)
			}
			seen[p.Addr] = p.Name
			if byAddr[p.Addr] != p.ContainerID {
				t.Errorf("%s uses %s but the agent records it for %q", p.Name, p.Addr, byAddr[p.Addr])
			}
		}
		for _, h := range holders {
			if _, ok := seen[h.Address]; !ok {
				t.Errorf("the agent still holds %s for %s (%s), which the runtime deleted or never created", h.Address, h.ContainerID, h.Pod)
			}
		}
	})

	t.Run("every running pod keeps its address on an attached ENI and its connectivity", func(t *testing.T) {
		for _, p := range running {
			if _, _, ok := c.ENIOf(a.ID, p.Addr); !ok {
				t.Errorf("%s's address %s is on no ENI attached to the node", p.Name, p.Addr)
				continue
			}
			if err := a.CheckPod(ctx, p); err != nil {
				t.Errorf("CHECK %s: %v", p.Name, err)
			}
			if seen, err := simcluster.Probe(ctx, p.Endpoint(), peer.Endpoint()); err != nil || seen != p.Addr {
				t.Errorf("%s → peer on %s: seen as %s, %v", p.Name, b.ID, seen, err)
			}
		}
	})

	t.Run("after every pod is deleted the pool returns to its warm target", func(t *testing.T) {
		for _, p := range running {
			if err := a.DelPod(ctx, p); err != nil {
				t.Error(err)
			}
		}
		var now []simcluster.ENI
		deadline := time.Now().Add(45 * time.Second)
		for time.Now().Before(deadline) {
			if now, err = a.ENIs(ctx); err != nil {
				t.Fatal(err)
			}
			if sameShape(now, warm) {
				return
			}
			time.Sleep(500 * time.Millisecond)
		}
		t.Errorf("pool did not return to its warm target:\n now %+v\nwant %+v", now, warm)
	})
}

// sameShape compares pools by ENI count and free addresses per device.
func sameShape(a, b []simcluster.ENI) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].DeviceIndex != b[i].DeviceIndex || a[i].Total != b[i].Total || a[i].Free != b[i].Free || a[i].Assigned != 0 {
			return false
		}
	}
	return true
}

func remove(ps []*simcluster.Pod, p *simcluster.Pod) []*simcluster.Pod {
	for i, q := range ps {
		if q == p {
			return append(ps[:i], ps[i+1:]...)
		}
	}
	return ps
}
