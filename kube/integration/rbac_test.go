package integration

import (
	"bytes"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/vpcnet/vpcnet/agent"
)

// watchListFallback may be granted and not used: client-go's informers
// first open a watch that sends the initial objects (WatchListClient) and
// list only when the server does not serve that, as this one (on Debian's
// etcd 3.4) does not, nor do API servers without the WatchList feature.
// Whether the list is used depends on the API server, so the ClusterRole
// grants it. (The Node informer's list is needed anyway: the providerID
// search lists Nodes.)
var watchListFallback = []string{"list eniconfigs.crd.k8s.amazonaws.com", "list pods", "list namespaces", "list networkpolicies.networking.k8s.io"}

func TestTheDaemonSetsServiceAccountIsAllowedEveryRequestTheLayerMakes(t *testing.T) {
	t.Parallel()
	e := setup(t)
	s := startScenario(t, e, e.agentConfig(t))
	s.l.waitFor(t, "found the Node, its pod and its ENIConfig", func(st agent.KubeState) bool {
		return st.Node == s.node && st.Pods == 1 && st.ENIConfig.Found
	})
	s.drive()
	s.repeat(t)
	s.l.waitFor(t, "removed the startup taint", func(st agent.KubeState) bool { return st.TaintRemoved })
	e.waitEvent(t, podRef(s.pod), agent.EventSubnetExhausted, 2)
	e.waitEvent(t, podRef(s.unbound), agent.EventPending, 1)
	e.waitEvent(t, nodeRef(s.node), agent.EventUnauthorized, 1)
	startPolicyWatch(t, e.agentConfig(t), s.l.reqs)
	if st := s.l.State(); st.LastError != "" || !st.Reachable {
		t.Errorf("state reports trouble: reachable %v, last error %q", st.Reachable, st.LastError)
	}

	role := manifestObject[rbacv1.ClusterRole](t, "ClusterRole", "vpcnet")
	allowed := granted(role.Rules)
	used := map[string]bool{}
	for _, r := range s.l.reqs.all() {
		if r.code == http.StatusUnauthorized || r.code == http.StatusForbidden || r.code == 0 {
			t.Errorf("%s (%s): answered %d %s", r.perm, r.url, r.code, r.error)
		}
		if strings.Contains(r.perm, " /") {
			continue // a non-resource URL (/version): every user may get it
		}
		used[r.perm] = true
		if !allowed[r.perm] {
			t.Errorf("the layer made a request the ClusterRole in deploy/vpcnet.yaml does not grant: %s (%s)", r.perm, r.url)
		}
	}
	// Least privilege: what the ClusterRole grants, the layer uses.
	var unused []string
	for p := range allowed {
		if !used[p] && !slices.Contains(watchListFallback, p) {
			unused = append(unused, p)
		}
	}
	if len(unused) > 0 {
		slices.Sort(unused)
		t.Errorf("the ClusterRole grants %q, which the layer never used (used: %q): take them out of deploy/vpcnet.yaml and the chart",
			unused, slices.Sorted(maps.Keys(used)))
	}
}

func TestAClusterRoleMissingAVerbIsReportedNamingTheVerbAndResource(t *testing.T) {
	t.Parallel()
	// Every verb the ClusterRole grants, but the informers' list of pods
	// and ENIConfigs, which an API server serving watch-list never sees
	// (see watchListFallback).
	tests := []struct {
		verb, resource string // taken out of the ClusterRole
		// where, besides LastError, the status says so.
		where  func(agent.KubeState) string
		repeat bool // the scenario records a repeated Event
	}{
		{verb: "get", resource: "nodes", where: startupTaintState},
		{verb: "list", resource: "nodes", where: func(st agent.KubeState) string { return st.NodeProblem }},
		{verb: "watch", resource: "nodes"},
		{verb: "patch", resource: "nodes", where: startupTaintState},
		{verb: "watch", resource: "pods"},
		{verb: "get", resource: "pods"},
		{verb: "create", resource: "events"},
		{verb: "patch", resource: "events", repeat: true},
		{verb: "watch", resource: "eniconfigs", where: func(st agent.KubeState) string { return st.ENIConfig.Problem }},
	}
	for _, tt := range tests {
		t.Run(tt.verb+" "+tt.resource, func(t *testing.T) {
			t.Parallel()
			e := setup(t)
			sa := e.grantAllBut(t, tt.verb, tt.resource)
			rc, err := e.c.ServiceAccountConfig(t.Context(), e.ns, sa)
			if err != nil {
				t.Fatal(err)
			}
			s := startScenario(t, e, rc)
			s.drive()
			if tt.repeat {
				s.repeat(t)
			}
			refusal := fmt.Sprintf("cannot %s resource %q", tt.verb, tt.resource)
			st := s.l.waitFor(t, "reported the refusal", func(st agent.KubeState) bool { return strings.Contains(st.LastError, refusal) })
			if missing := missingWords(st.LastError, "ClusterRole vpcnet in deploy/vpcnet.yaml"); len(missing) > 0 {
				t.Errorf("last error %q does not say where to grant it", st.LastError)
			}
			if !st.Reachable {
				t.Errorf("a refusal is an answer, yet the API server is reported unreachable")
			}
			if tt.where != nil {
				if w := tt.where(st); !strings.Contains(w, refusal) {
					t.Errorf("status %q does not say %q", w, refusal)
				}
			}
			t.Logf("reported as: %s", st.LastError)
		})
	}
}

func startupTaintState(st agent.KubeState) string { return st.StartupTaint }

// grantAllBut applies a copy of deploy/vpcnet.yaml's ClusterRole without
// verb on resource, bound to a new ServiceAccount in the test's
// namespace, and returns the ServiceAccount's name.
func (e *env) grantAllBut(t *testing.T, verb, resource string) string {
	t.Helper()
	role := manifestObject[rbacv1.ClusterRole](t, "ClusterRole", "vpcnet")
	role.TypeMeta = metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRole"}
	role.ObjectMeta = metav1.ObjectMeta{Name: e.name("vpcnet-without-" + verb + "-" + resource)}
	removed := false
	var rules []rbacv1.PolicyRule
	for _, r := range role.Rules {
		if slices.Contains(r.Resources, resource) && slices.Contains(r.Verbs, verb) {
			if len(r.Resources) != 1 {
				t.Fatalf("rule %+v grants several resources: split it to take %s off %s alone", r, verb, resource)
			}
			r.Verbs = slices.DeleteFunc(slices.Clone(r.Verbs), func(v string) bool { return v == verb })
			removed = true
		}
		rules = append(rules, r)
	}
	if !removed {
		t.Fatalf("the ClusterRole does not grant %s on %s", verb, resource)
	}
	role.Rules = rules
	sa := &corev1.ServiceAccount{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ServiceAccount"},
		ObjectMeta: metav1.ObjectMeta{Name: "vpcnet", Namespace: e.ns},
	}
	binding := &rbacv1.ClusterRoleBinding{
		TypeMeta:   metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRoleBinding"},
		ObjectMeta: metav1.ObjectMeta{Name: role.Name},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: role.Name},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: sa.Name, Namespace: sa.Namespace}},
	}
	var doc bytes.Buffer
	for _, obj := range []any{role, sa, binding} {
		b, err := yaml.Marshal(obj)
		if err != nil {
			t.Fatal(err)
		}
		doc.WriteString("---\n")
		doc.Write(b)
	}
	if err := e.c.Apply(t.Context(), doc.Bytes()); err != nil {
		t.Fatal(err)
	}
	return sa.Name
}
