// Command vpcnetd is vpcnet's node agent. Every setting comes from the
// environment (docs/settings.md); an invalid one stops it with one line
// naming each bad variable.
package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"

	"github.com/vpcnet/vpcnet/agent"
	"github.com/vpcnet/vpcnet/cloud"
	"github.com/vpcnet/vpcnet/config"
	"github.com/vpcnet/vpcnet/dataplane"
	"github.com/vpcnet/vpcnet/internal/idlegc"
	"github.com/vpcnet/vpcnet/ipam"
	"github.com/vpcnet/vpcnet/kube"
	"github.com/vpcnet/vpcnet/leakgc"
)

func main() {
	if code, done := commandLine(os.Args[1:], os.Stdout, os.Stderr); done {
		os.Exit(code)
	}
	cfg, err := config.LoadEnviron(os.Environ())
	if err != nil {
		fmt.Fprintln(os.Stderr, "vpcnetd:", err)
		os.Exit(2)
	}
	log := slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: cfg.LogLevel}))
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, cfg, log); err != nil {
		log.Error("vpcnetd stopped", "err", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, cfg config.Config, log *slog.Logger) error {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	k, rc, err := kubeLayer(cfg, log)
	if err != nil {
		return err
	}
	bc, err := budgetClient(cfg, k, rc, reg, log)
	if err != nil {
		return err
	}
	var onThrottled func(string)
	var budget agent.Budget // nil unless a controller is named: an interface holding a nil client is not nil
	if bc != nil {
		onThrottled, budget = bc.Throttled, bc
	}
	c, err := cloud.New(ctx, cloud.Options{
		EC2Endpoint: cfg.EC2Endpoint, IMDSEndpoint: cfg.IMDSEndpoint, ClusterName: cfg.ClusterName,
		CallTimeout: cfg.EC2CallTimeout, Registerer: reg, Logger: log, OnThrottled: onThrottled,
	})
	if err != nil {
		return fmt.Errorf("EC2 client: %w", err)
	}
	dp, err := dataplane.New(dataplane.Options{Log: log, VethPrefix: cfg.VethPrefix, IPv6Policy: cfg.IPv6, EgressV4Policy: cfg.IPv6 && cfg.V4Egress})
	if err != nil {
		return fmt.Errorf("dataplane: %w", err)
	}
	pol, err := policyOptions(ctx, cfg, rc, dp)
	if err != nil {
		return err
	}
	a, err := agent.New(agent.Options{Config: cfg, Cloud: c, Host: host{dp}, HostPorts: dp, Veths: dp, Kube: k, Budget: budget, Policy: pol, Logger: log, Registerer: reg, Gatherer: reg})
	if err != nil {
		return err
	}
	if !cfg.DisableLeakedENICleanup {
		gc, err := leakgc.New(leakgc.Options{
			Cloud: c, ClusterName: cfg.ClusterName, InstanceID: c.InstanceID(),
			Grace: cfg.LeakedENIGrace, Logger: log, Registerer: reg, OnCollected: a.ENICollected,
		})
		if err != nil {
			return fmt.Errorf("leaked-ENI collector: %w", err)
		}
		// Only once the IAM preflight has found the collector's actions
		// permitted: without them it runs not at all rather than fail
		// every pass (the preflight names what to add).
		go func() {
			if a.Permitted(ctx, agent.FeatureLeakedENIs) {
				gc.Run(ctx)
			}
		}()
	}
	go idlegc.Run(ctx)
	return a.Run(ctx)
}

// policyOptions turns NetworkPolicy enforcement on when the API server
// is configured and VPCNET_NETWORK_POLICY is on. Off, the agent still
// counts the cluster's policies, to name those it leaves unenforced.
func policyOptions(ctx context.Context, cfg config.Config, rc *rest.Config, dp *dataplane.Dataplane) (agent.PolicyOptions, error) {
	o := agent.PolicyOptions{Mode: cfg.NetworkPolicyMode, LogDrops: cfg.NetworkPolicyLogDrops}
	if rc == nil {
		o.Off = "no Kubernetes API (KUBERNETES_SERVICE_HOST and VPCNET_KUBECONFIG are unset): there are no NetworkPolicy objects to read"
		return o, nil
	}
	src, err := kube.PolicySourcesForConfig(rc)
	if err != nil {
		return o, fmt.Errorf("NetworkPolicy watch: %w", err)
	}
	if !cfg.NetworkPolicy {
		o.Off = "VPCNET_NETWORK_POLICY=off"
		o.Count = src.CountNetworkPolicies
		return o, nil
	}
	if cfg.IPv6 && cfg.V4Egress {
		// The pods' IPv4 egress through their egress veths is judged by
		// their egress policies too (table ip vpcnet-policy): the veth's
		// name follows from the attachment, as vpcnet-egress-v4 names it,
		// but for pods aws-node's egress-cni wired before a switch-over,
		// whose veths it named at random: those are found once, here.
		// Not finding them would leave them unjudged, so it stops the
		// agent.
		wired := map[string]string{}
		if dp != nil {
			var err error
			if wired, err = dp.EgressV4VethsByContainer(ctx, cfg.EgressV4IPAMDir); err != nil {
				return o, fmt.Errorf("find the IPv4 egress veths of the pods already wired (VPCNET_EGRESS_V4_IPAM_DIR=%s): %w", cfg.EgressV4IPAMDir, err)
			}
		}
		o.EgressV4Veth = func(k ipam.Key) string {
			if v, ok := wired[k.ContainerID]; ok {
				return v
			}
			return dataplane.EgressV4VethName(k.Network, k.ContainerID, k.IfName)
		}
	}
	o.Source, o.Rules = kube.NewPolicyWatch(src), dp
	return o, nil
}

// kubeLayer connects to the API server the settings and the environment
// name, or returns agent.NoKube and a nil config when they name none (the
// local cloud).
func kubeLayer(cfg config.Config, log *slog.Logger) (agent.Kube, *rest.Config, error) {
	rc, source, err := kube.RESTConfig(cfg.Kubeconfig, os.LookupEnv)
	if err != nil {
		return nil, nil, err
	}
	if rc == nil {
		if cfg.CustomNetwork {
			return nil, nil, errors.New("AWS_VPC_K8S_CNI_CUSTOM_NETWORK_CFG=true reads the node's ENIConfig from the Kubernetes API, and none is configured: run vpcnetd in the cluster or set VPCNET_KUBECONFIG")
		}
		log.Info("no Kubernetes API (KUBERNETES_SERVICE_HOST and VPCNET_KUBECONFIG are unset): node identity, Events, custom networking and the startup taint are off")
		return agent.NoKube{}, nil, nil
	}
	// client-go logs through klog; send it where everything else goes.
	klog.SetSlogLogger(log.With("component", "client-go"))
	hostname, err := os.Hostname()
	if err != nil {
		log.Warn("host name unknown; the Node name is not compared with it", "err", err)
	}
	k, err := kube.NewForConfig(rc, kube.Options{
		NodeName: cfg.NodeName, CustomNetwork: cfg.CustomNetwork,
		ENIConfigAnnotation: cfg.ENIConfigAnnotation, ENIConfigLabel: cfg.ENIConfigLabel,
		StartupTaint: cfg.StartupTaint, Hostname: hostname, Source: source, Logger: log,
	})
	if err != nil {
		return nil, nil, fmt.Errorf("kubernetes client (%s): %w", source, err)
	}
	log.Info("Kubernetes API configured", "source", source, "node", cfg.NodeName, "customNetworking", cfg.CustomNetwork, "budgetLease", cfg.BudgetLease)
	return k, rc, nil
}
