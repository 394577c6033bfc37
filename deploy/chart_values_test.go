package deploy

import (
	"strings"
	"testing"

	"github.com/vpcnet/vpcnet/config"
	"github.com/vpcnet/vpcnet/netpol"
)

// TestChartValues renders the chart with values an operator would set and
// checks each rendering like the plain manifests (env known to config,
// probes on the agent's address, host paths the agent uses) plus what the
// value itself should change.
func TestChartValues(t *testing.T) {
	helm := helmBinary(t)
	tests := []struct {
		name     string
		args     []string
		extraEnv []string // non-setting variables the values add
		wantErr  string   // in helm's error, when rendering must fail
		check    func(t *testing.T, m manifestSet, cfg config.Config)
	}{
		{
			name: "a changed setting becomes a variable",
			args: []string{"--set", "env.WARM_IP_TARGET=5", "--set", "env.CLUSTER_NAME=prod"},
			check: func(t *testing.T, m manifestSet, cfg config.Config) {
				if cfg.WarmIPTarget != 5 || cfg.ClusterName != "prod" {
					t.Errorf("agent would run with WARM_IP_TARGET=%d CLUSTER_NAME=%q, want 5 and prod", cfg.WarmIPTarget, cfg.ClusterName)
				}
			},
		},
		{
			name: "a setting at its default sets no variable",
			args: []string{"--set", "env.WARM_ENI_TARGET=1", "--set", "env.AWS_VPC_K8S_CNI_EXTERNALSNAT=false"},
			check: func(t *testing.T, m manifestSet, cfg config.Config) {
				if env := envNames(m); len(env) != 2 {
					t.Errorf("env %v, want only MY_NODE_NAME and VPCNET_BUDGET_LEASE", env)
				}
			},
		},
		{
			name: "tags as a map and CIDRs as a list",
			args: []string{"--set-json", `env.ADDITIONAL_ENI_TAGS={"team":"web"}`,
				"--set-json", `env.AWS_VPC_K8S_CNI_EXCLUDE_SNAT_CIDRS=["10.1.0.0/16","10.2.0.0/16"]`},
			check: func(t *testing.T, m manifestSet, cfg config.Config) {
				if cfg.AdditionalENITags["team"] != "web" || len(cfg.ExcludeSNATCIDRs) != 2 {
					t.Errorf("agent would read tags %v and CIDRs %v", cfg.AdditionalENITags, cfg.ExcludeSNATCIDRs)
				}
			},
		},
		{
			name: "introspection on another port moves the probes",
			args: []string{"--set", "env.INTROSPECTION_BIND_ADDRESS=127.0.0.1:7000"},
			check: func(t *testing.T, m manifestSet, cfg config.Config) {
				if p := m.container(agentContainer).ReadinessProbe.HTTPGet.Port.IntValue(); p != 7000 {
					t.Errorf("readiness probe on port %d, want 7000", p)
				}
			},
		},
		{
			name: "introspection off: probes use the metrics endpoint",
			args: []string{"--set", "env.DISABLE_INTROSPECTION=true"},
			check: func(t *testing.T, m manifestSet, cfg config.Config) {
				g := m.container(agentContainer).LivenessProbe.HTTPGet
				if g.Port.IntValue() != 61678 || g.Host != "" {
					t.Errorf("liveness probe on host %q port %s, want the metrics port 61678 on the node's address", g.Host, g.Port.String())
				}
			},
		},
		{
			name: "introspection on a unix socket: probes use the metrics endpoint",
			args: []string{"--set", "env.INTROSPECTION_BIND_ADDRESS=unix:/run/vpcnet/introspection.sock"},
		},
		{
			name: "metrics off: no port declared",
			args: []string{"--set", "env.DISABLE_METRICS=1"},
		},
		{
			name:    "no endpoint to probe is refused",
			args:    []string{"--set", "env.DISABLE_METRICS=true", "--set", "env.DISABLE_INTROSPECTION=true"},
			wantErr: "no endpoint to probe",
		},
		{
			name: "moved paths are mounted from the same host paths",
			args: []string{"--set", "env.VPCNET_STATE_DIR=/data/vpcnet", "--set", "env.VPCNET_SOCKET=/run/vpcnet-alt/agent.sock",
				"--set", "env.VPCNET_CNI_CONF_DIR=/etc/cni/alt.d", "--set", "env.VPCNET_AWS_VPC_CNI_CHECKPOINT=/run/aws/ipam.json"},
		},
		{
			name: "NetworkPolicy enforcement off, for a chained policy engine",
			args: []string{"--set", "env.VPCNET_NETWORK_POLICY=off"},
			check: func(t *testing.T, m manifestSet, cfg config.Config) {
				if cfg.NetworkPolicy {
					t.Error("agent would enforce NetworkPolicy with env.VPCNET_NETWORK_POLICY=off")
				}
			},
		},
		{
			name: "strict NetworkPolicy mode",
			args: []string{"--set", "env.NETWORK_POLICY_ENFORCING_MODE=strict"},
			check: func(t *testing.T, m manifestSet, cfg config.Config) {
				if !cfg.NetworkPolicy || cfg.NetworkPolicyMode != netpol.Strict {
					t.Errorf("agent would run with NetworkPolicy %t, mode %q; want on, strict", cfg.NetworkPolicy, cfg.NetworkPolicyMode)
				}
			},
		},
		{
			name:    "a misspelt setting is refused by name",
			args:    []string{"--set", "env.WARM_IP_TARGE=5"},
			wantErr: "env.WARM_IP_TARGE is not a vpcnetd setting",
		},
		{
			name:    "MY_NODE_NAME stays with the downward API",
			args:    []string{"--set", "env.MY_NODE_NAME=node-1"},
			wantErr: "downward API",
		},
		{
			name:     "other variables go in extraEnv",
			args:     []string{"--set-json", `extraEnv=[{"name":"AWS_REGION","value":"us-west-2"}]`},
			extraEnv: []string{"AWS_REGION"},
		},
		{
			name: "IAM role for the service account",
			args: []string{"--set", `serviceAccount.annotations.eks\.amazonaws\.com/role-arn=arn:aws:iam::111122223333:role/vpcnet`},
			check: func(t *testing.T, m manifestSet, cfg config.Config) {
				if got := m.sa.Annotations["eks.amazonaws.com/role-arn"]; got != "arn:aws:iam::111122223333:role/vpcnet" {
					t.Errorf("ServiceAccount role annotation %q", got)
				}
			},
		},
		{
			name: "budget controller off: no controller, no Lease for the agent",
			args: []string{"--set", "budget.enabled=false"},
			check: func(t *testing.T, m manifestSet, cfg config.Config) {
				if m.budget.any() || cfg.BudgetLease != "" {
					t.Errorf("budget objects %+v and agent VPCNET_BUDGET_LEASE %q, want none", m.budget, cfg.BudgetLease)
				}
			},
		},
		{
			name: "budget controller on another port, with raised EC2 limits",
			args: []string{"--set", "budget.port=7000", "--set", "budget.env.VPCNET_BUDGET_BUCKETS=CreateNetworkInterface=200/10"},
			check: func(t *testing.T, m manifestSet, cfg config.Config) {
				_, s := budgetSettings(t, m.budget.deploy)
				if s.Port != 7000 || s.Budget.Buckets["CreateNetworkInterface"].Burst != 200 {
					t.Errorf("controller on port %d with buckets %v", s.Port, s.Budget.Buckets)
				}
			},
		},
		{
			name:    "a misspelt budget setting is refused by name",
			args:    []string{"--set", "budget.env.VPCNET_BUDGET_MARGN=0.5"},
			wantErr: "budget.env.VPCNET_BUDGET_MARGN",
		},
		{
			name:    "the budget controller's Lease is the chart's",
			args:    []string{"--set", "env.VPCNET_BUDGET_LEASE=other/lease"},
			wantErr: "env.VPCNET_BUDGET_LEASE",
		},
		{
			name: "another budget Lease with the controller off",
			args: []string{"--set", "budget.enabled=false", "--set", "env.VPCNET_BUDGET_LEASE=kube-system/vpcnet-budget"},
			check: func(t *testing.T, m manifestSet, cfg config.Config) {
				if cfg.BudgetLease != "kube-system/vpcnet-budget" {
					t.Errorf("agent VPCNET_BUDGET_LEASE %q", cfg.BudgetLease)
				}
			},
		},
		{
			name: "image tag and CNI binary directory",
			args: []string{"--set", "image.tag=dev", "--set", "cniBinDir=/home/kubernetes/bin"},
			check: func(t *testing.T, m manifestSet, cfg config.Config) {
				if img := m.container(agentContainer).Image; img != "ghcr.io/vpcnet/vpcnet:dev" {
					t.Errorf("image %s, want ghcr.io/vpcnet/vpcnet:dev", img)
				}
				if hp := m.hostPathOf(m.container(installContainer).VolumeMounts[0]); hp != "/home/kubernetes/bin" {
					t.Errorf("plugin installed into host path %s, want /home/kubernetes/bin", hp)
				}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := helmTemplate(t, helm, tt.args...)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want one saying %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			objs, err := decodeObjects(out)
			if err != nil {
				t.Fatal(err)
			}
			m, err := typed(objs)
			if err != nil {
				t.Fatal(err)
			}
			checkManifests(t, m, tt.extraEnv)
			if tt.check != nil {
				cfg, err := agentConfig(m)
				if err != nil {
					t.Fatal(err)
				}
				tt.check(t, m, cfg)
			}
		})
	}
}

func envNames(m manifestSet) []string {
	var out []string
	for _, e := range m.container(agentContainer).Env {
		out = append(out, e.Name)
	}
	return out
}
