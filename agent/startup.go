package agent

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/netip"
	"time"

	"github.com/vpcnet/vpcnet/checkpoint"
	"github.com/vpcnet/vpcnet/checkpoint/disk"
	"github.com/vpcnet/vpcnet/cloud"
	"github.com/vpcnet/vpcnet/ipam"
)

// step runs one start-up step and logs it with its duration.
func (a *Agent) step(name string, f func() error) error {
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
func (a *Agent) retry(ctx context.Context, what, cond string, f func() error) error {
	backoff := 500 * time.Millisecond
	for {
		err := f()
		if err == nil {
			return nil
		}
		a.ready.set(cond, false, fmt.Sprintf("%s: %v", what, err))
		a.log.Warn("start-up step will be retried", "step", what, "in", backoff.String(), "err", err)
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s: %w (last error: %v)", what, ctx.Err(), err)
		case <-time.After(backoff):
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
	lim, note := a.instanceLimits(ctx, self)
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
	// is read; no ENI is attached before (see applyENIConfig).
	cfg.SubnetID = self.Primary.SubnetID
	cfg.SecurityGroups = self.Primary.SecurityGroups
	cfg.CustomNetworking = a.cfg.CustomNetwork
	if err := cfg.Validate(); err != nil {
		return err
	}
	if err := lim.Validate(); err != nil {
		return fmt.Errorf("instance type %s: %w", self.InstanceType, err)
	}
	a.mu.Lock()
	a.self, a.limits, a.planCfg, a.limitsSource = self, lim, cfg, note
	a.node = NodeNet{
		PrimaryMAC: self.Primary.MAC, PrimaryIP: self.Primary.PrimaryIP(), VPCCIDRs: self.VPCCIDRs,
		ExcludeSNATCIDRs: a.cfg.ExcludeSNATCIDRs, ExternalSNAT: a.cfg.ExternalSNAT,
		RandomizeSNAT: a.cfg.RandomizeSNAT, MTU: a.cfg.ENIMTU,
	}
	a.mu.Unlock()
	a.log.Info("node learned", "instance", self.InstanceID, "type", self.InstanceType, "az", self.AvailabilityZone,
		"primaryENI", self.Primary.ID, "subnet", self.Primary.SubnetID, "maxENIs", lim.MaxENIs, "ipv4PerENI", lim.IPv4PerENI, "limits", note)
	return nil
}

// instanceLimits returns the type's limits and where they came from.
func (a *Agent) instanceLimits(ctx context.Context, self cloud.Self) (ipam.Limits, string) {
	l, err := a.cloud.InstanceLimits(ctx, self.InstanceType)
	if err == nil {
		return ipam.Limits{MaxENIs: l.MaxENIs, IPv4PerENI: l.IPv4PerENI}, "table or DescribeInstanceTypes"
	}
	// Observed lower bounds: what is attached now is certainly allowed.
	obs := ipam.Limits{MaxENIs: max(1, len(self.Interfaces)), IPv4PerENI: 2}
	for _, i := range self.Interfaces {
		obs.IPv4PerENI = max(obs.IPv4PerENI, len(i.IPv4s)+len(i.Prefixes))
	}
	a.log.Warn("instance type limits unknown: running with what is attached now; pods beyond that wait",
		"type", self.InstanceType, "maxENIs", obs.MaxENIs, "ipv4PerENI", obs.IPv4PerENI, "err", err)
	return obs, fmt.Sprintf("observed (instance type %s unknown: %v)", self.InstanceType, err)
}

// loadCheckpoint reads ours, else the Amazon VPC CNI's for an in-place
// migration. missing says neither exists: a new node, or a lost file. A
// corrupt file stops the agent; disk.Load has copied it aside and never
// overwrites it.
func (a *Agent) loadCheckpoint() (st checkpoint.State, missing bool, err error) {
	st, err = disk.Load(a.cfg.CheckpointPath())
	if err == nil {
		a.log.Info("checkpoint loaded", "path", a.cfg.CheckpointPath(), "assignments", len(st.Entries))
		return st, false, nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return st, false, err
	}
	if a.cfg.AWSCNICheckpoint != "" {
		st, err = disk.Load(a.cfg.AWSCNICheckpoint)
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

// restore marks every checkpointed assignment as held. An entry whose
// address is on no attached ENI is kept on disk and reported, never
// released. After a restart every other address cools down once, since
// when each was last freed was not recorded.
func (a *Agent) restore(st checkpoint.State, missing bool) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	now := a.now()
	for _, e := range st.Entries {
		if _, err := a.pool.Restore(e.Key, e.Pod, e.Addr, e.AssignedAt); err != nil {
			a.stale = append(a.stale, e)
			a.log.Error("checkpoint entry not restored: kept on disk and never released automatically", "key", e.Key.String(), "pod", e.Pod.String(), "addr", e.Addr.String(), "err", err)
		}
	}
	a.met.staleEntries.Set(float64(len(a.stale)))
	if !missing {
		for _, es := range a.pool.Snapshot(now).ENIs {
			for _, b := range es.Blocks {
				for ip := b.Prefix.Addr(); b.Prefix.Contains(ip); ip = ip.Next() {
					if _, held := a.pool.LookupAddr(ip); !held {
						_ = a.pool.RestoreCooldown(ip, now)
					}
				}
			}
		}
	}
	return a.saveLocked(nil)
}

// checkHost compares the host's pod routes with the pool. An address the
// host routes to a pod but the checkpoint does not know is quarantined:
// nobody is given it, and nothing is released while any exist. When the
// route goes, so does the quarantine.
func (a *Agent) checkHost(ctx context.Context) error {
	addrs, err := a.host.PodAddrs(ctx)
	if err != nil {
		a.mu.Lock()
		a.hold = fmt.Sprintf("cannot read the host's pod routes (%v): what live pods use is unknown", err)
		a.mu.Unlock()
		return fmt.Errorf("read host pod routes: %w", err)
	}
	routed := make(map[netip.Addr]bool, len(addrs))
	a.mu.Lock()
	defer a.mu.Unlock()
	now := a.now()
	for _, ip := range addrs {
		routed[ip] = true
		if _, held := a.pool.LookupAddr(ip); held || a.quarantined[ip] {
			continue
		}
		if _, err := a.pool.Restore(quarantineKey(ip), ipam.Pod{}, ip, now); err != nil {
			var cooling *ipam.AddrCoolingError
			if errors.As(err, &cooling) {
				// The plugin's DEL releases the address before it unwires
				// the pod; the route goes a moment later. If it outlives
				// the cooldown, the address is quarantined then.
				a.log.Debug("released pod address still routed while its DEL finishes", "addr", ip.String(), "coolsUntil", cooling.Until)
				continue
			}
			a.log.Error("host routes a pod address the pool cannot hold", "addr", ip.String(), "err", err)
			continue
		}
		a.quarantined[ip] = true
		a.log.Warn("host routes a pod address the checkpoint does not know: quarantined, and nothing is released until the route is gone", "addr", ip.String())
	}
	for ip := range a.quarantined {
		if !routed[ip] {
			a.pool.Unassign(quarantineKey(ip), now)
			delete(a.quarantined, ip)
			a.log.Info("quarantine lifted: the host no longer routes to the address", "addr", ip.String())
		}
	}
	a.met.unknownRoutes.Set(float64(len(a.quarantined)))
	a.hold = ""
	if n := len(a.quarantined); n > 0 {
		a.hold = fmt.Sprintf("%d pod address(es) routed on the host are not in the checkpoint; see /v1/status", n)
	}
	return nil
}
