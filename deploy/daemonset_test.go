package deploy

import (
	"fmt"
	"net"
	"path"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/vpcnet/vpcnet/config"
)

func checkScheduling(t *testing.T, m manifestSet) {
	ds := m.ds
	spec := ds.Spec.Template.Spec
	if !spec.HostNetwork {
		t.Error("hostNetwork is off: the agent must configure the node's own network")
	}
	if spec.PriorityClassName != "system-node-critical" {
		t.Errorf("priorityClassName %q, want system-node-critical so the agent is never evicted or preempted for pods", spec.PriorityClassName)
	}
	if spec.DNSPolicy != corev1.DNSDefault {
		t.Errorf("dnsPolicy %q, want Default: cluster DNS runs on the pod network the agent provides", spec.DNSPolicy)
	}
	tolerateAll := slices.ContainsFunc(spec.Tolerations, func(tol corev1.Toleration) bool {
		return tol.Operator == corev1.TolerationOpExists && tol.Key == "" && tol.Effect == ""
	})
	if !tolerateAll {
		t.Errorf("tolerations %+v do not tolerate every taint: a tainted node would get no pod network", spec.Tolerations)
	}
	if ds.Spec.Selector == nil || len(ds.Spec.Selector.MatchLabels) == 0 {
		t.Fatal("DaemonSet has no selector")
	}
	for k, v := range ds.Spec.Selector.MatchLabels {
		if ds.Spec.Template.Labels[k] != v {
			t.Errorf("selector %s=%s does not match the pod template's labels %v", k, v, ds.Spec.Template.Labels)
		}
	}
	u := ds.Spec.UpdateStrategy
	if u.Type != "RollingUpdate" || u.RollingUpdate == nil || u.RollingUpdate.MaxUnavailable == nil ||
		*u.RollingUpdate.MaxUnavailable != intstr.FromString("10%") {
		t.Errorf("update strategy %+v, want RollingUpdate with maxUnavailable 10%%", u)
	}
	if u.RollingUpdate != nil && u.RollingUpdate.MaxSurge != nil && u.RollingUpdate.MaxSurge.String() != "0" {
		t.Errorf("maxSurge %s: two agents on one node would share its socket and ports", u.RollingUpdate.MaxSurge)
	}
	if g := spec.TerminationGracePeriodSeconds; g == nil || *g > 30 {
		t.Errorf("terminationGracePeriodSeconds %v, want at most 30 so a node is never long without an agent", g)
	}
}

func checkEnv(t *testing.T, m manifestSet, extraEnv []string) {
	known := map[string]bool{}
	for _, s := range defaultConfig(t).Settings() {
		known[s.Name] = true
	}
	seen := map[string]bool{}
	for _, e := range m.container(agentContainer).Env {
		if seen[e.Name] {
			t.Errorf("%s is set twice", e.Name)
		}
		seen[e.Name] = true
		if !known[e.Name] && !slices.Contains(extraEnv, e.Name) {
			t.Errorf("%s is not a setting in config's table (docs/settings.md): the agent would ignore it", e.Name)
		}
	}
	var node *corev1.EnvVar
	for i, e := range m.container(agentContainer).Env {
		if e.Name == "MY_NODE_NAME" {
			node = &m.container(agentContainer).Env[i]
		}
	}
	if node == nil || node.ValueFrom == nil || node.ValueFrom.FieldRef == nil || node.ValueFrom.FieldRef.FieldPath != "spec.nodeName" {
		t.Errorf("MY_NODE_NAME is %+v, want it from the downward API's spec.nodeName", node)
	}
}

func checkProbes(t *testing.T, m manifestSet, cfg config.Config) {
	addr := cfg.IntrospectionAddr
	if cfg.DisableIntrospection || strings.HasPrefix(addr, "unix:") {
		addr = cfg.MetricsAddr
		if cfg.DisableMetrics {
			t.Fatal("introspection and metrics both off: nothing to probe")
		}
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatalf("probe address %q: %v", addr, err)
	}
	if host == "0.0.0.0" || host == "::" {
		host = "" // every address: the kubelet's default, the pod's (node's) address, reaches it
	}
	c := m.container(agentContainer)
	for _, p := range []struct {
		name  string
		probe *corev1.Probe
		path  string
	}{
		{"readiness", c.ReadinessProbe, "/readyz"},
		{"liveness", c.LivenessProbe, "/healthz"},
	} {
		if p.probe == nil || p.probe.HTTPGet == nil {
			t.Errorf("%s probe is %+v, want an HTTP GET of %s", p.name, p.probe, p.path)
			continue
		}
		g := p.probe.HTTPGet
		if g.Path != p.path || g.Port.String() != port || g.Host != host {
			t.Errorf("%s probe gets host %q port %s path %s, but the agent serves %s on %s", p.name, g.Host, g.Port.String(), g.Path, p.path, addr)
		}
	}
}

func checkMetricsPort(t *testing.T, m manifestSet, cfg config.Config) {
	ports := m.container(agentContainer).Ports
	if cfg.DisableMetrics {
		if len(ports) != 0 {
			t.Errorf("ports %+v declared with metrics off", ports)
		}
		return
	}
	_, port, err := net.SplitHostPort(cfg.MetricsAddr)
	if err != nil {
		t.Fatal(err)
	}
	if len(ports) != 1 || ports[0].Name != "metrics" || fmt.Sprint(ports[0].ContainerPort) != port {
		t.Errorf("ports %+v, want one named metrics on %s (VPCNET_METRICS_BIND_ADDRESS %s)", ports, port, cfg.MetricsAddr)
	}
}

// checkHostPaths: every path the agent uses is the same path on the host,
// because the plugin on the host dials the socket named in the CNI
// configuration, the kubelet reads that configuration, and the checkpoint
// must outlive the pod.
func checkHostPaths(t *testing.T, m manifestSet, cfg config.Config) {
	c := m.container(agentContainer)
	for _, p := range []struct {
		what, dir string
		writable  bool
	}{
		{"plugin socket directory (VPCNET_SOCKET)", path.Dir(cfg.Socket), true},
		{"checkpoint directory (VPCNET_STATE_DIR)", cfg.StateDir, true},
		{"CNI configuration directory (VPCNET_CNI_CONF_DIR)", cfg.CNIConfDir, true},
		{"Amazon VPC CNI checkpoint directory (VPCNET_AWS_VPC_CNI_CHECKPOINT)", path.Dir(cfg.AWSCNICheckpoint), false},
	} {
		i := slices.IndexFunc(c.VolumeMounts, func(vm corev1.VolumeMount) bool { return vm.MountPath == p.dir })
		if i < 0 {
			t.Errorf("%s %s is not mounted", p.what, p.dir)
			continue
		}
		vm := c.VolumeMounts[i]
		if hp := m.hostPathOf(vm); hp != p.dir {
			t.Errorf("%s %s is mounted from host path %q, want the same path on the host", p.what, p.dir, hp)
		}
		if p.writable && vm.ReadOnly {
			t.Errorf("%s %s is read-only; the agent writes there", p.what, p.dir)
		}
	}
}

func checkInstall(t *testing.T, m manifestSet) {
	installer := m.container(installContainer)
	if installer == nil || !slices.ContainsFunc(m.ds.Spec.Template.Spec.InitContainers, func(c corev1.Container) bool { return c.Name == installContainer }) {
		t.Fatalf("no init container %q installing the plugin", installContainer)
	}
	agent := m.container(agentContainer)
	if installer.Image != agent.Image {
		t.Errorf("plugin installed from %s but the agent runs %s: plugin and agent must be the same version", installer.Image, agent.Image)
	}
	cmd := installer.Command
	if len(cmd) == 0 || cmd[0] != "vpcnet-install" {
		t.Fatalf("init command %q, want vpcnet-install", cmd)
	}
	to := "/host/opt/cni/bin" // vpcnet-install's default
	if i := slices.Index(cmd, "-to"); i >= 0 && i+1 < len(cmd) {
		to = cmd[i+1]
	}
	// ENABLE_BANDWIDTH_PLUGIN=true chains bandwidth: a node without it
	// would fail every pod, so the installer must see it there.
	var required []string
	if i := slices.Index(cmd, "-require"); i >= 0 && i+1 < len(cmd) {
		required = strings.Split(cmd[i+1], ",")
	}
	if !slices.Contains(required, "bandwidth") {
		t.Errorf("init command %q does not -require bandwidth, which ENABLE_BANDWIDTH_PLUGIN=true chains", cmd)
	}
	// ENABLE_IPv6=true chains vpcnet-egress-v4 (ENABLE_V4_EGRESS, true by
	// default), which takes its addresses from host-local: an IPv6 node
	// without either would fail every pod.
	if !slices.Contains(required, "host-local") {
		t.Errorf("init command %q does not -require host-local, which vpcnet-egress-v4 delegates to", cmd)
	}
	if !slices.Contains(cmd, "vpcnet-egress-v4") || !slices.Contains(cmd, "vpcnet") {
		t.Errorf("init command %q does not install vpcnet and vpcnet-egress-v4, which an IPv6 node chains", cmd)
	}
	i := slices.IndexFunc(installer.VolumeMounts, func(vm corev1.VolumeMount) bool { return vm.MountPath == to })
	if i < 0 {
		t.Fatalf("the installer writes to %s, which is not mounted", to)
	}
	if installer.VolumeMounts[i].ReadOnly || m.hostPathOf(installer.VolumeMounts[i]) == "" {
		t.Errorf("%s must be the node's CNI binary directory, a writable hostPath", to)
	}
}

func checkSecurity(t *testing.T, m manifestSet) {
	agent := m.container(agentContainer)
	sc := agent.SecurityContext
	if sc == nil || sc.RunAsUser == nil || *sc.RunAsUser != 0 {
		t.Errorf("agent securityContext %+v, want runAsUser 0 (netlink, nftables and root-owned host paths), whatever the image's user", sc)
	} else if sc.Capabilities == nil || !slices.Contains(sc.Capabilities.Add, "NET_ADMIN") || !slices.Contains(sc.Capabilities.Add, "NET_RAW") {
		t.Errorf("agent capabilities %+v, want NET_ADMIN and NET_RAW added", sc.Capabilities)
	}
	isc := m.container(installContainer).SecurityContext
	if isc == nil || (isc.Privileged != nil && *isc.Privileged) || isc.Capabilities == nil || !slices.Contains(isc.Capabilities.Drop, "ALL") {
		t.Errorf("installer securityContext %+v, want unprivileged with every capability dropped: it only copies a file", isc)
	}
}

func checkResources(t *testing.T, m manifestSet) {
	for _, name := range []string{agentContainer, installContainer} {
		r := m.container(name).Resources
		if r.Requests.Cpu().IsZero() || r.Requests.Memory().IsZero() {
			t.Errorf("%s requests %v: without requests the scheduler does not reserve room for it", name, r.Requests)
		}
		if r.Limits.Memory().IsZero() {
			t.Errorf("%s has no memory limit", name)
		}
	}
	if cpu := m.container(agentContainer).Resources.Limits.Cpu(); !cpu.IsZero() {
		t.Errorf("agent CPU limit %s: throttling the address manager delays every pod start", cpu)
	}
}
