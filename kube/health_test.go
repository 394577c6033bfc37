package kube

import (
	"errors"
	"strings"
	"sync/atomic"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/vpcnet/vpcnet/agent"
)

func TestAnUnreachableAPIServerIsReportedAndItsReturnNoticed(t *testing.T) {
	cs := fake.NewClientset(newNode("n", ourProviderID))
	var down atomic.Bool
	down.Store(true)
	refuse := func(k8stesting.Action) (bool, runtime.Object, error) {
		if down.Load() {
			return true, nil, errors.New("dial tcp 10.96.0.1:443: connect: connection refused")
		}
		return false, nil, nil
	}
	cs.PrependReactor("*", "*", refuse)
	h := start(t, Options{NodeName: "n", Source: "in-cluster service account"}, cs, nil)

	st := h.waitFor(t, "reported the API server unreachable", func(st agent.KubeState) bool { return !st.Reachable && !st.Since.IsZero() })
	for _, w := range []string{"get Node n", "connection refused"} {
		if !strings.Contains(st.LastError, w) {
			t.Errorf("last error %q does not say %q", st.LastError, w)
		}
	}
	if !strings.Contains(st.NodeProblem, "connection refused") {
		t.Errorf("node problem %q does not say why the Node is unknown", st.NodeProblem)
	}
	since := st.Since

	down.Store(false)
	st = h.waitFor(t, "noticed the API server back", func(st agent.KubeState) bool { return st.Reachable && st.Node == "n" })
	if !st.Since.After(since) {
		t.Errorf("since = %v, not moved on from %v when the API server came back", st.Since, since)
	}
}

func TestAMissingPermissionIsAnAnswerThatNamesTheVerb(t *testing.T) {
	cs := fake.NewClientset(newNode("n", ourProviderID))
	cs.PrependReactor("list", "pods", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: "pods"}, "",
			errors.New(`User "system:serviceaccount:kube-system:vpcnet" cannot list resource "pods" in API group "" at the cluster scope`))
	})
	h := start(t, Options{NodeName: "n"}, cs, nil)
	st := h.waitFor(t, "reported the refusal", func(st agent.KubeState) bool { return strings.Contains(st.LastError, "forbidden") })
	if !st.Reachable {
		t.Error("a refusal is an answer: the API server is reachable")
	}
	for _, w := range []string{"watch pods on n", `cannot list resource "pods"`, "ClusterRole vpcnet in deploy/vpcnet.yaml"} {
		if !strings.Contains(st.LastError, w) {
			t.Errorf("last error %q does not say %q", st.LastError, w)
		}
	}
}
