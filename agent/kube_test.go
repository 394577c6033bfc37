package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vpcnet/vpcnet/ipam"
	"github.com/vpcnet/vpcnet/sim"
)

// fakeKube is a Kubernetes layer whose state a test sets; it records the
// Events and readiness the agent gives it.
type fakeKube struct {
	mu      sync.Mutex // guards below
	state   KubeState
	changed func()
	inst    Instance
	events  []Event
	ready   []bool
	// scheduled are the pods bound to the node.
	scheduled []ipam.Pod
}

var _ Kube = (*fakeKube)(nil)

func newFakeKube(st KubeState) *fakeKube {
	st.Enabled = true
	if st.Source == "" {
		st.Source = "fake"
	}
	return &fakeKube{state: st}
}

func (f *fakeKube) Run(ctx context.Context, inst Instance, changed func()) error {
	f.mu.Lock()
	f.inst, f.changed = inst, changed
	f.mu.Unlock()
	changed()
	<-ctx.Done()
	return nil
}

func (f *fakeKube) State() KubeState {
	f.mu.Lock()
	defer f.mu.Unlock()
	st := f.state
	st.ENIConfig.SecurityGroups = slices.Clone(st.ENIConfig.SecurityGroups)
	return st
}

func (f *fakeKube) ScheduledPods() []ipam.Pod {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.scheduled)
}

func (f *fakeKube) SetReady(r bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if n := len(f.ready); n == 0 || f.ready[n-1] != r {
		f.ready = append(f.ready, r)
	}
}

func (f *fakeKube) Record(e Event) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.events = append(f.events, e)
}

// set changes the state and tells the agent, as the watch would.
func (f *fakeKube) set(mod func(*KubeState)) {
	f.mu.Lock()
	mod(&f.state)
	changed := f.changed
	f.mu.Unlock()
	if changed != nil {
		changed()
	}
}

// waitEvent waits for an Event with reason, on the pod (or, for the zero
// Pod, on the Node), and returns it.
func (f *fakeKube) waitEvent(t *testing.T, reason string, on ipam.Pod) Event {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		f.mu.Lock()
		for _, e := range f.events {
			if e.Reason == reason && e.Pod == on {
				f.mu.Unlock()
				return e
			}
		}
		f.mu.Unlock()
		time.Sleep(10 * time.Millisecond)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	t.Fatalf("no %s Event; Events: %+v", reason, f.events)
	return Event{}
}

// waitToldReady waits until the agent's last word to the Kubernetes layer
// is "ready": it says so after readiness turns true and the CNI
// configuration is written, a moment after waitReady returns.
func (f *fakeKube) waitToldReady(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		if calls := f.readyCalls(); len(calls) > 0 && calls[len(calls)-1] {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("the Kubernetes layer was never told the agent is ready: %v", f.readyCalls())
}

func (f *fakeKube) readyCalls() []bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.ready)
}

// waitCondition waits until the readiness condition name holds ok and its
// message says want.
func (r *running) waitCondition(t *testing.T, name string, ok bool, want string) Condition {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	var last Condition
	for time.Now().Before(deadline) {
		r.kubeChanged()
		_, conds := r.ready.get()
		_, diag := r.diag.get()
		for _, c := range append(conds, diag...) {
			if c.Name == name {
				last = c
				if c.OK == ok && strings.Contains(c.Message, want) {
					return c
				}
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("condition %s never %v with %q; last: %+v", name, ok, want, last)
	return last
}

func TestEventsTellThePodAndTheNodeWhatRanOut(t *testing.T) {
	w := newWorld(t)
	k := newFakeKube(KubeState{Reachable: true, Node: "n"})
	n := w.node("i-x9", map[string]string{"VPCNET_ADD_WAIT": "1s"})
	n.kube = k
	a := n.start(t)
	a.waitReady(t)
	// x9.sim: 2 ENIs of 3 pod addresses each.
	ctx := context.Background()
	for i := range 6 {
		if _, err := a.Add(ctx, key(i), pod(i)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := a.Add(ctx, key(6), pod(6)); err == nil {
		t.Fatal("a 7th pod got an address on a node with room for 6")
	}
	e := k.waitEvent(t, EventENILimit, pod(6))
	if !e.Warning || !strings.HasPrefix(e.Message, "no VPC address for this pod: ") || !strings.Contains(e.Message, "x9.sim") {
		t.Errorf("pod Event = %+v; want a warning on %s naming the instance type", e, pod(6))
	}
	e = k.waitEvent(t, EventENILimit, ipam.Pod{})
	if !e.Warning || !strings.Contains(e.Message, "all 2 ENIs a x9.sim allows are attached and full") {
		t.Errorf("Node Event %+v; want a warning saying the ENI limit stops pods", e)
	}
}

func TestAMissingIAMPermissionIsRecordedOnTheNodeNamingTheAction(t *testing.T) {
	w := newWorld(t)
	k := newFakeKube(KubeState{Reachable: true, Node: "n"})
	n := w.node("i-node1", map[string]string{"VPCNET_ADD_WAIT": "1s"})
	n.kube = k
	a := n.start(t)
	a.waitReady(t)
	w.cloud.SetFault("CreateNetworkInterface", simUnauthorized)
	// The first pod leaves the pool one ENI short of WARM_ENI_TARGET.
	if _, err := a.Add(context.Background(), key(1), pod(1)); err != nil {
		t.Fatal(err)
	}
	e := k.waitEvent(t, EventUnauthorized, ipam.Pod{})
	for _, want := range []string{"EC2 refused CreateNetworkInterface (UnauthorizedOperation)", "ec2:CreateNetworkInterface"} {
		if !strings.Contains(e.Message, want) {
			t.Errorf("Event %q does not say %q", e.Message, want)
		}
	}
	if e.Pod.Name != "" || !e.Warning {
		t.Errorf("Event %+v; want a warning on the Node", e)
	}
}

func TestAKubernetesOutageLeavesAddressManagementAlone(t *testing.T) {
	w := newWorld(t)
	down := time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)
	k := newFakeKube(KubeState{Reachable: false, Since: down, LastError: "list pods: dial tcp 10.96.0.1:443: connect: connection refused", Node: "n", NodeFoundBy: "MY_NODE_NAME"})
	n := w.node("i-node1", nil)
	n.kube = k
	a := n.start(t)
	a.waitReady(t)
	if _, err := a.Add(context.Background(), key(1), pod(1)); err != nil {
		t.Fatalf("Add with the API server away: %v", err)
	}
	c := a.waitCondition(t, CondKubernetes, false, "unreachable since 2026-03-04T05:06:07Z")
	for _, want := range []string{"connection refused", "pods already known keep their addresses"} {
		if !strings.Contains(c.Message, want) {
			t.Errorf("condition %q does not say %q", c.Message, want)
		}
	}
	if ready, conds := a.ready.get(); !ready {
		t.Errorf("not ready because of Kubernetes: %s", failing(conds))
	}
	k.waitToldReady(t)

	k.set(func(st *KubeState) { st.Reachable, st.LastError, st.Since = true, "", down.Add(time.Minute) })
	a.waitCondition(t, CondKubernetes, true, "reachable (fake)")
}

func TestStatusSaysWhatTheKubernetesLayerKnows(t *testing.T) {
	tests := []struct {
		name string
		kube Kube
		env  map[string]string
		// want: each diagnostic's state and words its message must hold.
		want map[string]struct {
			ok   bool
			says string
		}
	}{
		{
			name: "no API server (the local cloud)",
			env:  map[string]string{"VPCNET_STARTUP_TAINT": "vpcnet.io/agent-not-ready"},
			want: map[string]struct {
				ok   bool
				says string
			}{
				CondKubernetes:   {false, "no Kubernetes API: KUBERNETES_SERVICE_HOST and VPCNET_KUBECONFIG are unset"},
				CondNodeIdentity: {true, "not checked"},
				CondStartupTaint: {false, "no Kubernetes API to remove it with"},
			},
		},
		{
			name: "names disagree",
			kube: newFakeKube(KubeState{Reachable: true, Since: time.Now(), Node: "ip-10-0-0-5.ec2.internal", NodeFoundBy: "providerID",
				Mismatch: "MY_NODE_NAME is web-1, but this instance's Node (by providerID) is ip-10-0-0-5.ec2.internal", StartupTaint: "k: removed", TaintRemoved: true}),
			want: map[string]struct {
				ok   bool
				says string
			}{
				CondKubernetes:   {true, "reachable"},
				CondNodeIdentity: {false, "using Node ip-10-0-0-5.ec2.internal (found by providerID), but names disagree: MY_NODE_NAME is web-1"},
				CondStartupTaint: {true, "k: removed"},
			},
		},
		{
			name: "Node not found",
			kube: newFakeKube(KubeState{Reachable: true, Since: time.Now(), NodeProblem: "no Node has providerID aws:///us-west-2a/i-node1", StartupTaint: "k: waiting to find the Node"}),
			want: map[string]struct {
				ok   bool
				says string
			}{
				CondNodeIdentity: {false, "Node not found: no Node has providerID aws:///us-west-2a/i-node1"},
				CondStartupTaint: {false, "waiting to find the Node"},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := newWorld(t)
			n := w.node("i-node1", tt.env)
			n.kube = tt.kube
			a := n.start(t)
			a.waitReady(t)
			a.mu.Lock()
			intro := "http://" + a.httpAddrs[0]
			a.mu.Unlock()
			// The Kubernetes bridge publishes its diagnostics on its own
			// goroutine, which readiness does not wait for (they never
			// block it): read /v1/status until they are there.
			var st statusView
			var body string
			var wrong []string
			for deadline := time.Now().Add(10 * time.Second); ; {
				var code int
				code, body = get(t, intro+"/v1/status")
				if code != 200 {
					t.Fatalf("/v1/status = %d %s", code, body)
				}
				st = decodeStatus(t, body)
				wrong = nil
				for name, want := range tt.want {
					i := slices.IndexFunc(st.Diagnostics, func(c Condition) bool { return c.Name == name })
					if i < 0 {
						wrong = append(wrong, fmt.Sprintf("no diagnostic %s in %s", name, body))
						continue
					}
					if c := st.Diagnostics[i]; c.OK != want.ok || !strings.Contains(c.Message, want.says) {
						wrong = append(wrong, fmt.Sprintf("%s = %v %q, want %v with %q", name, c.OK, c.Message, want.ok, want.says))
					}
				}
				if len(wrong) == 0 || time.Now().After(deadline) {
					break
				}
				time.Sleep(20 * time.Millisecond) // polling a published view
			}
			for _, w := range wrong {
				t.Error(w)
			}
			if !st.Ready {
				t.Errorf("not ready: Kubernetes diagnostics must not block readiness: %s", body)
			}
			if tt.kube != nil && (st.Kubernetes.Node != tt.kube.State().Node || !st.Kubernetes.Enabled) {
				t.Errorf("status kubernetes = %+v, want the layer's state", st.Kubernetes)
			}
		})
	}
}

func TestTheKubernetesLayerIsToldWhichInstanceToFind(t *testing.T) {
	w := newWorld(t)
	k := newFakeKube(KubeState{Reachable: true})
	n := w.node("i-node1", nil)
	n.kube = k
	n.start(t).waitReady(t)
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.inst != (Instance{ID: "i-node1", AvailabilityZone: "us-west-2a"}) {
		t.Errorf("instance = %+v, want i-node1 in us-west-2a", k.inst)
	}
}

var simUnauthorized = sim.Fault{ErrorRate: 1, Code: "UnauthorizedOperation"}

func decodeStatus(t *testing.T, body string) statusView {
	t.Helper()
	var st statusView
	if err := json.Unmarshal([]byte(body), &st); err != nil {
		t.Fatalf("/v1/status is not JSON: %v\n%s", err, body)
	}
	return st
}

// Issue 16: pods the API server binds to the node grow the pool before
// their Adds come, through the agent's Kubernetes bridge.
func TestPodsBoundToTheNodeGrowThePoolBeforeTheirAdds(t *testing.T) {
	w := newWorld(t)
	k := newFakeKube(KubeState{Reachable: true, Node: "n"})
	n := w.node("i-node1", nil)
	n.kube = k
	a := n.start(t)
	a.waitReady(t)
	// m5.large: 3 ENIs of 9 pod addresses; the free ones meet the warm
	// target.
	a.settle(t, func(st ipam.Stats) bool { return len(st.ENIs) == 1 && st.Free == 9 })
	var bound []ipam.Pod
	for i := range 20 {
		bound = append(bound, pod(i))
	}
	k.mu.Lock()
	k.scheduled = bound
	k.mu.Unlock()
	k.set(func(*KubeState) {}) // the layer's change callback
	st := a.settle(t, func(st ipam.Stats) bool { return len(st.ENIs) == 3 })
	if st.Assigned != 0 {
		t.Fatalf("%d addresses assigned with no Add made", st.Assigned)
	}
}
