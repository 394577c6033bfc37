package deploy

import (
	"fmt"
	"os"
	"slices"
	"sort"
	"testing"

	"github.com/vpcnet/vpcnet/config"
)

const (
	agentContainer   = "vpcnet"
	installContainer = "install-cni"
	namespace        = "kube-system"
)

func TestPlainManifests(t *testing.T) {
	data, err := os.ReadFile("vpcnet.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if string(data) != string(Manifests()) {
		t.Fatal("Manifests() differs from vpcnet.yaml")
	}
	objs, err := decodeObjects(data)
	if err != nil {
		t.Fatal(err)
	}
	m, err := typed(objs)
	if err != nil {
		t.Fatal(err)
	}
	checkManifests(t, m, nil)
	if !m.budget.complete() {
		t.Error("deploy/vpcnet.yaml does not install the budget controller")
	}
	t.Run("only what cannot default is set", func(t *testing.T) {
		for _, e := range m.container(agentContainer).Env {
			// VPCNET_BUDGET_LEASE names the controller this file installs.
			if e.ValueFrom == nil && e.Name != "VPCNET_BUDGET_LEASE" {
				t.Errorf("%s=%q is set; deploy/vpcnet.yaml leaves every setting at the agent's default so the defaults live in one place (config)", e.Name, e.Value)
			}
		}
	})
}

// checkManifests asserts what an operator relies on, for the plain
// manifests and for every chart rendering. extraEnv names variables that are
// not agent settings but were asked for (the chart's extraEnv).
func checkManifests(t *testing.T, m manifestSet, extraEnv []string) {
	t.Helper()
	cfg, err := agentConfig(m)
	if err != nil {
		t.Fatalf("the agent would refuse to start: %v", err)
	}
	t.Run("namespace", func(t *testing.T) { checkNamespace(t, m) })
	t.Run("ENIConfig CRD", func(t *testing.T) { checkCRD(t, m) })
	t.Run("RBAC", func(t *testing.T) { checkRBAC(t, m) })
	t.Run("scheduling", func(t *testing.T) { checkScheduling(t, m) })
	t.Run("env", func(t *testing.T) { checkEnv(t, m, extraEnv) })
	t.Run("probes", func(t *testing.T) { checkProbes(t, m, cfg) })
	t.Run("metrics port", func(t *testing.T) { checkMetricsPort(t, m, cfg) })
	t.Run("host paths", func(t *testing.T) { checkHostPaths(t, m, cfg) })
	t.Run("plugin install", func(t *testing.T) { checkInstall(t, m) })
	t.Run("security", func(t *testing.T) { checkSecurity(t, m) })
	t.Run("resources", func(t *testing.T) { checkResources(t, m) })
	t.Run("budget controller", func(t *testing.T) { checkBudget(t, m) })
}

// agentConfig is the configuration the agent would load from the
// DaemonSet's environment.
func agentConfig(m manifestSet) (config.Config, error) {
	c := m.container(agentContainer)
	if c == nil {
		return config.Config{}, fmt.Errorf("no container %q", agentContainer)
	}
	// The whole environment, as vpcnetd reads it, so that a name the
	// agent does not know is refused here too.
	var environ []string
	for _, e := range c.Env {
		v := e.Value
		if e.ValueFrom != nil {
			v = "ip-10-0-0-1.us-west-2.compute.internal"
		}
		environ = append(environ, e.Name+"="+v)
	}
	return config.LoadEnviron(environ)
}

func checkNamespace(t *testing.T, m manifestSet) {
	if m.sa.Namespace != namespace || m.ds.Namespace != namespace {
		t.Errorf("ServiceAccount in %q and DaemonSet in %q, want both in %s, named explicitly", m.sa.Namespace, m.ds.Namespace, namespace)
	}
}

func checkCRD(t *testing.T, m manifestSet) {
	crd := m.crd
	// What the Amazon VPC CNI's CRD has: ENIConfigs made for it must
	// still be served, under the same names.
	if crd.Name != "eniconfigs.crd.k8s.amazonaws.com" || crd.Spec.Group != "crd.k8s.amazonaws.com" ||
		crd.Spec.Scope != "Cluster" || crd.Spec.Names.Kind != "ENIConfig" ||
		crd.Spec.Names.Plural != "eniconfigs" || crd.Spec.Names.Singular != "eniconfig" {
		t.Errorf("CRD %s (group %s, scope %s, kind %s, plural %s, singular %s) differs from the Amazon VPC CNI's eniconfigs.crd.k8s.amazonaws.com, cluster-scoped ENIConfig",
			crd.Name, crd.Spec.Group, crd.Spec.Scope, crd.Spec.Names.Kind, crd.Spec.Names.Plural, crd.Spec.Names.Singular)
	}
	var found bool
	for _, v := range crd.Spec.Versions {
		if v.Name != "v1alpha1" {
			continue
		}
		found = true
		if !v.Served || !v.Storage {
			t.Errorf("v1alpha1 served=%v storage=%v, want both", v.Served, v.Storage)
		}
		if v.Schema == nil || v.Schema.OpenAPIV3Schema == nil {
			t.Fatal("v1alpha1 has no schema")
		}
		root := v.Schema.OpenAPIV3Schema
		if root.XPreserveUnknownFields == nil || !*root.XPreserveUnknownFields {
			t.Error("root schema prunes unknown fields; the Amazon VPC CNI's keeps them, so existing ENIConfigs would lose fields")
		}
		spec := root.Properties["spec"]
		if spec.Properties["subnet"].Type != "string" {
			t.Errorf("spec.subnet is %q, want string", spec.Properties["subnet"].Type)
		}
		sg := spec.Properties["securityGroups"]
		if sg.Type != "array" || sg.Items == nil || sg.Items.Schema == nil || sg.Items.Schema.Type != "string" {
			t.Errorf("spec.securityGroups is not an array of strings: %+v", sg)
		}
		if !slices.Equal(spec.Required, []string{"subnet"}) {
			t.Errorf("spec requires %v, want [subnet] as the Amazon VPC CNI does", spec.Required)
		}
	}
	if !found {
		t.Error("no version v1alpha1")
	}
}

// wantRules is what vpcnetd's Kubernetes layer needs, as "group/resource:
// verb" (core group written ""): the table in kube/doc.go. A new need is a
// reviewed change to both. (kube/ also gets /version, which every
// authenticated user may.)
var wantRules = []string{
	"/nodes:get", "/nodes:list", "/nodes:watch", "/nodes:patch",
	"/pods:get", "/pods:list", "/pods:watch",
	"/events:create", "/events:patch",
	"crd.k8s.amazonaws.com/eniconfigs:list", "crd.k8s.amazonaws.com/eniconfigs:watch",
	// NetworkPolicy enforcement: every policy, namespace and pod.
	"/namespaces:list", "/namespaces:watch",
	"networking.k8s.io/networkpolicies:list", "networking.k8s.io/networkpolicies:watch",
}

func checkRBAC(t *testing.T, m manifestSet) {
	var got []string
	for _, r := range m.role.Rules {
		if len(r.NonResourceURLs) > 0 || len(r.ResourceNames) > 0 {
			t.Errorf("rule %+v has non-resource URLs or resource names; none are expected", r)
		}
		for _, g := range r.APIGroups {
			for _, res := range r.Resources {
				for _, v := range r.Verbs {
					if g == "*" || res == "*" || v == "*" {
						t.Errorf("wildcard in rule %+v: grant named verbs on named resources", r)
					}
					got = append(got, g+"/"+res+":"+v)
				}
			}
		}
	}
	if missing, extra := diff(wantRules, got); len(missing)+len(extra) > 0 {
		t.Errorf("ClusterRole lacks %v and grants more than needed: %v", missing, extra)
	}
	b := m.binding
	if b.RoleRef.Kind != "ClusterRole" || b.RoleRef.Name != m.role.Name {
		t.Errorf("binding refers to %s %s, want ClusterRole %s", b.RoleRef.Kind, b.RoleRef.Name, m.role.Name)
	}
	sa := m.ds.Spec.Template.Spec.ServiceAccountName
	if sa != m.sa.Name {
		t.Errorf("DaemonSet runs as ServiceAccount %q, but the manifests create %q", sa, m.sa.Name)
	}
	if len(b.Subjects) != 1 || b.Subjects[0].Kind != "ServiceAccount" || b.Subjects[0].Name != sa || b.Subjects[0].Namespace != m.ds.Namespace {
		t.Errorf("binding subjects %+v, want only ServiceAccount %s/%s", b.Subjects, m.ds.Namespace, sa)
	}
}

// diff returns what want has that got lacks, and the reverse, sorted.
func diff(want, got []string) (missing, extra []string) {
	for _, w := range want {
		if !slices.Contains(got, w) {
			missing = append(missing, w)
		}
	}
	for _, g := range got {
		if !slices.Contains(want, g) {
			extra = append(extra, g)
		}
	}
	sort.Strings(missing)
	sort.Strings(extra)
	return missing, extra
}
