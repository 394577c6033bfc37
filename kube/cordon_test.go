package kube

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/vpcnet/vpcnet/agent"
)

// Cordoning is seen as aws-node sees it: by the NoSchedule taint the node
// lifecycle controller adds, followed as it comes and goes.
func TestACordonedNodeIsReportedFromItsUnschedulableTaint(t *testing.T) {
	unsched := corev1.Taint{Key: corev1.TaintNodeUnschedulable, Effect: corev1.TaintEffectNoSchedule}
	for _, tc := range []struct {
		name   string
		taints []corev1.Taint
		want   bool
	}{
		{"no taint", nil, false},
		{"cordoned", []corev1.Taint{unsched}, true},
		{"same key, another effect", []corev1.Taint{{Key: corev1.TaintNodeUnschedulable, Effect: corev1.TaintEffectNoExecute}}, false},
		{"another NoSchedule taint", []corev1.Taint{{Key: "dedicated", Value: "gpu", Effect: corev1.TaintEffectNoSchedule}}, false},
	} {
		if got := cordoned(newNode("n", ourProviderID, tainted(tc.taints...))); got != tc.want {
			t.Errorf("%s: cordoned = %t, want %t", tc.name, got, tc.want)
		}
	}

	cs := fake.NewClientset(newNode("n", ourProviderID))
	h := start(t, Options{NodeName: "n"}, cs, nil)
	h.waitFor(t, "find the Node", func(st agent.KubeState) bool { return st.Node == "n" && !st.Cordoned })
	setTaints := func(ts ...corev1.Taint) {
		n, err := cs.CoreV1().Nodes().Get(context.Background(), "n", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		n.Spec.Taints = ts
		if _, err := cs.CoreV1().Nodes().Update(context.Background(), n, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	setTaints(unsched)
	h.waitFor(t, "see the cordon", func(st agent.KubeState) bool { return st.Cordoned })
	setTaints()
	h.waitFor(t, "see the uncordon", func(st agent.KubeState) bool { return !st.Cordoned })
}
