package agent

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"time"

	"github.com/vpcnet/vpcnet/agent/executor"
	"github.com/vpcnet/vpcnet/agent/nodestate"
	"github.com/vpcnet/vpcnet/checkpoint"
	"github.com/vpcnet/vpcnet/cloud"
	"github.com/vpcnet/vpcnet/ipam"
	"github.com/vpcnet/vpcnet/limits"
)

// gracefulStop bounds how long in-flight plugin calls may finish at
// shutdown.
const gracefulStop = 10 * time.Second

// Start is vpcnetd's start-up for a driver that runs the agent on one
// thread instead of Run (the simulation, the scale driver): it learns the
// node and boots the owner. Once it returns nil the caller is the owner,
// and hands it events with Step. Run does the same steps, with the
// Kubernetes layer and the IAM preflight started in between.
func (a *Agent) Start(ctx context.Context) error {
	if err := a.learn(ctx); err != nil {
		return err
	}
	return a.boot(ctx)
}

// learn is start-up's first step: the node's identity and limits.
func (a *Agent) learn(ctx context.Context) error {
	return a.startStep("learn the node", func() error { return a.learnNode(ctx) })
}

// boot builds the owner's state (the executor, the state machine from
// the checkpoint, EC2 and the host), sets up host networking and settles
// the machine once: from here on the owner runs.
func (a *Agent) boot(ctx context.Context) error {
	self := a.info().self
	a.x = &executor.Executor{Cloud: a.cloud, Host: a.host, InstanceID: self.InstanceID, Self: self,
		ENIMTU: a.cfg.ENIMTU, Tags: a.cfg.AdditionalENITags, SubnetDiscovery: a.cfg.SubnetDiscovery, CustomNetwork: a.cfg.CustomNetwork,
		ClusterName: a.cfg.ClusterName, Now: a.clk.Now}
	if err := a.startStep("load the checkpoint", func() error {
		var err error
		a.node, err = a.bootNode(ctx)
		return err
	}); err != nil {
		a.ready.set(CondCheckpoint, false, err.Error())
		return err
	}
	a.ready.set(CondCheckpoint, true, "checkpoint loaded and reconciled with EC2 and the host's pod routes")
	if err := a.startStep("set up host networking", func() error { return a.host.Setup(ctx, a.info().node) }); err != nil {
		a.ready.set(CondHost, false, err.Error())
		return err
	}
	a.ready.set(CondHost, true, "host networking set up")
	a.settle(ctx)
	return nil
}

// startStep runs one start-up step and logs it with its duration.
func (a *Agent) startStep(name string, f func() error) error {
	start := a.now()
	err := f()
	d := a.now().Sub(start)
	if err != nil {
		a.log.Error("start-up step failed", "step", name, "duration", d.String(), "err", err)
		return fmt.Errorf("%s: %w", name, err)
	}
	a.log.Info("start-up step done", "step", name, "duration", d.String())
	return nil
}

// retry calls f until it succeeds or ctx ends, backing off up to 30 s.
// Start-up waits out an unreachable IMDS or EC2 instead of crash-looping.
// The waits are the Effects': a simulation moves its clock instead.
func (a *Agent) retry(ctx context.Context, what, cond string, f func() error) error {
	backoff := 500 * time.Millisecond
	for {
		err := f()
		if err == nil {
			return nil
		}
		a.ready.set(cond, false, fmt.Sprintf("%s: %v", what, err))
		a.log.Warn("start-up step will be retried", "step", what, "in", backoff.String(), "err", err)
		if !a.fx.Sleep(ctx, backoff) {
			return fmt.Errorf("%s: %w", what, errors.Join(ctx.Err(), err))
		}
		backoff = min(2*backoff, 30*time.Second)
	}
}

// learnNode reads the node's identity from IMDS and its limits from the
// table or EC2. An instance type nobody knows is not fatal (DESIGN.md story
// 1): the agent runs with the limits it can observe and says so.
func (a *Agent) learnNode(ctx context.Context) error {
	var self cloud.Self
	if err := a.retry(ctx, "describe this instance from IMDS", CondCloud, func() error {
		var err error
		self, err = a.cloud.DescribeSelf(ctx)
		return err
	}); err != nil {
		return err
	}
	full, note := a.instanceLimits(ctx, self)
	if a.cfg.IPv6 {
		if err := a.ipv6Refusal(ctx, self, full); err != nil {
			return err
		}
	}
	lim := ipam.Limits{MaxENIs: full.MaxENIs, IPv4PerENI: full.IPv4PerENI}
	cfg := ipam.DefaultPlanConfig()
	cfg.WarmENITarget = a.cfg.WarmENITarget
	cfg.WarmIPTarget = a.cfg.WarmIPTarget
	cfg.MinimumIPTarget = a.cfg.MinimumIPTarget
	if a.cfg.WarmPrefixTarget > 0 {
		cfg.WarmPrefixTarget = a.cfg.WarmPrefixTarget
	}
	cfg.MaxENI = a.cfg.MaxENI
	cfg.PrefixDelegation = a.cfg.PrefixDelegation
	cfg.ENIGracePeriod = a.cfg.ENIGrace
	// With custom networking these are placeholders until the ENIConfig
	// is read; no ENI is attached before (see bridgeKube).
	cfg.SubnetID = self.Primary.SubnetID
	cfg.SecurityGroups = self.Primary.SecurityGroups
	cfg.CustomNetworking = a.cfg.CustomNetwork
	mp := newMaxPodsBase(full, a.cfg)
	cfg.MaxPods = mp.startValue()
	if err := cfg.Validate(); err != nil {
		return err
	}
	if err := lim.Validate(); err != nil {
		return fmt.Errorf("instance type %s: %w", self.InstanceType, err)
	}
	a.bootp.Store(&bootInfo{self: self, limits: lim, limitsSource: note, planCfg: cfg, maxPods: mp, node: NodeNet{
		PrimaryMAC: self.Primary.MAC, PrimaryIP: self.Primary.PrimaryIP(), VPCCIDRs: self.VPCCIDRs,
		ExcludeSNATCIDRs: a.cfg.ExcludeSNATCIDRs, ExternalSNAT: a.cfg.ExternalSNAT,
		RandomizeSNAT: a.cfg.RandomizeSNAT, MTU: a.cfg.ENIMTU, DenyPodIMDS: a.cfg.PodIMDS == "deny", IPv6: a.cfg.IPv6,
	}})
	a.log.Info("node learned", "instance", self.InstanceID, "type", self.InstanceType, "az", self.AvailabilityZone,
		"primaryENI", self.Primary.ID, "subnet", self.Primary.SubnetID, "maxENIs", lim.MaxENIs, "ipv4PerENI", lim.IPv4PerENI, "limits", note,
		"maxPods", cfg.MaxPods, "addressablePods", mp.addressable)
	return nil
}

// instanceLimits returns the type's limits and where they came from.
func (a *Agent) instanceLimits(ctx context.Context, self cloud.Self) (limits.Limits, string) {
	if _, known := limits.Lookup(self.InstanceType); !known && a.budget != nil {
		// A type the table lacks is read from EC2, as every node of the
		// type starting at once does: the budget grants it (urgent: no
		// pod is served before).
		if err := a.budget.Acquire(ctx, []string{"DescribeInstanceTypes"}, startupNeed); err != nil {
			return limits.Limits{}, fmt.Sprintf("instance type %s: %v", self.InstanceType, err)
		}
	}
	l, err := a.cloud.InstanceLimits(ctx, self.InstanceType)
	if err == nil {
		return l, "table or DescribeInstanceTypes"
	}
	// Observed lower bounds: what is attached now is certainly allowed.
	// Only network card 0 counts: it is the one the pool attaches to.
	// Prefixes seen attached mean the type takes them.
	obs := limits.Limits{InstanceType: self.InstanceType, MaxENIs: 0, IPv4PerENI: 2, Hypervisor: limits.UnknownHypervisor}
	for _, i := range self.Interfaces {
		if i.NetworkCard == 0 {
			obs.MaxENIs++
		}
		obs.IPv4PerENI = max(obs.IPv4PerENI, len(i.IPv4s)+len(i.Prefixes))
		// An IPv6 /80 (aws-node's IPv6 mode left it) says so as well.
		if len(i.Prefixes) > 0 || len(i.IPv6Prefixes) > 0 {
			obs.Hypervisor = limits.Nitro
		}
	}
	obs.MaxENIs = max(1, obs.MaxENIs)
	a.log.Warn("instance type limits unknown: running with what is attached now; pods beyond that wait",
		"type", self.InstanceType, "maxENIs", obs.MaxENIs, "ipv4PerENI", obs.IPv4PerENI, "err", err)
	return obs, fmt.Sprintf("observed (instance type %s unknown: %v)", self.InstanceType, err)
}

// loadCheckpoint reads ours, else the Amazon VPC CNI's for an in-place
// migration. missing says neither exists: a new node, or a lost file. A
// corrupt file stops the agent; disk.Load has copied it aside and never
// overwrites it.
func (a *Agent) loadCheckpoint() (st checkpoint.State, missing bool, err error) {
	st, err = a.disk.Load(a.cfg.CheckpointPath())
	if err == nil {
		a.log.Info("checkpoint loaded", "path", a.cfg.CheckpointPath(), "assignments", len(st.Entries))
		return st, false, nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return st, false, err
	}
	if a.cfg.AWSCNICheckpoint != "" {
		st, err = a.disk.Load(a.cfg.AWSCNICheckpoint)
		if err == nil {
			a.log.Info("Amazon VPC CNI checkpoint imported", "path", a.cfg.AWSCNICheckpoint, "assignments", len(st.Entries))
			return st, false, nil
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return st, false, err
		}
	}
	a.log.Info("no checkpoint: treating the node as new unless the host shows live pods", "path", a.cfg.CheckpointPath())
	return checkpoint.State{}, true, nil
}

// bootNode reads the checkpoint, what EC2 says is attached (setting up
// the host side of secondary ENIs) and the host's pod routes, and builds
// the state machine from them. The host is read last, so a pod wired
// while EC2 was read is still seen.
func (a *Agent) bootNode(ctx context.Context) (*nodestate.Node, error) {
	st, missing, err := a.loadCheckpoint()
	if err != nil {
		return nil, err
	}
	boot := nodestate.Boot{Checkpoint: st, CheckpointMissing: missing}
	if err := a.retry(ctx, "read attached ENIs from EC2", CondCloud, func() error {
		// Every agent of a cluster restarting at once reads EC2 at once:
		// the budget, if any, spaces the reads out (urgent: the node
		// serves no pod until it has read EC2).
		if a.budget != nil {
			// The subnets new ENIs may use, which hold the secondary
			// ENIs', are read once (Executor.Boot).
			if err := a.budget.Acquire(ctx, []string{"DescribeNetworkInterfaces", "DescribeSubnets"}, startupNeed); err != nil {
				return err
			}
		}
		at, err := a.x.Boot(ctx)
		boot.ENIs, boot.Devices, boot.Unmanaged = at.ENIs, at.Devices, at.Unmanaged
		return err
	}); err != nil {
		return nil, err
	}
	if err := a.retry(ctx, "read the host's pod routes", CondHost, func() error {
		var err error
		boot.Routed, err = a.host.PodAddrs(ctx)
		return err
	}); err != nil {
		return nil, err
	}
	return nodestate.New(a.stateConfig(), boot, a.now())
}

// stateConfig is the state machine's configuration from the settings and
// what start-up learned.
func (a *Agent) stateConfig() nodestate.Config {
	b := a.info()
	return nodestate.Config{
		InstanceID: b.self.InstanceID, InstanceType: b.self.InstanceType, Plan: b.planCfg, Limits: b.limits,
		Cooldown: a.cfg.Cooldown, AddWait: a.cfg.AddWait, DemandMemory: a.cfg.DemandMemory, ReclaimAfter: a.cfg.ReclaimAfter, DetachHold: a.cfg.DetachHold,
		ResyncInterval: a.cfg.ReconcileInterval, AttachTimeout: a.attachTimeout, CustomNetwork: a.cfg.CustomNetwork,
		SubnetDiscovery: a.cfg.SubnetDiscovery && !a.cfg.CustomNetwork, IPv6: a.cfg.IPv6,
		Classify: executor.Classify, Log: a.log, HostVeth: a.hostVeth,
	}
}
