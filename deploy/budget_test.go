package deploy

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"

	"github.com/vpcnet/vpcnet/budget/controller"
)

// budgetContainer is the budget controller's container.
const budgetContainer = "vpcnet-budget"

// budgetEnv is the controller's container's environment as it would read
// it, the downward API filled in, and its settings.
func budgetSettings(t *testing.T, d *appsv1.Deployment) (*corev1.Container, controller.Settings) {
	t.Helper()
	cs := d.Spec.Template.Spec.Containers
	if len(cs) != 1 || cs[0].Name != budgetContainer {
		t.Fatalf("Deployment %s has containers %v, want one named %s", d.Name, cs, budgetContainer)
	}
	c := &cs[0]
	downward := map[string]string{"metadata.name": "vpcnet-budget-7d9f-abcde", "metadata.namespace": d.Namespace, "status.podIP": "10.0.1.17"}
	var environ []string
	for _, e := range c.Env {
		v := e.Value
		if e.ValueFrom != nil {
			if e.ValueFrom.FieldRef == nil || downward[e.ValueFrom.FieldRef.FieldPath] == "" {
				t.Fatalf("%s comes from %+v, not a downward API field the controller expects", e.Name, e.ValueFrom)
			}
			v = downward[e.ValueFrom.FieldRef.FieldPath]
		}
		environ = append(environ, e.Name+"="+v)
	}
	s, err := controller.Load(environ)
	if err != nil {
		t.Fatalf("the budget controller would refuse to start: %v", err)
	}
	if s.Namespace != d.Namespace || s.Pod == "" || !s.PodIP.IsValid() {
		t.Errorf("POD_NAMESPACE %q, POD_NAME %q, POD_IP %v: want them from the downward API", s.Namespace, s.Pod, s.PodIP)
	}
	return c, s
}

// checkBudget: the budget controller runs where it must (the node's
// network, before nodes are ready), with the least RBAC it needs, and the
// agent finds it (its VPCNET_BUDGET_LEASE names the controller's Lease,
// which its Role lets it read and nothing more).
func checkBudget(t *testing.T, m manifestSet) {
	b := m.budget
	lease := agentEnv(m, "VPCNET_BUDGET_LEASE")
	if !b.complete() {
		return // the chart's budget.enabled=false
	}
	d := b.deploy
	c, s := budgetSettings(t, d)
	if want := d.Namespace + "/" + s.Lease; lease != want {
		t.Errorf("the agent's VPCNET_BUDGET_LEASE is %q, the controller's Lease %s", lease, want)
	}
	agentUser := "system:serviceaccount:" + m.ds.Namespace + ":" + m.ds.Spec.Template.Spec.ServiceAccountName
	if !slices.Contains(s.Clients, agentUser) {
		t.Errorf("VPCNET_BUDGET_CLIENTS %q lacks the agent's service account %s: every agent would be refused", s.Clients, agentUser)
	}

	t.Run("agent reads only the Lease", func(t *testing.T) {
		want := []rbacv1.PolicyRule{{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, ResourceNames: []string{s.Lease}, Verbs: []string{"get"}}}
		if b.agentRole.Namespace != d.Namespace || !slices.EqualFunc(b.agentRole.Rules, want, ruleEqual) {
			t.Errorf("agent's Role %s/%s grants %+v, want only %+v in %s", b.agentRole.Namespace, b.agentRole.Name, b.agentRole.Rules, want, d.Namespace)
		}
		checkBinding(t, "agent's RoleBinding", b.agentBinding.RoleRef, b.agentBinding.Subjects, "Role", b.agentRole.Name, m.ds.Namespace, m.ds.Spec.Template.Spec.ServiceAccountName)
		if b.agentBinding.Namespace != d.Namespace {
			t.Errorf("agent's RoleBinding in %s, the Lease in %s", b.agentBinding.Namespace, d.Namespace)
		}
	})
	t.Run("controller RBAC", func(t *testing.T) {
		want := []rbacv1.PolicyRule{
			{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: []string{"create"}},
			{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, ResourceNames: []string{s.Lease}, Verbs: []string{"get", "update"}},
			{APIGroups: []string{""}, Resources: []string{"events"}, Verbs: []string{"create"}},
		}
		if b.role.Namespace != d.Namespace || !slices.EqualFunc(b.role.Rules, want, ruleEqual) {
			t.Errorf("Role %s/%s grants %+v, want %+v (the table in budget/controller's doc)", b.role.Namespace, b.role.Name, b.role.Rules, want)
		}
		wantCluster := []rbacv1.PolicyRule{{APIGroups: []string{"authentication.k8s.io"}, Resources: []string{"tokenreviews"}, Verbs: []string{"create"}}}
		if !slices.EqualFunc(b.clusterRole.Rules, wantCluster, ruleEqual) {
			t.Errorf("ClusterRole %s grants %+v, want only %+v", b.clusterRole.Name, b.clusterRole.Rules, wantCluster)
		}
		sa := d.Spec.Template.Spec.ServiceAccountName
		if sa != b.sa.Name || b.sa.Namespace != d.Namespace {
			t.Errorf("Deployment runs as %q, the manifests create %s/%s", sa, b.sa.Namespace, b.sa.Name)
		}
		checkBinding(t, "RoleBinding", b.roleBinding.RoleRef, b.roleBinding.Subjects, "Role", b.role.Name, d.Namespace, sa)
		checkBinding(t, "ClusterRoleBinding", b.crBinding.RoleRef, b.crBinding.Subjects, "ClusterRole", b.clusterRole.Name, d.Namespace, sa)
	})
	t.Run("controller scheduling", func(t *testing.T) {
		spec := d.Spec.Template.Spec
		if d.Spec.Replicas == nil || *d.Spec.Replicas < 2 {
			t.Errorf("replicas %v, want at least 2 so a replica is ready to take over", d.Spec.Replicas)
		}
		if !spec.HostNetwork {
			t.Error("hostNetwork is off: the controller would depend on the pod network the agents build")
		}
		if spec.PriorityClassName != "system-cluster-critical" {
			t.Errorf("priorityClassName %q, want system-cluster-critical", spec.PriorityClassName)
		}
		if spec.EnableServiceLinks == nil || *spec.EnableServiceLinks {
			t.Error("enableServiceLinks is on: a Service named vpcnet-budget-* would inject VPCNET_BUDGET_* variables")
		}
		for _, key := range []string{"node.kubernetes.io/not-ready", "vpcnet.io/agent-not-ready"} {
			if !slices.ContainsFunc(spec.Tolerations, func(tol corev1.Toleration) bool {
				return tol.Key == key && tol.Operator == corev1.TolerationOpExists && (tol.Effect == "" || tol.Effect == corev1.TaintEffectNoSchedule)
			}) {
				t.Errorf("tolerations %+v do not tolerate %s: the controller could not run on nodes that are joining", spec.Tolerations, key)
			}
		}
		a := spec.Affinity
		if a == nil || a.PodAntiAffinity == nil || len(a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution) == 0 ||
			a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution[0].TopologyKey != "kubernetes.io/hostname" {
			t.Errorf("affinity %+v: want replicas on different nodes (their port is the node's)", a)
		}
		if u := d.Spec.Strategy.RollingUpdate; u == nil || u.MaxSurge == nil || u.MaxSurge.IntValue() != 0 {
			t.Errorf("rolling update %+v: want no surge, which needs a node without a replica", u)
		}
	})
	t.Run("controller container", func(t *testing.T) {
		if c.Image != m.container(agentContainer).Image {
			t.Errorf("controller image %s, agent image %s: want the same image, one version", c.Image, m.container(agentContainer).Image)
		}
		if !slices.Equal(c.Command, []string{"vpcnet-budget"}) {
			t.Errorf("command %q, want [vpcnet-budget] (the image's entrypoint is the agent)", c.Command)
		}
		if len(c.Ports) != 1 || int(c.Ports[0].ContainerPort) != s.Port {
			t.Errorf("ports %+v, want the controller's port %d", c.Ports, s.Port)
		}
		for _, p := range []struct {
			name  string
			probe *corev1.Probe
			path  string
		}{{"readiness", c.ReadinessProbe, "/readyz"}, {"liveness", c.LivenessProbe, "/healthz"}} {
			if p.probe == nil || p.probe.HTTPGet == nil || p.probe.HTTPGet.Path != p.path || p.probe.HTTPGet.Port.IntValue() != s.Port {
				t.Errorf("%s probe %+v, want GET %s on port %d", p.name, p.probe, p.path, s.Port)
			}
		}
		sc := c.SecurityContext
		if sc == nil || sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot || sc.Capabilities == nil || !slices.Contains(sc.Capabilities.Drop, "ALL") ||
			sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
			t.Errorf("securityContext %+v: the controller needs no privilege", sc)
		}
		if c.Resources.Requests.Cpu().IsZero() || c.Resources.Requests.Memory().IsZero() || c.Resources.Limits.Memory().IsZero() {
			t.Errorf("resources %+v: want CPU and memory requests and a memory limit", c.Resources)
		}
	})
}

func checkBinding(t *testing.T, what string, ref rbacv1.RoleRef, subjects []rbacv1.Subject, kind, name, ns, sa string) {
	t.Helper()
	if ref.Kind != kind || ref.Name != name {
		t.Errorf("%s refers to %s %s, want %s %s", what, ref.Kind, ref.Name, kind, name)
	}
	if len(subjects) != 1 || subjects[0].Kind != "ServiceAccount" || subjects[0].Name != sa || subjects[0].Namespace != ns {
		t.Errorf("%s subjects %+v, want only ServiceAccount %s/%s", what, subjects, ns, sa)
	}
}

func ruleEqual(a, b rbacv1.PolicyRule) bool {
	return slices.Equal(a.APIGroups, b.APIGroups) && slices.Equal(a.Resources, b.Resources) &&
		slices.Equal(a.ResourceNames, b.ResourceNames) && slices.Equal(a.Verbs, b.Verbs) && len(a.NonResourceURLs) == 0
}

// agentEnv is the agent container's value of name ("" when unset).
func agentEnv(m manifestSet, name string) string {
	for _, e := range m.container(agentContainer).Env {
		if e.Name == name {
			return strings.TrimSpace(e.Value)
		}
	}
	return ""
}

// TestChartKnowsEveryBudgetSetting: budget.env takes exactly the
// controller's settings the chart does not set itself.
func TestChartKnowsEveryBudgetSetting(t *testing.T) {
	data, err := os.ReadFile(chartDir + "/templates/_helpers.tpl")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`define "vpcnet.budgetSettings" -}}\n\[([^\]]*)\]`).FindSubmatch(data)
	if m == nil {
		t.Fatal("_helpers.tpl defines no vpcnet.budgetSettings list")
	}
	var got []string
	for _, f := range strings.Split(string(m[1]), ",") {
		got = append(got, strings.TrimSpace(f))
	}
	setByChart := []string{"POD_NAME", "POD_NAMESPACE", "POD_IP", "VPCNET_BUDGET_LISTEN_PORT", "VPCNET_BUDGET_LEASE"}
	var want []string
	for _, v := range controller.Variables() {
		if !slices.Contains(setByChart, v.Name) {
			want = append(want, v.Name)
		}
	}
	if missing, extra := diff(want, got); len(missing)+len(extra) > 0 {
		t.Errorf("vpcnet.budgetSettings lacks %v and has %v that the controller does not read", missing, extra)
	}
}
