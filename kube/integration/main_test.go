package integration

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/vpcnet/vpcnet/agent"
	"github.com/vpcnet/vpcnet/deploy"
	"github.com/vpcnet/vpcnet/internal/kubetest"
	"github.com/vpcnet/vpcnet/kube"
)

// shared is the one apiserver of this test binary. Tests share it, each in
// its own namespace and with cluster-scoped objects (Nodes, ENIConfigs,
// ClusterRoles) named with its own suffix.
var shared kubetest.Shared

func TestMain(m *testing.M) { os.Exit(shared.Run(m)) }

// env is one test's view of the shared cluster, with the manifests
// applied.
type env struct {
	c     *kubetest.Cluster
	admin kubernetes.Interface
	dyn   dynamic.Interface // admin
	// ns is the test's namespace, for its pods and ServiceAccounts; id
	// makes its cluster-scoped names unique.
	ns, id string
}

// setup applies deploy/vpcnet.yaml by server-side apply, as `kubectl
// apply --server-side` would, and returns the test's environment.
func setup(t *testing.T) *env {
	t.Helper()
	c := shared.Cluster(t)
	if err := c.Apply(t.Context(), deploy.Manifests()); err != nil {
		t.Fatalf("apply deploy/vpcnet.yaml: %v", err)
	}
	admin, err := c.AdminClient()
	if err != nil {
		t.Fatal(err)
	}
	dyn, err := dynamic.NewForConfig(c.AdminConfig())
	if err != nil {
		t.Fatal(err)
	}
	return &env{c: c, admin: admin, dyn: dyn, ns: c.TestNamespace(t), id: fmt.Sprintf("%06x", rand.Uint32()>>8)}
}

// name makes a cluster-scoped name unique to the test.
func (e *env) name(base string) string { return base + "-" + e.id }

// instance is an EC2 instance unique to the test, so the providerID
// search never finds another test's Node.
func (e *env) instance() agent.Instance {
	return agent.Instance{ID: "i-0" + e.id + fmt.Sprintf("%04x", rand.Uint32()>>16), AvailabilityZone: "us-west-2a"}
}

// agentConfig authenticates as the ServiceAccount the DaemonSet in
// deploy/vpcnet.yaml runs as, with a token from the TokenRequest API, as
// the agent's pod gets one.
func (e *env) agentConfig(t *testing.T) *rest.Config {
	t.Helper()
	ds := manifestObject[appsv1.DaemonSet](t, "DaemonSet", "vpcnet")
	sa := ds.Spec.Template.Spec.ServiceAccountName
	if sa == "" {
		t.Fatal("the DaemonSet in deploy/vpcnet.yaml names no ServiceAccount: it would run as default")
	}
	rc, err := e.c.ServiceAccountConfig(t.Context(), ds.Namespace, sa)
	if err != nil {
		t.Fatal(err)
	}
	return rc
}

// manifestObject decodes the object of kind and name in deploy/vpcnet.yaml.
func manifestObject[T any](t *testing.T, kind, name string) *T {
	t.Helper()
	objs, err := kubetest.Decode(deploy.Manifests())
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range objs {
		if o.GetKind() == kind && o.GetName() == name {
			out := new(T)
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, out); err != nil {
				t.Fatalf("decode %s %s: %v", kind, name, err)
			}
			return out
		}
	}
	t.Fatalf("deploy/vpcnet.yaml has no %s %s", kind, name)
	return nil
}

// node is a Node as kubelet would register it.
func (e *env) node(t *testing.T, name, providerID string, mods ...func(*corev1.Node)) *corev1.Node {
	t.Helper()
	n := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{}, Annotations: map[string]string{}},
		Spec:       corev1.NodeSpec{ProviderID: providerID},
	}
	for _, m := range mods {
		m(n)
	}
	out, err := e.admin.CoreV1().Nodes().Create(t.Context(), n, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create Node %s: %v", name, err)
	}
	return out
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

// pod creates a pod in the test's namespace, bound to node as the
// scheduler would bind it ("" leaves it unscheduled).
func (e *env) pod(t *testing.T, name, node string) *corev1.Pod {
	t.Helper()
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: e.ns},
		Spec: corev1.PodSpec{
			NodeName:   node,
			Containers: []corev1.Container{{Name: "app", Image: "registry.example/app:1"}},
		},
	}
	out, err := e.admin.CoreV1().Pods(e.ns).Create(t.Context(), p, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create pod %s/%s: %v", e.ns, name, err)
	}
	return out
}

// eniConfig creates an ENIConfig as an operator would.
func (e *env) eniConfig(t *testing.T, name, subnet string, groups ...string) {
	t.Helper()
	if _, err := e.dyn.Resource(kube.ENIConfigResource).Create(t.Context(), eniConfigObject(name, subnet, groups...), metav1.CreateOptions{}); err != nil {
		t.Fatalf("create ENIConfig %s: %v", name, err)
	}
}

func eniConfigObject(name, subnet string, groups ...string) *unstructured.Unstructured {
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

// taintKeys reads the Node's taints as key:effect.
func (e *env) taintKeys(t *testing.T, node string) []string {
	t.Helper()
	n, err := e.admin.CoreV1().Nodes().Get(context.Background(), node, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return taintKeys(n)
}

func taintKeys(n *corev1.Node) []string {
	var keys []string
	for _, tt := range n.Spec.Taints {
		keys = append(keys, tt.Key+":"+string(tt.Effect))
	}
	return keys
}

// missingWords says which of words s lacks.
func missingWords(s string, words ...string) []string {
	var missing []string
	for _, w := range words {
		if !strings.Contains(s, w) {
			missing = append(missing, w)
		}
	}
	return missing
}
