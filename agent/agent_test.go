package agent

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vpcnet/vpcnet/checkpoint/disk"
	"github.com/vpcnet/vpcnet/ipam"
	"github.com/vpcnet/vpcnet/sim"
)

func TestStartOnAnEmptyNodeFillsThePrimaryENIAndWritesTheCNIConfigOnlyWhenReady(t *testing.T) {
	w := newWorld(t)
	n := w.node("i-node1", nil)
	conf := filepath.Join(n.env["VPCNET_CNI_CONF_DIR"], "10-vpcnet.conflist")
	a := n.start(t)
	a.waitReady(t)
	// Readiness comes first and the config right after it, in the same pass.
	deadline := time.Now().Add(5 * time.Second)
	for _, err := os.Stat(conf); err != nil; _, err = os.Stat(conf) {
		if time.Now().After(deadline) {
			t.Fatalf("ready agent wrote no CNI config: %v", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	// m5.large: 10 IPv4 per ENI, so the primary ENI carries 9 pod
	// addresses, and WARM_ENI_TARGET=1 is met by those 9 free ones.
	st := a.settle(t, func(st ipam.Stats) bool { return st.Total == 9 })
	if len(st.ENIs) != 1 || st.Free != 9 {
		t.Fatalf("idle m5.large pool = %s, want 9 free addresses on the primary ENI", st)
	}
	// The first pod makes the pool one ENI short: a second ENI with 9.
	as, err := a.Add(context.Background(), key(1), pod(1))
	if err != nil {
		t.Fatal(err)
	}
	st = a.settle(t, func(st ipam.Stats) bool { return st.Total == 18 })
	if len(st.ENIs) != 2 || st.Assigned != 1 {
		t.Fatalf("pool after one pod = %s, want 2 ENIs, 18 addresses, 1 assigned", st)
	}
	infos, err := w.cloud.Interfaces("i-node1")
	if err != nil {
		t.Fatal(err)
	}
	if len(infos) != 2 {
		t.Fatalf("EC2 shows %d ENIs on the instance, want 2", len(infos))
	}
	ck, err := disk.Load(filepath.Join(n.env["VPCNET_STATE_DIR"], "checkpoint.json"))
	if err != nil {
		t.Fatal(err)
	}
	if len(ck.Entries) != 1 || ck.Entries[0].Addr != as.Addr || ck.Entries[0].Key != key(1) {
		t.Fatalf("checkpoint after Add = %+v, want the one assignment %s", ck.Entries, as.Addr)
	}
}

func TestAddIsIdempotentAndDelReleasesIntoCooldown(t *testing.T) {
	w := newWorld(t)
	a := w.node("i-node1", map[string]string{"IP_COOLDOWN_PERIOD": "3600"}).start(t)
	a.waitReady(t)
	ctx := context.Background()
	first, err := a.Add(ctx, key(1), pod(1))
	if err != nil {
		t.Fatal(err)
	}
	again, err := a.Add(ctx, key(1), pod(1))
	if err != nil || again.Addr != first.Addr {
		t.Fatalf("second Add for the same attachment = %v, %v; want %s", again.Addr, err, first.Addr)
	}
	if _, ok, err := a.Del(ctx, key(1)); !ok || err != nil {
		t.Fatalf("Del = %v, %v", ok, err)
	}
	if _, ok, err := a.Del(ctx, key(1)); ok || err != nil {
		t.Fatalf("repeated Del = %v, %v; want a quiet success", ok, err)
	}
	next, err := a.Add(ctx, key(2), pod(2))
	if err != nil {
		t.Fatal(err)
	}
	if next.Addr == first.Addr {
		t.Fatalf("address %s handed out again inside its cooldown", next.Addr)
	}
}

func TestRestartKeepsEveryAssignment(t *testing.T) {
	w := newWorld(t)
	n := w.node("i-node1", nil)
	a := n.start(t)
	a.waitReady(t)
	ctx := context.Background()
	held := map[ipam.Key]ipam.Assignment{}
	for i := range 12 {
		as, err := a.Add(ctx, key(i), pod(i))
		if err != nil {
			t.Fatal(err)
		}
		held[key(i)] = as
	}
	if err := a.stop(); err != nil {
		t.Fatal(err)
	}
	b := n.start(t)
	b.waitReady(t)
	for k, as := range held {
		got, err := b.Add(ctx, k, ipam.Pod{})
		if err != nil || got.Addr != as.Addr {
			t.Errorf("after restart %s holds %v (%v), want %s", k, got.Addr, err, as.Addr)
		}
	}
	fresh, err := b.Add(ctx, key(99), pod(99))
	if err != nil {
		t.Fatal(err)
	}
	for _, as := range held {
		if as.Addr == fresh.Addr {
			t.Fatalf("new pod got %s, still held by %s", fresh.Addr, as.Key)
		}
	}
}

// fullTinyNode starts the agent on i-tiny, whose /28 subnet has 11 usable
// addresses: the primary's own and 9 secondaries leave one, too few for a
// new ENI of 9. Pods 0-8 take the 9.
func fullTinyNode(t *testing.T, w *world) *running {
	t.Helper()
	a := w.node("i-tiny", map[string]string{"VPCNET_ADD_WAIT": "1s"}).start(t)
	a.waitReady(t)
	for i := range 9 {
		if _, err := a.Add(context.Background(), key(i), pod(i)); err != nil {
			t.Fatal(err)
		}
	}
	return a
}

func TestSubnetExhaustionNamesTheSubnetAndWhatToDo(t *testing.T) {
	a := fullTinyNode(t, newWorld(t))
	_, err := a.Add(context.Background(), key(9), pod(9))
	var na *NoAddressError
	if !errors.As(err, &na) {
		t.Fatalf("Add on an exhausted subnet = %v, want a NoAddressError", err)
	}
	if na.Reason != ReasonSubnetExhausted {
		t.Fatalf("reason = %q (%v), want %q", na.Reason, err, ReasonSubnetExhausted)
	}
	t.Log(err)
	for _, want := range []string{"subnet-tiny", "InsufficientFreeAddressesInSubnet", "default/p009"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %s", err, want)
		}
	}
}

func TestThrottledEC2IsSurvived(t *testing.T) {
	w := newWorld(t)
	w.cloud.SetFault("", sim.Fault{ErrorRate: 0.5, Code: "RequestLimitExceeded"})
	a := w.node("i-node1", nil).start(t)
	a.waitReady(t)
	for i := range 12 {
		if _, err := a.Add(context.Background(), key(i), pod(i)); err != nil {
			t.Fatalf("pod %d: %v", i, err)
		}
	}
}

func TestInstanceTypeMissingFromTheTableWorksThroughEC2(t *testing.T) {
	w := newWorld(t)
	a := w.node("i-x9", nil).start(t)
	a.waitReady(t)
	// x9.sim: 2 ENIs of 4 addresses, so 3 pod addresses per ENI.
	if _, err := a.Add(context.Background(), key(1), pod(1)); err != nil {
		t.Fatal(err)
	}
	st := a.settle(t, func(st ipam.Stats) bool { return st.Total == 6 })
	if len(st.ENIs) != 2 {
		t.Fatalf("pool = %s, want both ENIs x9.sim allows", st)
	}
}

func TestMissingCheckpointWithLivePodsReleasesNothing(t *testing.T) {
	w := newWorld(t)
	n := w.node("i-node1", nil)
	a := n.start(t)
	a.waitReady(t)
	ctx := context.Background()
	var live []ipam.Assignment
	for i := range 12 {
		as, err := a.Add(ctx, key(i), pod(i))
		if err != nil {
			t.Fatal(err)
		}
		live = append(live, as)
		n.host.route(as.Addr, true)
	}
	a.settle(t, func(st ipam.Stats) bool { return st.Total == 27 })
	if err := a.stop(); err != nil {
		t.Fatal(err)
	}
	// The checkpoint is lost (story 2), and the targets now want far
	// fewer addresses than the node holds. The Amazon VPC CNI's copy
	// that the stop handed back goes too, or the start imports it.
	if err := os.Remove(filepath.Join(n.env["VPCNET_STATE_DIR"], "checkpoint.json")); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(n.env["VPCNET_AWS_VPC_CNI_CHECKPOINT"]); err != nil {
		t.Fatal(err)
	}
	n.env["WARM_IP_TARGET"] = "1"
	b := n.start(t)
	b.waitReady(t)
	for range 5 {
		b.reconcile(ctx, true)
	}
	infos, _ := w.cloud.Interfaces("i-node1")
	total := 0
	for _, i := range infos {
		total += len(i.Addresses) - 1
	}
	if total != 27 {
		t.Fatalf("EC2 shows %d pod addresses after the restart, want all 27 kept", total)
	}
	for i := range 5 {
		as, err := b.Add(ctx, key(100+i), pod(100+i))
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range live {
			if l.Addr == as.Addr {
				t.Fatalf("new pod got %s, which a live pod still uses", as.Addr)
			}
		}
	}
	v, _ := b.view(ctx)
	hold := v.ReleaseHold
	if hold == "" {
		t.Fatal("no release hold while live pods are unknown to the checkpoint")
	}
}

func TestRestartMidReconcileLosesAndDuplicatesNothing(t *testing.T) {
	w := newWorld(t)
	n := w.node("i-node1", map[string]string{"WARM_IP_TARGET": "4"})
	ctx := context.Background()
	held := map[ipam.Key]ipam.Assignment{}
	next := 0
	for round := range 6 {
		a := n.start(t)
		a.waitReady(t)
		for k, as := range held {
			got, err := a.Add(ctx, k, ipam.Pod{})
			if err != nil || got.Addr != as.Addr {
				t.Fatalf("round %d: %s holds %v (%v), want %s", round, k, got.Addr, err, as.Addr)
			}
		}
		// Grow and shrink while the agent is cut off at a different
		// moment each round.
		for range 5 {
			as, err := a.Add(ctx, key(next), pod(next))
			if err != nil {
				t.Fatal(err)
			}
			held[key(next)] = as
			next++
		}
		for k := range held {
			if len(held)%3 == 0 {
				break
			}
			if _, _, err := a.Del(ctx, k); err != nil {
				t.Fatal(err)
			}
			delete(held, k)
		}
		time.Sleep(time.Duration(round*15) * time.Millisecond)
		if err := a.stop(); err != nil {
			t.Fatal(err)
		}
		seen := map[string]ipam.Key{}
		for k, as := range held {
			if other, dup := seen[as.Addr.String()]; dup {
				t.Fatalf("%s held by %s and %s", as.Addr, k, other)
			}
			seen[as.Addr.String()] = k
		}
	}
	// Every held address is still on an ENI attached to the instance.
	infos, _ := w.cloud.Interfaces("i-node1")
	onNode := map[string]bool{}
	for _, i := range infos {
		for _, ip := range i.Addresses {
			onNode[ip.String()] = true
		}
	}
	for k, as := range held {
		if !onNode[as.Addr.String()] {
			t.Errorf("%s holds %s, which is no longer on the instance", k, as.Addr)
		}
	}
}

// With WARM_ENI_TARGET=1 a pod taking an address of the primary ENI leaves
// less than an ENI's worth free: the warm ENI must come now, not at the next
// periodic pass (a minute by default), or the next pods wait for an attach.
func TestAnAddRefillsTheWarmPoolWithoutWaitingForThePeriodicPass(t *testing.T) {
	w := newWorld(t)
	a := w.node("i-node1", nil).start(t)
	a.waitReady(t)
	if enis := attached(t, a, "i-node1"); len(enis) != 1 {
		t.Fatalf("an idle node holds %d ENIs, want its primary only", len(enis))
	}
	if _, err := a.Add(context.Background(), key(1), pod(1)); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for len(attached(t, a, "i-node1")) < 2 {
		if time.Now().After(deadline) {
			t.Fatal("no warm ENI attached after the first pod; the reconciler was not woken by the Add")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Story: a full subnet. Pods keep asking (the kubelet retries every few
// seconds), but after EC2 said no, the agent asks again only after a
// backoff, and the pods keep being told the real reason.
func TestAFullSubnetIsNotAskedAgainOnEveryRetry(t *testing.T) {
	w := newWorld(t)
	a := fullTinyNode(t, w)
	ctx := context.Background()
	// One refusal starts the backoff.
	deadline := time.Now().Add(20 * time.Second)
	for w.callCount("CreateNetworkInterface") == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the agent never tried to grow the full pool")
		}
		time.Sleep(10 * time.Millisecond)
	}
	first := w.callCount("CreateNetworkInterface")
	for i := range 3 {
		_, err := a.Add(ctx, key(10+i), pod(10+i))
		var na *NoAddressError
		if !errors.As(err, &na) || na.Reason != ReasonSubnetExhausted {
			t.Fatalf("retry %d: %v; want the subnet named as the reason", i, err)
		}
	}
	// Three Adds of a second each all fell inside the first 5 s backoff.
	if n := w.callCount("CreateNetworkInterface"); n > first+1 {
		t.Errorf("%d CreateNetworkInterface calls during 3 s of retries after the first refusal; want at most one more", n-first)
	}
	// /v1/status says what the agent wants to do and that it is waiting.
	st := a.statusView(context.Background()).(statusView)
	if len(st.Planned) == 0 || !strings.Contains(st.Planned[0], "attach") || !strings.Contains(st.Planned[0], "WARM_ENI_TARGET") {
		t.Errorf("/v1/status planned = %q; want the ENI attach and its reason", st.Planned)
	}
	if st.GrowthHeldUntil == nil {
		t.Error("/v1/status does not say growth is held back")
	}
}

func TestStatusPlansNothingWhenThePoolIsAtTarget(t *testing.T) {
	w := newWorld(t)
	a := w.node("i-node1", nil).start(t)
	a.waitReady(t)
	if st := a.statusView(context.Background()).(statusView); len(st.Planned) != 0 || st.GrowthHeldUntil != nil {
		t.Errorf("an idle node at its warm target plans %q, growth held until %v", st.Planned, st.GrowthHeldUntil)
	}
}

// Story: a burst. The first pod sets off a warm ENI's attachment (3 s
// here); twenty more pods arrive while it attaches and need a third ENI.
// The agent must start that one at once, not after the first attach
// completes, or the pods outwait VPCNET_ADD_WAIT (5 s) and fail.
func TestABurstDuringAnAttachGetsTheFurtherENIsAtOnce(t *testing.T) {
	w := newWorldOf(t, strings.Replace(topology, "attachDelay: 50ms", "attachDelay: 3s", 1))
	a := w.node("i-node1", nil).start(t)
	a.waitReady(t)
	ctx := context.Background()
	if _, err := a.Add(ctx, key(0), pod(0)); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for w.callCount("AttachNetworkInterface") == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the first pod set off no warm ENI")
		}
		time.Sleep(10 * time.Millisecond)
	}
	var wg sync.WaitGroup
	errs := make([]error, 20)
	for i := range 20 {
		wg.Go(func() { _, errs[i] = a.Add(ctx, key(1+i), pod(1+i)) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("pod %d of the burst: %v", 1+i, err)
		}
	}
	if n := len(attached(t, a, "i-node1")); n != 3 {
		t.Errorf("%d ENIs attached after the burst, want 3", n)
	}
}
