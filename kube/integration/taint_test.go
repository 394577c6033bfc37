package integration

import (
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/vpcnet/vpcnet/agent"
	"github.com/vpcnet/vpcnet/kube"
)

func TestTheStartupTaintIsRemovedOnlyOnceTheAgentIsReady(t *testing.T) {
	t.Parallel()
	e := setup(t)
	inst := e.instance()
	me := e.name("ip-10-0-0-5")
	someoneElse := corev1.Taint{Key: "dedicated", Value: "gpu", Effect: corev1.TaintEffectNoSchedule}
	ourNoExecute := corev1.Taint{Key: startupTaint, Effect: corev1.TaintEffectNoExecute}
	// The API server adds node.kubernetes.io/not-ready too, as it does to
	// every new Node until kubelet reports it ready.
	registered := taintKeys(e.node(t, me, providerID(inst), tainted(ourTaint, someoneElse, ourNoExecute)))
	var others []string
	for _, k := range registered {
		if !strings.HasPrefix(k, startupTaint+":") {
			others = append(others, k)
		}
	}
	l := startLayer(t, e.agentConfig(t), inst, map[string]string{"MY_NODE_NAME": me, "VPCNET_STARTUP_TAINT": startupTaint}, nil)

	st := l.waitFor(t, "saw the taint", func(st agent.KubeState) bool { return strings.Contains(st.StartupTaint, "until the agent is ready") })
	if st.TaintRemoved {
		t.Fatalf("taint reported removed while the agent is not ready: %s", st.StartupTaint)
	}
	if got := e.taintKeys(t, me); !slices.Equal(got, registered) {
		t.Fatalf("before readiness the Node's taints are %v, want all of %v", got, registered)
	}
	for _, r := range l.reqs.all() {
		if strings.HasPrefix(r.perm, "patch nodes") {
			t.Fatalf("the Node was patched before the agent was ready: %s", r.url)
		}
	}

	l.SetReady(true)
	st = l.waitFor(t, "removed the taint", func(st agent.KubeState) bool { return st.TaintRemoved })
	if !strings.Contains(st.StartupTaint, "removed from Node "+me) {
		t.Errorf("taint state %q does not say it was removed from %s", st.StartupTaint, me)
	}
	if got := e.taintKeys(t, me); !slices.Equal(got, others) || !slices.Contains(got, "dedicated:NoSchedule") {
		t.Errorf("after readiness the Node's taints are %v, want only the others %v", got, others)
	}
	node, err := e.admin.CoreV1().Nodes().Get(t.Context(), me, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(node.ManagedFields, func(m metav1.ManagedFieldsEntry) bool { return m.Manager == kube.Component }) {
		t.Errorf("the Node's managed fields do not name %s as the writer of its taints: %+v", kube.Component, node.ManagedFields)
	}
}
