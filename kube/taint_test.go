package kube

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/vpcnet/vpcnet/agent"
)

const startupTaint = "vpcnet.io/agent-not-ready"

var (
	ours        = corev1.Taint{Key: startupTaint, Effect: corev1.TaintEffectNoSchedule}
	oursExec    = corev1.Taint{Key: startupTaint, Effect: corev1.TaintEffectNoExecute}
	someoneElse = corev1.Taint{Key: "dedicated", Value: "gpu", Effect: corev1.TaintEffectNoSchedule}
)

func taintKeys(t *testing.T, h *harness, node string) []string {
	t.Helper()
	n, err := h.cs.CoreV1().Nodes().Get(context.Background(), node, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, tt := range n.Spec.Taints {
		keys = append(keys, tt.Key+":"+string(tt.Effect))
	}
	return keys
}

func patches(actions []k8stesting.Action) int {
	n := 0
	for _, a := range actions {
		if a.GetVerb() == "patch" && a.GetResource().Resource == "nodes" {
			n++
		}
	}
	return n
}

func TestTheStartupTaintIsRemovedOnlyOnceTheAgentIsReadyAndNeverAddedBack(t *testing.T) {
	h := start(t, Options{NodeName: "n", StartupTaint: startupTaint}, fake.NewClientset(newNode("n", ourProviderID, tainted(ours, someoneElse, oursExec))), nil)
	st := h.waitFor(t, "saw the taint", func(st agent.KubeState) bool { return strings.Contains(st.StartupTaint, "until the agent is ready") })
	if st.TaintRemoved {
		t.Fatalf("taint reported removed while the agent is not ready: %s", st.StartupTaint)
	}
	// Not ready, and told so again: the taint stays.
	h.c.SetReady(false)
	if err := h.c.removeTaint(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := taintKeys(t, h, "n"); len(got) != 3 || patches(h.cs.Actions()) != 0 {
		t.Fatalf("before readiness: taints %v after %d patches, want all 3 untouched", got, patches(h.cs.Actions()))
	}

	h.c.SetReady(true)
	st = h.waitFor(t, "removed the taint", func(st agent.KubeState) bool { return st.TaintRemoved })
	if !strings.Contains(st.StartupTaint, "removed from Node n") {
		t.Errorf("state says %q", st.StartupTaint)
	}
	want := []string{"dedicated:NoSchedule"}
	if got := taintKeys(t, h, "n"); !slices.Equal(got, want) {
		t.Fatalf("taints after readiness = %v, want only someone else's %v", got, want)
	}

	// Unready again: nothing is added back.
	before := len(h.cs.Actions())
	h.c.SetReady(false)
	if err := h.c.removeTaint(context.Background()); err != nil { // what the worker does on the wake
		t.Fatal(err)
	}
	for _, a := range h.cs.Actions()[before:] {
		if v := a.GetVerb(); a.GetResource().Resource == "nodes" && (v == "patch" || v == "update") {
			t.Errorf("Node written after the agent turned unready: %s", v)
		}
	}
	if got := taintKeys(t, h, "n"); !slices.Equal(got, want) {
		t.Fatalf("taints after unreadiness = %v, want %v", got, want)
	}
}

func TestATaintChangedMeanwhileIsNotLost(t *testing.T) {
	// Between the agent's read and its patch, someone adds a taint: the
	// patch's test fails, the agent reads again, and both survive.
	cs := fake.NewClientset(newNode("n", ourProviderID, tainted(ours)))
	raced := false
	cs.PrependReactor("patch", "nodes", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if raced {
			return false, nil, nil
		}
		raced = true
		n, err := cs.Tracker().Get(a.GetResource(), "", "n")
		if err != nil {
			return true, nil, err
		}
		node := n.(*corev1.Node).DeepCopy()
		node.Spec.Taints = append(node.Spec.Taints, someoneElse)
		if err := cs.Tracker().Update(a.GetResource(), node, ""); err != nil {
			return true, nil, err
		}
		return false, nil, nil // the real patch runs against the changed Node
	})
	h := start(t, Options{NodeName: "n", StartupTaint: startupTaint, RetryInterval: 10 * time.Millisecond}, cs, nil)
	h.waitFor(t, "found the Node", nodeFound)
	h.c.SetReady(true)
	h.waitFor(t, "removed the taint", func(st agent.KubeState) bool { return st.TaintRemoved })
	if got := taintKeys(t, h, "n"); !slices.Equal(got, []string{"dedicated:NoSchedule"}) {
		t.Fatalf("taints = %v, want the one added meanwhile kept and ours gone", got)
	}
	if patches(h.cs.Actions()) < 2 {
		t.Errorf("%d patches: the first, against stale taints, should have failed and been retried", patches(h.cs.Actions()))
	}
}

func TestStartupTaintStates(t *testing.T) {
	tests := []struct {
		name        string
		key         string
		node        *corev1.Node
		wantRemoved bool
		want        string
	}{
		{"none configured", "", newNode("n", ourProviderID), true, "none: VPCNET_STARTUP_TAINT is empty"},
		{"not on the Node", startupTaint, newNode("n", ourProviderID), true, "vpcnet.io/agent-not-ready: not on Node n"},
		{"on the Node", startupTaint, newNode("n", ourProviderID, tainted(ours)), false, "on Node n until the agent is ready"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := start(t, Options{NodeName: "n", StartupTaint: tt.key}, fake.NewClientset(tt.node), nil)
			st := h.waitFor(t, "found the Node", func(st agent.KubeState) bool { return st.Node != "" && !strings.Contains(st.StartupTaint, "waiting") })
			if st.TaintRemoved != tt.wantRemoved || !strings.Contains(st.StartupTaint, tt.want) {
				t.Errorf("taint state %q (removed %v), want %q (removed %v)", st.StartupTaint, st.TaintRemoved, tt.want, tt.wantRemoved)
			}
		})
	}
}

// TestTheTaintIsNotCalledAbsentWhileTheAgentsOwnPatchIsInFlight: the
// watch can deliver the patched Node before the patch's answer comes
// back; the state then must not say the taint was simply never there.
func TestTheTaintIsNotCalledAbsentWhileTheAgentsOwnPatchIsInFlight(t *testing.T) {
	cs := fake.NewClientset(newNode("n", ourProviderID, tainted(ours, someoneElse)))
	var h *harness
	var during agent.KubeState
	cs.PrependReactor("patch", "nodes", func(a k8stesting.Action) (bool, runtime.Object, error) {
		// Apply the change as the API server would, let the watch carry
		// it to the client, and only then answer.
		n, err := cs.Tracker().Get(corev1.SchemeGroupVersion.WithResource("nodes"), "", "n")
		if err != nil {
			return true, nil, err
		}
		node := n.(*corev1.Node).DeepCopy()
		node.Spec.Taints = []corev1.Taint{someoneElse}
		if err := cs.Tracker().Update(corev1.SchemeGroupVersion.WithResource("nodes"), node, ""); err != nil {
			return true, nil, err
		}
		during = h.waitFor(t, "see the patched Node", func(st agent.KubeState) bool {
			h.c.mu.Lock()
			defer h.c.mu.Unlock()
			return h.c.node != nil && !hasTaint(h.c.node.Spec.Taints, startupTaint)
		})
		return true, node, nil
	})
	h = start(t, Options{NodeName: "n", StartupTaint: startupTaint}, cs, nil)
	h.waitFor(t, "saw the taint", func(st agent.KubeState) bool { return strings.Contains(st.StartupTaint, "until the agent is ready") })
	h.c.SetReady(true)
	st := h.waitFor(t, "removed the taint", func(st agent.KubeState) bool { return st.TaintRemoved })
	if during.TaintRemoved && !strings.Contains(during.StartupTaint, "removed from Node n") {
		t.Errorf("while the patch was in flight the state said %q (removed: %v), want it still removing", during.StartupTaint, during.TaintRemoved)
	}
	if !strings.Contains(st.StartupTaint, "removed from Node n") {
		t.Errorf("after the patch the state says %q", st.StartupTaint)
	}
}
