package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/rest"

	"github.com/vpcnet/vpcnet/agent"
	"github.com/vpcnet/vpcnet/budget/budgetapi"
	"github.com/vpcnet/vpcnet/config"
	"github.com/vpcnet/vpcnet/kube"
)

// budgetClient is the agent's client of the EC2 budget controller that
// VPCNET_BUDGET_LEASE names, or nil when it names none. The controller's
// leader is found through its Lease with the agent's own Kubernetes
// client k, and the agent proves who it is with the service account
// token rc authenticates with.
func budgetClient(cfg config.Config, k agent.Kube, rc *rest.Config, reg prometheus.Registerer, log *slog.Logger) (*budgetapi.Client, error) {
	if cfg.BudgetLease == "" {
		return nil, nil
	}
	kc, ok := k.(*kube.Client)
	if !ok || rc == nil {
		return nil, fmt.Errorf("VPCNET_BUDGET_LEASE=%s names the budget controller's Lease, which is read from the Kubernetes API, and none is configured: run vpcnetd in the cluster, set VPCNET_KUBECONFIG, or unset VPCNET_BUDGET_LEASE", cfg.BudgetLease)
	}
	ns, name, _ := strings.Cut(cfg.BudgetLease, "/")
	node := cfg.NodeName
	if node == "" {
		node, _ = os.Hostname()
	}
	asks := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "vpcnet_budget_acquire_total",
		Help: "Jobs that asked the EC2 budget controller before calling EC2, by outcome: granted, or alone (no controller answered; the node called EC2 on its own budget).",
	}, []string{"outcome"})
	waits := prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "vpcnet_budget_wait_seconds",
		Help:    "How long a job waited for the EC2 budget controller's grant, by outcome.",
		Buckets: []float64{0.01, 0.1, 0.5, 1, 5, 15, 60, 300},
	}, []string{"outcome"})
	reg.MustRegister(asks, waits)
	return budgetapi.NewClient(budgetapi.ClientOptions{
		Node: node,
		Endpoint: func(ctx context.Context) (string, error) {
			return kc.BudgetEndpoint(ctx, ns, name)
		},
		Token: serviceAccountToken(rc),
		Log:   log.With("component", "budget"),
		Observe: func(outcome string, waited time.Duration) {
			asks.WithLabelValues(outcome).Inc()
			waits.WithLabelValues(outcome).Observe(waited.Seconds())
		},
	}), nil
}

// serviceAccountToken reads the token rc authenticates with, again on
// every ask: the kubelet rotates a projected token file.
func serviceAccountToken(rc *rest.Config) func() (string, error) {
	if rc.BearerTokenFile != "" {
		return func() (string, error) {
			b, err := os.ReadFile(rc.BearerTokenFile)
			return strings.TrimSpace(string(b)), err
		}
	}
	if rc.BearerToken != "" {
		return func() (string, error) { return rc.BearerToken, nil }
	}
	return nil // a kubeconfig with a client certificate: the controller may refuse, and the agent goes alone
}
