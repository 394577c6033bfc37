// Command vpcnet-budget is the cluster's EC2 budget controller (package
// budget/controller): run as a Deployment of a few replicas, it elects a
// leader with a Lease, and the leader schedules the agents' EC2 calls
// within the account's request limits. Every setting comes from the
// environment (docs/settings.md); an invalid one stops it with one line
// per bad variable.
package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"

	"github.com/vpcnet/vpcnet/budget/controller"
)

func main() {
	s, err := controller.Load(os.Environ())
	if err != nil {
		fmt.Fprintln(os.Stderr, "vpcnet-budget:", err)
		os.Exit(2)
	}
	log := slog.New(slog.NewJSONHandler(os.Stderr, nil))
	// client-go logs through klog; send it where everything else goes.
	klog.SetSlogLogger(log.With("component", "client-go"))
	rc, err := restConfig(s.Kubeconfig)
	if err != nil {
		fmt.Fprintln(os.Stderr, "vpcnet-budget:", err)
		os.Exit(2)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := controller.Run(ctx, controller.Options{Settings: s, REST: rc, Log: log, Registry: reg}); err != nil {
		log.Error("vpcnet-budget stopped", "err", err)
		os.Exit(1)
	}
}

// restConfig is the kubeconfig's when VPCNET_BUDGET_KUBECONFIG names one,
// else the pod's service account.
func restConfig(kubeconfig string) (*rest.Config, error) {
	if kubeconfig != "" {
		rc, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
		if err != nil {
			return nil, fmt.Errorf("VPCNET_BUDGET_KUBECONFIG=%s: %w", kubeconfig, err)
		}
		return rc, nil
	}
	rc, err := rest.InClusterConfig()
	if err != nil {
		return nil, fmt.Errorf("in-cluster Kubernetes config (set VPCNET_BUDGET_KUBECONFIG outside a pod): %w", err)
	}
	return rc, nil
}
