// Command vpcnetd is vpcnet's node agent. Every setting comes from the
// environment (docs/settings.md); an invalid one stops it with one line
// naming each bad variable.
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

	"github.com/vpcnet/vpcnet/agent"
	"github.com/vpcnet/vpcnet/cloud"
	"github.com/vpcnet/vpcnet/config"
	"github.com/vpcnet/vpcnet/dataplane"
	"github.com/vpcnet/vpcnet/leakgc"
)

func main() {
	cfg, err := config.Load(os.LookupEnv)
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
	c, err := cloud.New(ctx, cloud.Options{
		EC2Endpoint: cfg.EC2Endpoint, IMDSEndpoint: cfg.IMDSEndpoint, ClusterName: cfg.ClusterName,
		CallTimeout: cfg.EC2CallTimeout, Registerer: reg, Logger: log,
	})
	if err != nil {
		return fmt.Errorf("EC2 client: %w", err)
	}
	dp, err := dataplane.New(dataplane.Options{Log: log, VethPrefix: cfg.VethPrefix})
	if err != nil {
		return fmt.Errorf("dataplane: %w", err)
	}
	if !cfg.DisableLeakedENICleanup {
		gc, err := leakgc.New(leakgc.Options{
			Cloud: c, ClusterName: cfg.ClusterName, InstanceID: c.InstanceID(),
			Grace: cfg.LeakedENIGrace, Logger: log, Registerer: reg,
		})
		if err != nil {
			return fmt.Errorf("leaked-ENI collector: %w", err)
		}
		go gc.Run(ctx)
	}
	a, err := agent.New(agent.Options{Config: cfg, Cloud: c, Host: host{dp}, Logger: log, Registerer: reg, Gatherer: reg})
	if err != nil {
		return err
	}
	return a.Run(ctx)
}
