package agent

import (
	"context"
	"errors"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/vpcnet/vpcnet/agentapi"
	"github.com/vpcnet/vpcnet/ipam"
	"github.com/vpcnet/vpcnet/netpol"
)

// fakePolicySource is the API server as the policy watch sees it.
type fakePolicySource struct {
	synced atomic.Bool
	mu     sync.Mutex
	c      netpol.Cluster
	// getErr, when set, is what a read of a pod the watch lacks returns.
	getErr  error
	changed func()
}

func (f *fakePolicySource) Run(ctx context.Context, changed func()) error {
	f.mu.Lock()
	f.changed = changed
	f.mu.Unlock()
	changed()
	<-ctx.Done()
	return nil
}

// list says the watches have listed, as the real watch does.
func (f *fakePolicySource) list() {
	f.synced.Store(true)
	f.mu.Lock()
	changed := f.changed
	f.mu.Unlock()
	if changed != nil {
		changed()
	}
}
func (f *fakePolicySource) Synced() bool { return f.synced.Load() }
func (f *fakePolicySource) Cluster() *netpol.Cluster {
	f.mu.Lock()
	defer f.mu.Unlock()
	c := f.c
	return &c
}
func (f *fakePolicySource) Policies() int      { return len(f.Cluster().Policies) }
func (f *fakePolicySource) Generation() uint64 { return 0 }
func (f *fakePolicySource) Known(ns, name string) (netpol.Pod, bool) {
	for _, p := range f.Cluster().Pods {
		if p.Namespace == ns && p.Name == name {
			return p, true
		}
	}
	return netpol.Pod{}, false
}
func (f *fakePolicySource) Pod(_ context.Context, ns, name string) (netpol.Pod, error) {
	for _, p := range f.Cluster().Pods {
		if p.Namespace == ns && p.Name == name {
			return p, nil
		}
	}
	if f.getErr != nil {
		return netpol.Pod{}, f.getErr
	}
	return netpol.Pod{}, errors.New("not found")
}

// fakePolicyRules records the Ruleset last written.
type fakePolicyRules struct {
	mu     sync.Mutex
	last   netpol.Ruleset
	writes int
	// hold, when set, holds a write that isolates a pod named holdPod
	// (see holder); an error it is released with fails the write.
	hold    *holder
	holdPod string // guarded by mu
	// wrote hears of every write (newFakePolicyRules).
	wrote chan struct{}
}

func (f *fakePolicyRules) SetPolicy(_ context.Context, rs netpol.Ruleset, _ bool) error {
	f.mu.Lock()
	pod := f.holdPod
	f.mu.Unlock()
	// Only a write that gives the pod its address is held: one made for
	// it as bound to the node, before its Add, has none (and would be
	// held in the Add's place when the API server's watch kicks a write
	// while the Add is in flight).
	if f.hold != nil && slices.ContainsFunc(rs.Pods, func(r netpol.PodRules) bool { return r.Pod.Name == pod && r.Pod.IP.IsValid() }) {
		if err := f.hold.hold(rs); err != nil {
			return err
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.last = rs
	f.writes++
	if f.wrote != nil {
		select {
		case f.wrote <- struct{}{}:
		default:
		}
	}
	return nil
}

// waitFor waits until the rules last written satisfy ok.
func (f *fakePolicyRules) waitFor(t *testing.T, what string, ok func(netpol.Ruleset) bool) {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		f.mu.Lock()
		rs := f.last
		f.mu.Unlock()
		if ok(rs) {
			return
		}
		select {
		case <-f.wrote:
		case <-timeout:
			t.Fatalf("no write of %s in 10 s; the last: %+v", what, rs)
		}
	}
}

// rulesOf are the verdicts of the pod named name in rs, each entry's.
func rulesOf(rs netpol.Ruleset, name string) []netpol.PodRules {
	var out []netpol.PodRules
	for _, r := range rs.Pods {
		if r.Pod.Name == name {
			out = append(out, r)
		}
	}
	return out
}

func (f *fakePolicyRules) PolicyDrops(context.Context) (map[netip.Addr]netpol.Drops, error) {
	return nil, nil
}

func newFakePolicyRules() *fakePolicyRules { return &fakePolicyRules{wrote: make(chan struct{}, 1)} }

// isolated says which directions the rules last written isolate addr in.
func (f *fakePolicyRules) isolated(addr string) (ingress, egress bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return isolatedIn(f.last, addr)
}

// isolatedIn says which directions rs isolates addr in.
func isolatedIn(rs netpol.Ruleset, addr string) (ingress, egress bool) {
	for _, r := range rs.Pods {
		if r.Pod.IP.String() == addr {
			return r.Ingress != nil, r.Egress != nil
		}
	}
	return false, false
}

func denyAllIn(ns string) *networkingv1.NetworkPolicy {
	return &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "deny"},
		Spec: networkingv1.NetworkPolicySpec{PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "db"}}}}
}

func policyNode(t *testing.T, mode netpol.Mode, src *fakePolicySource) (*fakePolicyRules, *agentapi.Client) {
	t.Helper()
	n := newWorld(t).node("i-node1", nil)
	rules := newFakePolicyRules()
	n.policy = PolicyOptions{Source: src, Rules: rules, Mode: mode, SyncWait: 200 * time.Millisecond}
	a := n.start(t)
	a.waitReady(t)
	return rules, &agentapi.Client{Socket: n.env["VPCNET_SOCKET"]}
}

func TestAPodsPoliciesAreInForceBeforeItsAddAnswers(t *testing.T) {
	src := &fakePolicySource{}
	src.c = netpol.Cluster{Policies: []*networkingv1.NetworkPolicy{denyAllIn("default")},
		Pods: []netpol.Pod{{Namespace: "default", Name: "db", Labels: map[string]string{"app": "db"}}}}
	src.synced.Store(true)
	rules, c := policyNode(t, netpol.Standard, src)
	ctx := context.Background()

	add, err := c.Add(ctx, &agentapi.AddRequest{Attachment: web("c1"), PodNamespace: "default", PodName: "db"})
	if err != nil {
		t.Fatal(err)
	}
	if in, eg := rules.isolated(add.Address); !in || eg {
		t.Fatalf("when the Add answered, the rules isolated %s ingress=%v egress=%v; want ingress only", add.Address, in, eg)
	}
	other, err := c.Add(ctx, &agentapi.AddRequest{Attachment: web("c2"), PodNamespace: "default", PodName: "web"})
	if err != nil {
		t.Fatal(err)
	}
	if in, eg := rules.isolated(other.Address); in || eg {
		t.Errorf("a pod no policy selects is isolated (ingress=%v egress=%v)", in, eg)
	}
	if _, err := c.Del(ctx, &agentapi.DelRequest{Attachment: web("c1")}); err != nil {
		t.Fatal(err)
	}
	// The Del does not wait for it, but the rules follow.
	rules.waitFor(t, "rules without the deleted pod "+add.Address, func(rs netpol.Ruleset) bool {
		in, _ := isolatedIn(rs, add.Address)
		return !in
	})
}

// A pod the API server binds to the node has its rules written before
// its Add, with no address; the Add gives them its address (on the
// node, one map entry rather than chains). A bound pod the watch has not
// seen is left to its Add.
func TestAPodBoundToTheNodeHasItsRulesBeforeItsAdd(t *testing.T) {
	src := &fakePolicySource{}
	src.c = netpol.Cluster{Policies: []*networkingv1.NetworkPolicy{denyAllIn("default")},
		Pods: []netpol.Pod{{Namespace: "default", Name: "db", Labels: map[string]string{"app": "db"}}}}
	src.synced.Store(true)
	k := newFakeKube(KubeState{Reachable: true, Node: "n"})
	n := newWorld(t).node("i-node1", nil)
	rules := newFakePolicyRules()
	n.kube = k
	n.policy = PolicyOptions{Source: src, Rules: rules, Mode: netpol.Standard, SyncWait: 200 * time.Millisecond}
	n.start(t).waitReady(t)
	c := &agentapi.Client{Socket: n.env["VPCNET_SOCKET"]}

	k.mu.Lock()
	k.scheduled = []ipam.Pod{{Namespace: "default", Name: "db"}, {Namespace: "default", Name: "unseen"}}
	k.mu.Unlock()
	k.set(func(*KubeState) {}) // the layer's change callback
	rules.waitFor(t, "db's rules before its Add", func(rs netpol.Ruleset) bool {
		db := rulesOf(rs, "db")
		return len(db) == 1 && !db[0].Pod.IP.IsValid() && db[0].Ingress != nil
	})
	add, err := c.Add(context.Background(), &agentapi.AddRequest{Attachment: web("c1"), PodNamespace: "default", PodName: "db"})
	if err != nil {
		t.Fatal(err)
	}
	rules.mu.Lock()
	db := rulesOf(rules.last, "db")
	rules.mu.Unlock()
	if len(db) != 1 || db[0].Pod.IP.String() != add.Address || db[0].Ingress == nil {
		t.Errorf("when the Add answered, db's verdicts were %+v; want one entry, isolated, at %s", db, add.Address)
	}
}

func TestStrictModeRefusesAPodWhoseLabelsCannotBeKnownAndSealsOneItCannotRead(t *testing.T) {
	src := &fakePolicySource{getErr: errors.New("connection refused")}
	rules, c := policyNode(t, netpol.Strict, src)
	ctx := context.Background()
	_, err := c.Add(ctx, &agentapi.AddRequest{Attachment: web("c1"), PodNamespace: "default", PodName: "db"})
	if err == nil || !strings.Contains(err.Error(), "strict") {
		t.Fatalf("Add before the watches listed, strict mode: err = %v, want a refusal naming strict mode", err)
	}

	// Listed now, but the pod itself unreadable: it starts sealed.
	src.list()
	add, err := c.Add(ctx, &agentapi.AddRequest{Attachment: web("c1"), PodNamespace: "default", PodName: "db"})
	if err != nil {
		t.Fatalf("Add once listed: %v", err)
	}
	if in, eg := rules.isolated(add.Address); !in || !eg {
		t.Errorf("strict: a pod whose labels are unknown runs with ingress isolated %v, egress %v; want both", in, eg)
	}
}

func TestStandardModeLetsAPodStartBeforeTheWatchesList(t *testing.T) {
	src := &fakePolicySource{getErr: errors.New("connection refused")}
	_, c := policyNode(t, netpol.Standard, src)
	if _, err := c.Add(context.Background(), &agentapi.AddRequest{Attachment: web("c1"), PodNamespace: "default", PodName: "db"}); err != nil {
		t.Fatalf("standard mode must let the pod start open: %v", err)
	}
}

func TestAnAgentThatEnforcesNothingCountsThePoliciesItLeavesUnenforced(t *testing.T) {
	n := newWorld(t).node("i-node1", nil)
	counted := make(chan struct{}, 1)
	n.policy = PolicyOptions{Off: "VPCNET_NETWORK_POLICY=off", Count: func(context.Context) (int, error) {
		select {
		case counted <- struct{}{}:
		default:
		}
		return 3, nil
	}}
	a := n.start(t)
	a.waitReady(t)
	<-counted
	deadline := time.Now().Add(5 * time.Second)
	for {
		st := a.policy.view(context.Background(), "")
		if st.Policies == 3 {
			if st.Enabled || st.Source != "VPCNET_NETWORK_POLICY=off" {
				t.Errorf("status = %+v; want off, saying why", st)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("status = %+v; want the 3 unenforced policies counted", st)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// On an IPv6 node with IPv4 egress, the Add's write names the pod's
// egress veth with its verdicts, before the Add answers and so before
// the egress plugin, chained after vpcnet's, makes the veth: its IPv4
// egress is judged from the first packet.
func TestAPodsEgressVethIsInItsVerdictsBeforeItsAddAnswers(t *testing.T) {
	deny := denyAllIn("default")
	deny.Spec.PolicyTypes = []networkingv1.PolicyType{networkingv1.PolicyTypeEgress}
	src := &fakePolicySource{}
	src.c = netpol.Cluster{Policies: []*networkingv1.NetworkPolicy{deny},
		Pods: []netpol.Pod{{Namespace: "default", Name: "db", Labels: map[string]string{"app": "db"}}}}
	src.synced.Store(true)
	n := newWorld(t).node("i-node1", nil)
	rules := newFakePolicyRules()
	n.policy = PolicyOptions{Source: src, Rules: rules, Mode: netpol.Standard, SyncWait: 200 * time.Millisecond,
		EgressV4Veth: func(k ipam.Key) string { return "v4-" + k.ContainerID }}
	n.start(t).waitReady(t)
	c := &agentapi.Client{Socket: n.env["VPCNET_SOCKET"]}
	add, err := c.Add(context.Background(), &agentapi.AddRequest{Attachment: web("c1"), PodNamespace: "default", PodName: "db"})
	if err != nil {
		t.Fatal(err)
	}
	rules.mu.Lock()
	db := rulesOf(rules.last, "db")
	rules.mu.Unlock()
	if len(db) != 1 || db[0].Pod.IP.String() != add.Address || db[0].Egress == nil || db[0].EgressV4Veth != "v4-c1" {
		t.Errorf("when the Add answered, db's verdicts were %+v; want egress-isolated with egress veth v4-c1", db)
	}
}
