package integration

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/vpcnet/vpcnet/agent"
)

func TestOnlyThisNodesPodsAreWatched(t *testing.T) {
	t.Parallel()
	e := setup(t)
	inst := e.instance()
	me, other := e.name("ip-10-0-0-5"), e.name("ip-10-0-0-6")
	e.node(t, me, providerID(inst))
	e.node(t, other, providerID(e.instance()))
	e.pod(t, "mine-0", me)
	e.pod(t, "theirs-0", other)
	e.pod(t, "theirs-1", other)
	e.pod(t, "unscheduled-0", "")
	l := startLayer(t, e.agentConfig(t), inst, map[string]string{"MY_NODE_NAME": me}, nil)
	st := l.waitFor(t, "listed its pods", func(st agent.KubeState) bool { return st.Pods > 0 })
	if st.Pods != 1 {
		t.Fatalf("the layer holds %d pods, want this node's 1 of 4", st.Pods)
	}

	// The scheduler binds a pod to the other node, then one to this node.
	// One watch would deliver both in that order, so once this node's is
	// seen, the other's would have been counted too, were the watch not
	// scoped to this node.
	e.bind(t, e.pod(t, "theirs-2", ""), other)
	e.bind(t, e.pod(t, "mine-1", ""), me)
	st = l.waitFor(t, "saw the pod bound to it", func(st agent.KubeState) bool { return st.Pods > 1 })
	if st.Pods != 2 {
		t.Fatalf("the layer holds %d pods, want this node's 2", st.Pods)
	}
	// Deleted at once: no kubelet runs to finish a graceful deletion.
	if err := e.admin.CoreV1().Pods(e.ns).Delete(t.Context(), "mine-0", metav1.DeleteOptions{GracePeriodSeconds: new(int64(0))}); err != nil {
		t.Fatal(err)
	}
	l.waitFor(t, "saw its pod deleted", func(st agent.KubeState) bool { return st.Pods == 1 })

	// What the API server was asked for: this node's pods and this Node,
	// never all of them.
	want := map[string]string{"pods": "spec.nodeName=" + me, "nodes": "metadata.name=" + me}
	seen := map[string]bool{}
	for _, r := range l.reqs.all() {
		verb, resource, _ := strings.Cut(r.perm, " ")
		sel, ok := want[resource]
		if !ok || verb != "list" && verb != "watch" {
			continue
		}
		seen[resource] = true
		if got := r.url.Query().Get("fieldSelector"); got != sel {
			t.Errorf("%s %s with field selector %q, want %q: %s", verb, resource, got, sel, r.url)
		}
	}
	for resource := range want {
		if !seen[resource] {
			t.Errorf("no list or watch of %s", resource)
		}
	}
}

// bind binds a pod to a node, as the scheduler does.
func (e *env) bind(t *testing.T, p *corev1.Pod, node string) {
	t.Helper()
	b := &corev1.Binding{ObjectMeta: metav1.ObjectMeta{Name: p.Name}, Target: corev1.ObjectReference{Kind: "Node", Name: node}}
	if err := e.admin.CoreV1().Pods(p.Namespace).Bind(t.Context(), b, metav1.CreateOptions{}); err != nil {
		t.Fatalf("bind pod %s/%s to %s: %v", p.Namespace, p.Name, node, err)
	}
}
