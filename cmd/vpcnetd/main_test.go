package main

import (
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/vpcnet/vpcnet/agent"
	"github.com/vpcnet/vpcnet/budget/budgetapi"
	"github.com/vpcnet/vpcnet/config"
	"github.com/vpcnet/vpcnet/kube"
)

func TestTheKubernetesLayerIsChosenFromTheSettings(t *testing.T) {
	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kubeconfig, []byte(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:6443"}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: x
`), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		env     map[string]string
		want    string // the layer's type
		budget  bool   // a budget controller client is made
		wantErr string
	}{
		{"nothing configured: the local cloud runs without Kubernetes", nil, "agent.NoKube", false, ""},
		{"a kubeconfig", map[string]string{"VPCNET_KUBECONFIG": kubeconfig, "MY_NODE_NAME": "n1"}, "*kube.Client", false, ""},
		{"a kubeconfig and the budget controller's Lease", map[string]string{"VPCNET_KUBECONFIG": kubeconfig, "MY_NODE_NAME": "n1",
			"VPCNET_BUDGET_LEASE": "kube-system/vpcnet-budget"}, "*kube.Client", true, ""},
		{"custom networking needs the API", map[string]string{"AWS_VPC_K8S_CNI_CUSTOM_NETWORK_CFG": "true"}, "", false,
			"AWS_VPC_K8S_CNI_CUSTOM_NETWORK_CFG=true reads the node's ENIConfig from the Kubernetes API, and none is configured"},
		{"the budget controller's Lease needs the API", map[string]string{"VPCNET_BUDGET_LEASE": "kube-system/vpcnet-budget"}, "", false,
			"VPCNET_BUDGET_LEASE=kube-system/vpcnet-budget names the budget controller's Lease, which is read from the Kubernetes API, and none is configured"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := config.Load(func(k string) (string, bool) { v, ok := tt.env[k]; return v, ok })
			if err != nil {
				t.Fatal(err)
			}
			k, rc, err := kubeLayer(cfg, slog.New(slog.DiscardHandler))
			var bc *budgetapi.Client
			if err == nil {
				bc, err = budgetClient(cfg, k, rc, prometheus.NewRegistry(), slog.New(slog.DiscardHandler))
			}
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("kubeLayer = %v, want an error saying %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got string
			switch k.(type) {
			case agent.NoKube:
				got = "agent.NoKube"
			case *kube.Client:
				got = "*kube.Client"
			}
			if got != tt.want {
				t.Errorf("layer %T, want %s", k, tt.want)
			}
			if (bc != nil) != tt.budget {
				t.Errorf("budget client %v, want one: %v", bc, tt.budget)
			}
		})
	}
}
