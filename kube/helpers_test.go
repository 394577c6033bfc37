package kube

import (
	"context"
	"log/slog"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/vpcnet/vpcnet/agent"
	"github.com/vpcnet/vpcnet/internal/testlog"
)

// inst is the instance every test runs on.
var inst = agent.Instance{ID: "i-0abc", AvailabilityZone: "us-west-2a"}

const ourProviderID = "aws:///us-west-2a/i-0abc"

func newNode(name, providerID string, mods ...func(*corev1.Node)) *corev1.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID("uid-node-" + name), Labels: map[string]string{}, Annotations: map[string]string{}},
		Spec: corev1.NodeSpec{ProviderID: providerID}}
	for _, m := range mods {
		m(n)
	}
	return n
}

func labeled(k, v string) func(*corev1.Node) {
	return func(n *corev1.Node) { n.Labels[k] = v }
}

func annotated(k, v string) func(*corev1.Node) {
	return func(n *corev1.Node) { n.Annotations[k] = v }
}

func tainted(ts ...corev1.Taint) func(*corev1.Node) {
	return func(n *corev1.Node) { n.Spec.Taints = append(n.Spec.Taints, ts...) }
}

func internalDNS(name string) func(*corev1.Node) {
	return func(n *corev1.Node) {
		n.Status.Addresses = append(n.Status.Addresses, corev1.NodeAddress{Type: corev1.NodeInternalDNS, Address: name})
	}
}

func newPod(ns, name, node string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID("uid-pod-" + name)}, Spec: corev1.PodSpec{NodeName: node}}
}

func eniConfig(name, subnet string, groups ...string) *unstructured.Unstructured {
	spec := map[string]any{}
	if subnet != "" {
		spec["subnet"] = subnet
	}
	if len(groups) > 0 {
		gs := make([]any, len(groups))
		for i, g := range groups {
			gs[i] = g
		}
		spec["securityGroups"] = gs
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "crd.k8s.amazonaws.com/v1alpha1", "kind": "ENIConfig",
		"metadata": map[string]any{"name": name}, "spec": spec,
	}}
}

func newDynamic(objs ...runtime.Object) *dynamicfake.FakeDynamicClient {
	return dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{ENIConfigResource: "ENIConfigList"}, objs...)
}

// harness runs one Client against fake clients.
type harness struct {
	cs     *fake.Clientset
	dyn    *dynamicfake.FakeDynamicClient
	c      *Client
	cancel context.CancelFunc
	done   chan struct{}
}

// start runs a Client with o (clients filled in) until the test ends.
func start(t *testing.T, o Options, cs *fake.Clientset, dyn *dynamicfake.FakeDynamicClient) *harness {
	t.Helper()
	if dyn == nil {
		dyn = newDynamic()
	}
	o.Client, o.Dynamic = fakeCore{cs}, dyn
	if o.CustomNetwork {
		o.ENIConfigAnnotation, o.ENIConfigLabel = "k8s.amazonaws.com/eniConfig", "topology.kubernetes.io/zone"
	}
	if o.RetryInterval == 0 {
		o.RetryInterval = 20 * time.Millisecond
	}
	if o.ProbeInterval == 0 {
		o.ProbeInterval = 20 * time.Millisecond
	}
	o.Logger = testLogger(t)
	c, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	h := &harness{cs: cs, dyn: dyn, c: c, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(h.done)
		if err := c.Run(ctx, inst, func() {}); err != nil {
			t.Errorf("Run = %v, want nil", err)
		}
	}()
	t.Cleanup(h.stop)
	return h
}

func (h *harness) stop() {
	h.cancel()
	<-h.done
}

// waitFor polls the state until cond holds, and fails the test with the
// last state when it never does.
func (h *harness) waitFor(t *testing.T, what string, cond func(agent.KubeState) bool) agent.KubeState {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	var st agent.KubeState
	for time.Now().Before(deadline) {
		st = h.c.State()
		if cond(st) {
			return st
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("never %s; last state: %+v", what, st)
	return st
}

func nodeFound(st agent.KubeState) bool { return st.Node != "" }

// testLogger logs into the test until it ends.
func testLogger(t *testing.T) *slog.Logger { return testlog.New(t, slog.LevelDebug) }

// fakeCore is the fake clientset as the layer's Core.
type fakeCore struct{ cs *fake.Clientset }

func (f fakeCore) CoreV1() CoreV1                      { return f }
func (f fakeCore) Nodes() NodeClient                   { return f.cs.CoreV1().Nodes() }
func (f fakeCore) Pods(namespace string) PodClient     { return f.cs.CoreV1().Pods(namespace) }
func (f fakeCore) Events(namespace string) EventClient { return f.cs.CoreV1().Events(namespace) }

// IsWatchListSemanticsUnSupported: the fake's watch does not stream the
// initial list, as the fake clientset says of itself.
func (f fakeCore) IsWatchListSemanticsUnSupported() bool { return true }
