package agent

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/vpcnet/vpcnet/ipam"
)

// mutatingCalls counts the EC2 requests that change something.
func (w *world) mutatingCalls() int {
	n := 0
	for _, a := range []string{"CreateNetworkInterface", "AttachNetworkInterface", "AssignPrivateIpAddresses", "AssignIpv6Addresses",
		"UnassignPrivateIpAddresses", "DetachNetworkInterface", "DeleteNetworkInterface", "ModifyNetworkInterfaceAttribute"} {
		n += w.callCount(a)
	}
	return n
}

// Issue 11, "older checkpoint after a restart": an operator restores an
// older checkpoint that lacks three running pods. Their addresses are
// routed on the host; once the restart's cooldown ends they must still
// never go to new pods.
func TestAnOlderCheckpointNeverHandsLivePodsAddressesToNewPods(t *testing.T) {
	w := newWorld(t)
	n := w.node("i-node1", map[string]string{"IP_COOLDOWN_PERIOD": "1"})
	a := n.start(t)
	a.waitReady(t)
	ctx := context.Background()
	first, err := a.Add(ctx, key(0), pod(0))
	if err != nil {
		t.Fatal(err)
	}
	n.host.route(first.Addr, true)
	ck := filepath.Join(n.env["VPCNET_STATE_DIR"], "checkpoint.json")
	older, err := os.ReadFile(ck)
	if err != nil {
		t.Fatal(err)
	}
	live := map[string]bool{first.Addr.String(): true}
	for i := 1; i <= 3; i++ {
		as, err := a.Add(ctx, key(i), pod(i))
		if err != nil {
			t.Fatal(err)
		}
		n.host.route(as.Addr, true)
		live[as.Addr.String()] = true
	}
	if err := a.stop(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(ck, older, 0o600); err != nil {
		t.Fatal(err)
	}
	b := n.start(t)
	b.waitReady(t)
	time.Sleep(1500 * time.Millisecond) // past the restart's 1 s cooldown: the window the defect used
	for i := 10; i < 18; i++ {
		as, err := b.Add(ctx, key(i), pod(i))
		if err != nil {
			t.Fatal(err)
		}
		if live[as.Addr.String()] {
			t.Fatalf("new pod %d got %s, which a running pod still uses", i, as.Addr)
		}
	}
}

// Issue 11, "a restart with no pod changes writes to EC2": every free
// address cools after a restart, and that alone must not grow the pool.
func TestARestartWithNoPodChangeMakesNoEC2Change(t *testing.T) {
	w := newWorld(t)
	n := w.node("i-node1", map[string]string{"IP_COOLDOWN_PERIOD": "30"})
	a := n.start(t)
	a.waitReady(t)
	ctx := context.Background()
	for i := range 6 {
		as, err := a.Add(ctx, key(i), pod(i))
		if err != nil {
			t.Fatal(err)
		}
		n.host.route(as.Addr, true)
	}
	// At target: the warm ENI is attached and filled.
	a.settle(t, func(st ipam.Stats) bool { return len(st.ENIs) == 2 && st.Free >= 9 })
	time.Sleep(500 * time.Millisecond)
	if err := a.stop(); err != nil {
		t.Fatal(err)
	}
	before := w.mutatingCalls()
	for range 3 {
		b := n.start(t)
		b.waitReady(t)
		time.Sleep(500 * time.Millisecond) // its first passes, inside the 30 s cooldown
		if err := b.stop(); err != nil {
			t.Fatal(err)
		}
	}
	if after := w.mutatingCalls(); after != before {
		t.Fatalf("3 restarts with no pod change made %d mutating EC2 calls", after-before)
	}
}

// Issue 11, "DEL while the agent is down leaks the address for good": the
// plugin unwires the pod and succeeds while the agent is down; kubelet
// never calls CNI GC. The agent must notice the pod is gone from the host
// and release the address itself.
func TestAPodDeletedWhileTheAgentWasDownGetsItsAddressBackWithoutGC(t *testing.T) {
	w := newWorld(t)
	n := w.node("i-node1", map[string]string{"VPCNET_RECLAIM_AFTER": "10s", "VPCNET_RECONCILE_INTERVAL": "1s"})
	a := n.start(t)
	a.waitReady(t)
	ctx := context.Background()
	gone, err := a.Add(ctx, key(1), pod(1))
	if err != nil {
		t.Fatal(err)
	}
	n.host.route(gone.Addr, true)
	stay, err := a.Add(ctx, key(2), pod(2))
	if err != nil {
		t.Fatal(err)
	}
	n.host.route(stay.Addr, true)
	if err := a.stop(); err != nil {
		t.Fatal(err)
	}
	n.host.route(gone.Addr, false) // DEL while the agent is down
	b := n.start(t)
	b.waitReady(t)
	deadline := time.Now().Add(40 * time.Second)
	for time.Now().Before(deadline) {
		if _, held := b.lookup(key(1)); !held {
			if _, held := b.lookup(key(2)); !held {
				t.Fatal("the running pod's address was released too")
			}
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("%s still held for a pod that is gone from the host, 40 s after the restart", gone.Addr)
}
