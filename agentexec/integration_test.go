package agentexec

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	authzv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/vpcnet/vpcnet/agentexec/agentexectest"
	"github.com/vpcnet/vpcnet/deploy"
	"github.com/vpcnet/vpcnet/internal/kubetest"
)

// kube is this package's API server: real etcd and kube-apiserver with
// RBAC, no kubelet (agentexectest.Kubelet stands in for the exec endpoint).
var kube kubetest.Shared

func TestMain(m *testing.M) { os.Exit(kube.Run(m)) }

// env is one test's cluster: the test's namespace plays the agent's
// (kube-system in deploy/), with an operator ServiceAccount bound to the
// ClusterRole vpcnet-operator there, as deploy/README.md tells operators.
type env struct {
	c        *kubetest.Cluster
	admin    kubernetes.Interface
	ns, id   string
	operator *rest.Config
	// reqs are the operator's requests as "METHOD PATH".
	reqs *requestLog
}

func setup(t *testing.T) *env {
	t.Helper()
	c := kube.Cluster(t)
	if err := c.Apply(t.Context(), deploy.Manifests()); err != nil {
		t.Fatalf("apply deploy/vpcnet.yaml: %v", err)
	}
	admin, err := c.AdminClient()
	if err != nil {
		t.Fatal(err)
	}
	e := &env{c: c, admin: admin, ns: c.TestNamespace(t), id: fmt.Sprintf("%06x", rand.Uint32()>>8), reqs: &requestLog{}}
	ctx := t.Context()
	if _, err := admin.CoreV1().ServiceAccounts(e.ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "oncall"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.RbacV1().RoleBindings(e.ns).Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "vpcnet-operators"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "vpcnet-operator"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "oncall", Namespace: e.ns}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	rc, err := c.ServiceAccountConfig(ctx, e.ns, "oncall")
	if err != nil {
		t.Fatal(err)
	}
	rc.Wrap(e.reqs.wrap)
	e.operator = rc
	return e
}

// requestLog records the requests a client makes.
type requestLog struct {
	mu   sync.Mutex // guards list
	list []string
}

func (l *requestLog) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripFunc(func(r *http.Request) (*http.Response, error) {
		l.mu.Lock()
		l.list = append(l.list, r.Method+" "+r.URL.Path)
		l.mu.Unlock()
		return rt.RoundTrip(r)
	})
}

func (l *requestLog) all() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.list...)
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// node registers a Node whose kubelet is kl (nil: a kubelet at an address
// where nothing listens).
func (e *env) node(t *testing.T, base string, kl *agentexectest.Kubelet) string {
	t.Helper()
	name := base + "-" + e.id
	n, err := e.admin.CoreV1().Nodes().Create(t.Context(), &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	port := int32(1) // nothing listens on port 1
	if kl != nil {
		port = kl.Port(t)
	}
	n.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "127.0.0.1"}}
	n.Status.DaemonEndpoints.KubeletEndpoint.Port = port
	if _, err := e.admin.CoreV1().Nodes().UpdateStatus(t.Context(), n, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	return name
}

// pod creates a pod bound to node, labelled as the DaemonSet's when agent.
func (e *env) pod(t *testing.T, name, node string, agent bool, phase corev1.PodPhase) *corev1.Pod {
	t.Helper()
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: e.ns, Labels: map[string]string{}},
		Spec:       corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: Container, Image: "ghcr.io/vpcnet/vpcnet:test"}}},
	}
	if agent {
		p.Labels = agentLabels(t)
	}
	out, err := e.admin.CoreV1().Pods(e.ns).Create(t.Context(), p, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if phase != "" {
		out.Status.Phase = phase
		if out, err = e.admin.CoreV1().Pods(e.ns).UpdateStatus(t.Context(), out, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// agentLabels are the labels deploy/vpcnet.yaml's DaemonSet gives its pods.
func agentLabels(t *testing.T) map[string]string {
	t.Helper()
	ds := manifestObject[appsv1.DaemonSet](t, "DaemonSet", "vpcnet")
	return ds.Spec.Template.Labels
}

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
				t.Fatal(err)
			}
			return out
		}
	}
	t.Fatalf("deploy/vpcnet.yaml has no %s %s", kind, name)
	return nil
}

func TestTheConstantsMatchTheDaemonSetAsDeployed(t *testing.T) {
	ds := manifestObject[appsv1.DaemonSet](t, "DaemonSet", "vpcnet")
	if ds.Namespace != Namespace {
		t.Errorf("the DaemonSet runs in %s, agentexec looks in %s", ds.Namespace, Namespace)
	}
	sel := metav1.FormatLabelSelector(ds.Spec.Selector)
	if sel != Selector {
		t.Errorf("the DaemonSet selects %s, agentexec %s", sel, Selector)
	}
	if !slices.ContainsFunc(ds.Spec.Template.Spec.Containers, func(c corev1.Container) bool { return c.Name == Container }) {
		t.Errorf("the DaemonSet has no container %s", Container)
	}
}

func TestTheAgentPodIsFoundByNode(t *testing.T) {
	e := setup(t)
	n1, n2 := e.node(t, "n1", nil), e.node(t, "n2", nil)
	cs, err := kubernetes.NewForConfig(e.operator)
	if err != nil {
		t.Fatal(err)
	}
	e.pod(t, "app-on-n1", n1, false, corev1.PodRunning)
	e.pod(t, "vpcnet-old", n1, true, corev1.PodFailed)
	e.pod(t, "vpcnet-n1", n1, true, corev1.PodRunning)
	e.pod(t, "vpcnet-n2", n2, true, corev1.PodRunning)
	tests := []struct {
		node    string
		want    string
		wantErr string
	}{
		{n1, "vpcnet-n1", ""},
		{n2, "vpcnet-n2", ""},
		{"n3-" + e.id, "", `no vpcnet agent pod on node "n3-` + e.id + `"`},
	}
	for _, tt := range tests {
		t.Run(tt.node, func(t *testing.T) {
			p, err := FindAgentPod(t.Context(), cs, e.ns, tt.node)
			if tt.wantErr != "" {
				var none *NoAgentError
				if !errors.As(err, &none) || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("FindAgentPod = %v, want a NoAgentError saying %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if p.Name != tt.want {
				t.Errorf("found %s, want %s", p.Name, tt.want)
			}
		})
	}
}

func TestExecRunsVpcnetctlInTheAgentsContainerThroughTheAPIServer(t *testing.T) {
	tests := []struct {
		name     string
		stdout   string
		code     int
		wantCode int
	}{
		{"ready", "ready: yes\n", 0, 0},
		{"not ready: the remote exit code comes back", "ready: no\n", 1, 1},
		{"agent unreachable on the node", "", 3, 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := setup(t)
			kl := agentexectest.NewKubelet(t, tt.stdout, tt.code)
			node := e.node(t, "n1", kl)
			pod := e.pod(t, "vpcnet-abcde", node, true, corev1.PodRunning)
			cs, err := kubernetes.NewForConfig(e.operator)
			if err != nil {
				t.Fatal(err)
			}
			found, err := FindAgentPod(t.Context(), cs, e.ns, node)
			if err != nil {
				t.Fatal(err)
			}
			var stdout, stderr bytes.Buffer
			code, err := Exec(t.Context(), e.operator, cs, found, Container, []string{"vpcnetctl", "status", "-o", "json"}, &stdout, &stderr)
			if err != nil {
				t.Fatalf("Exec: %v\nstderr: %s\napiserver log:\n%s", err, &stderr, e.c.LogTail(20))
			}
			if code != tt.wantCode || stdout.String() != tt.stdout {
				t.Errorf("exit %d, stdout %q; want %d, %q", code, &stdout, tt.wantCode, tt.stdout)
			}
			want := []string{e.ns + "/" + pod.Name + "/" + Container + ": vpcnetctl status -o json"}
			if got := kl.Execs(); !slices.Equal(got, want) {
				t.Errorf("the kubelet was asked %q, want %q", got, want)
			}
		})
	}
}

func TestAnExecThatCannotReachTheKubeletIsAnError(t *testing.T) {
	e := setup(t)
	node := e.node(t, "n1", nil)
	e.pod(t, "vpcnet-abcde", node, true, corev1.PodRunning)
	cs, err := kubernetes.NewForConfig(e.operator)
	if err != nil {
		t.Fatal(err)
	}
	pod, err := FindAgentPod(t.Context(), cs, e.ns, node)
	if err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	if _, err := Exec(t.Context(), e.operator, cs, pod, Container, []string{"vpcnetctl", "status"}, &stdout, &stderr); err == nil {
		t.Fatal("Exec to a node whose kubelet does not answer returned no error")
	} else if !strings.Contains(err.Error(), pod.Name) {
		t.Errorf("error %q does not name the pod", err)
	}
}

// TestTheOperatorRoleGrantsExactlyWhatThePluginUses runs the plugin's
// requests as a user bound to vpcnet-operator and compares what they were
// with what the role grants, both ways.
func TestTheOperatorRoleGrantsExactlyWhatThePluginUses(t *testing.T) {
	e := setup(t)
	kl := agentexectest.NewKubelet(t, "ok\n", 0)
	node := e.node(t, "n1", kl)
	e.pod(t, "vpcnet-abcde", node, true, corev1.PodRunning)
	cs, err := kubernetes.NewForConfig(e.operator)
	if err != nil {
		t.Fatal(err)
	}
	pod, err := FindAgentPod(t.Context(), cs, e.ns, node)
	if err != nil {
		t.Fatal(err)
	}
	var out, errOut bytes.Buffer
	if _, err := Exec(t.Context(), e.operator, cs, pod, Container, []string{"vpcnetctl", "status"}, &out, &errOut); err != nil {
		t.Fatal(err)
	}
	// What the plugin asked for, as RBAC sees it. A WebSocket exec is a
	// GET that this API server (1.37) authorizes as get and as create.
	var used []string
	for _, r := range e.reqs.all() {
		method, path, _ := strings.Cut(r, " ")
		switch {
		case method == http.MethodGet && path == "/api/v1/namespaces/"+e.ns+"/pods":
			used = append(used, "list pods")
		case method == http.MethodGet && strings.HasSuffix(path, "/pods/"+pod.Name+"/exec"):
			used = append(used, "get pods/exec", "create pods/exec")
		default:
			t.Errorf("unexpected request %s", r)
		}
	}
	slices.Sort(used)
	used = slices.Compact(used)
	role := manifestObject[rbacv1.ClusterRole](t, "ClusterRole", "vpcnet-operator")
	var granted []string
	for _, rule := range role.Rules {
		for _, res := range rule.Resources {
			for _, v := range rule.Verbs {
				granted = append(granted, v+" "+res)
			}
		}
	}
	slices.Sort(granted)
	if !slices.Equal(used, granted) {
		t.Errorf("the plugin used %q; vpcnet-operator grants %q: they must be equal", used, granted)
	}

	// And the API server agrees: the operator may do exactly that, in
	// the bound namespace only.
	sa := "system:serviceaccount:" + e.ns + ":oncall"
	checks := []struct {
		verb, resource, sub, ns string
		want                    bool
	}{
		{"list", "pods", "", e.ns, true},
		{"create", "pods", "exec", e.ns, true},
		{"get", "pods", "exec", e.ns, true},
		{"get", "pods", "", e.ns, false},
		{"delete", "pods", "", e.ns, false},
		{"create", "pods", "portforward", e.ns, false},
		{"get", "pods", "proxy", e.ns, false},
		{"list", "secrets", "", e.ns, false},
		{"create", "pods", "exec", "default", false},
		{"list", "pods", "", "default", false},
	}
	for _, c := range checks {
		sar, err := e.admin.AuthorizationV1().SubjectAccessReviews().Create(context.Background(), &authzv1.SubjectAccessReview{
			Spec: authzv1.SubjectAccessReviewSpec{User: sa, Groups: []string{"system:serviceaccounts", "system:authenticated"},
				ResourceAttributes: &authzv1.ResourceAttributes{Namespace: c.ns, Verb: c.verb, Resource: c.resource, Subresource: c.sub}},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if sar.Status.Allowed != c.want {
			t.Errorf("%s %s/%s in %s: allowed %v, want %v", c.verb, c.resource, c.sub, c.ns, sar.Status.Allowed, c.want)
		}
	}
}
