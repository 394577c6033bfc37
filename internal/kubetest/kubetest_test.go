package kubetest

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

var kube Shared

func TestMain(m *testing.M) { os.Exit(kube.Run(m)) }

func clientset(t *testing.T, cfg *rest.Config) kubernetes.Interface {
	t.Helper()
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

func TestAdminCreatesNamespace(t *testing.T) {
	c := kube.Cluster(t)
	ctx := t.Context()
	name := c.TestNamespace(t)
	admin := clientset(t, c.AdminConfig())
	ns, err := admin.CoreV1().Namespaces().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get the namespace just created: %v", err)
	}
	if ns.Status.Phase != corev1.NamespaceActive {
		t.Errorf("namespace phase = %q, want Active", ns.Status.Phase)
	}
	if _, err := admin.CoreV1().ServiceAccounts(name).Get(ctx, "default", metav1.GetOptions{}); err != nil {
		t.Errorf("CreateNamespace made no default service account: %v", err)
	}
}

// Manifests with NAMESPACE standing for the test's namespace.
const nodeReaderSA = `
apiVersion: v1
kind: ServiceAccount
metadata:
  name: node-reader
  namespace: NAMESPACE
`

const nodeReaderRBAC = `
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: kubetest-list-nodes-NAMESPACE
rules:
- apiGroups: [""]
  resources: [nodes]
  verbs: [list]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: kubetest-list-nodes-NAMESPACE
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: ClusterRole
  name: kubetest-list-nodes-NAMESPACE
subjects:
- kind: ServiceAccount
  name: node-reader
  namespace: NAMESPACE
`

func TestServiceAccountIsAuthorizedByRBAC(t *testing.T) {
	c := kube.Cluster(t)
	ctx := t.Context()
	ns := c.TestNamespace(t)
	inNamespace := func(manifest string) []byte { return []byte(strings.ReplaceAll(manifest, "NAMESPACE", ns)) }
	if err := c.Apply(ctx, inNamespace(nodeReaderSA)); err != nil {
		t.Fatal(err)
	}
	cfg, err := c.ServiceAccountConfig(ctx, ns, "node-reader")
	if err != nil {
		t.Fatal(err)
	}
	sa := clientset(t, cfg)

	review, err := sa.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("self subject review: %v", err)
	}
	if got, want := review.Status.UserInfo.Username, "system:serviceaccount:"+ns+":node-reader"; got != want {
		t.Fatalf("service account config authenticates as %q, want %q", got, want)
	}

	_, err = sa.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	assertForbidden(t, err, "list", "nodes")

	if err := c.Apply(ctx, inNamespace(nodeReaderRBAC)); err != nil {
		t.Fatal(err)
	}
	// The RBAC authorizer learns of the binding through a watch: allow it
	// a moment.
	err = wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
		_, err := sa.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		return err == nil, nil
	})
	if err != nil {
		_, listErr := sa.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		t.Fatalf("list nodes after binding a role that allows it: %v", listErr)
	}
	// The role grants list only: get is still refused, by name.
	_, err = sa.CoreV1().Nodes().Get(ctx, "any-node", metav1.GetOptions{})
	assertForbidden(t, err, "get", "nodes")
}

func assertForbidden(t *testing.T, err error, verb, resource string) {
	t.Helper()
	if !apierrors.IsForbidden(err) {
		t.Fatalf("%s %s: got error %v, want Forbidden", verb, resource, err)
	}
	for _, want := range []string{"cannot " + verb, `resource "` + resource + `"`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("Forbidden error %q does not say %q", err, want)
		}
	}
}

func TestServiceAccountConfigNamesMissingAccount(t *testing.T) {
	c := kube.Cluster(t)
	_, err := c.ServiceAccountConfig(t.Context(), "default", "no-such-account")
	if err == nil || !strings.Contains(err.Error(), "default/no-such-account: it does not exist") {
		t.Fatalf("ServiceAccountConfig for a missing account: got %v, want an error saying it does not exist", err)
	}
}

// The custom resource comes before its CRD: Apply must order them and wait
// for the CRD to be served.
const widgetManifests = `
apiVersion: kubetest.vpcnet.io/v1
kind: Widget
metadata:
  name: first
  namespace: widgets
spec:
  size: 3
---
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.kubetest.vpcnet.io
spec:
  group: kubetest.vpcnet.io
  scope: Namespaced
  names: {plural: widgets, singular: widget, kind: Widget, listKind: WidgetList}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              size: {type: integer}
---
apiVersion: v1
kind: Namespace
metadata:
  name: widgets
`

func TestApplyServesCustomResources(t *testing.T) {
	c := kube.Cluster(t)
	ctx := t.Context()
	if err := c.Apply(ctx, []byte(widgetManifests)); err != nil {
		t.Fatal(err)
	}
	dyn, err := dynamic.NewForConfig(c.AdminConfig())
	if err != nil {
		t.Fatal(err)
	}
	widgets := dyn.Resource(schema.GroupVersionResource{Group: "kubetest.vpcnet.io", Version: "v1", Resource: "widgets"}).Namespace("widgets")
	w, err := widgets.Get(ctx, "first", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get the applied widget: %v", err)
	}
	if size := w.Object["spec"].(map[string]any)["size"]; size != int64(3) {
		t.Errorf("widget spec.size = %v, want 3", size)
	}

	// Applying again changes the object in place.
	if err := c.Apply(ctx, []byte(strings.Replace(widgetManifests, "size: 3", "size: 5", 1))); err != nil {
		t.Fatalf("re-apply: %v", err)
	}
	w, err = widgets.Get(ctx, "first", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if size := w.Object["spec"].(map[string]any)["size"]; size != int64(5) {
		t.Errorf("after re-apply widget spec.size = %v, want 5", size)
	}
}

func TestApplyAsServiceAccountNeedsPatch(t *testing.T) {
	c := kube.Cluster(t)
	ctx := t.Context()
	ns := c.TestNamespace(t)
	cfg, err := c.ServiceAccountConfig(ctx, ns, "default")
	if err != nil {
		t.Fatal(err)
	}
	cm := `{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "settings", "namespace": "` + ns + `"}}`
	err = Apply(ctx, cfg, []byte(cm))
	assertForbidden(t, err, "patch", "configmaps")
	if !strings.Contains(err.Error(), "apply v1 ConfigMap "+ns+"/settings") {
		t.Errorf("Apply error %q does not name the object", err)
	}
}

func TestApplyRejectsUnknownKind(t *testing.T) {
	c := kube.Cluster(t)
	err := c.Apply(t.Context(), []byte("apiVersion: nowhere.vpcnet.io/v1\nkind: Gadget\nmetadata: {name: g}\n"))
	if err == nil || !strings.Contains(err.Error(), "does not serve nowhere.vpcnet.io/v1, Kind=Gadget") {
		t.Fatalf("apply of a kind nobody serves: got %v, want an error naming the kind", err)
	}
}

// BenchmarkStart measures a cluster's start to ready, and its stop.
func BenchmarkStart(b *testing.B) {
	opts, ok, err := OptionsFromEnv()
	if !ok || err != nil {
		b.Skipf("needs %s and etcd: %v", EnvAPIServer, err)
	}
	for b.Loop() {
		c, err := New(b.Context(), opts)
		if err != nil {
			b.Fatal(err)
		}
		if err := c.Stop(); err != nil {
			b.Fatal(err)
		}
	}
}
