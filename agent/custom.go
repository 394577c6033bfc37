package agent

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/vpcnet/vpcnet/cloud"
	"github.com/vpcnet/vpcnet/ipam"
)

// Custom networking (AWS_VPC_K8S_CNI_CUSTOM_NETWORK_CFG), as in the
// Amazon VPC CNI: pods get addresses on secondary ENIs created in the
// subnet and security groups of the node's ENIConfig; the primary ENI's
// addresses are not used for pods. It is the one Kubernetes feature
// readiness waits for: without the ENIConfig there is no subnet.

// applyENIConfig brings the plan config in line with the node's ENIConfig
// as the Kubernetes layer last read it. Only the reconcile goroutine
// calls it, before it plans.
func (a *Agent) applyENIConfig(ctx context.Context) {
	if !a.cfg.CustomNetwork {
		return
	}
	ks := a.kube.State()
	ec := ks.ENIConfig
	a.mu.Lock()
	primarySGs := a.self.Primary.SecurityGroups
	a.mu.Unlock()
	groups := ec.SecurityGroups
	if len(groups) == 0 {
		groups = primarySGs
	}
	var problem string
	switch {
	case !ks.Enabled:
		problem = "AWS_VPC_K8S_CNI_CUSTOM_NETWORK_CFG=true needs the Kubernetes API to read the node's ENIConfig, and none is configured: run in the cluster or set VPCNET_KUBECONFIG"
	case !ec.Found:
		problem = ec.Problem
	default:
		problem = a.checkENISubnet(ctx, ec)
	}
	ok := problem == ""
	msg := problem
	if ok {
		msg = fmt.Sprintf("ENIConfig %s (named by %s): new ENIs in %s with security groups %s; the primary ENI's addresses are not used for pods",
			ec.Name, ec.From, ec.Subnet, strings.Join(groups, ","))
	}
	a.mu.Lock()
	changed := a.eniCfgOK != ok || a.eniCfgMsg != msg
	a.eniCfgOK, a.eniCfgMsg = ok, msg
	if ok {
		a.planCfg.SubnetID, a.planCfg.SecurityGroups = ec.Subnet, slices.Clone(groups)
	}
	a.mu.Unlock()
	a.ready.set(CondENIConfig, ok, msg)
	if !changed {
		return
	}
	if ok {
		a.log.Info("custom networking: using the node's ENIConfig", "eniConfig", ec.Name, "from", ec.From, "subnet", ec.Subnet, "securityGroups", groups)
		return
	}
	a.log.Warn("custom networking: ENIConfig not usable; no ENI is attached or detached until it is, and the node is not ready", "problem", problem)
	if ec.Known {
		// A verdict, not the wait for one at start-up.
		a.kube.Record(Event{Warning: true, Reason: EventENIConfig, Message: problem})
	}
}

// checkENISubnet asks EC2 about the ENIConfig's subnet once: an ENI in
// another zone cannot attach to this instance, and one outside the VPC
// cannot exist here. It returns what is wrong, or "".
func (a *Agent) checkENISubnet(ctx context.Context, ec ENIConfigState) string {
	a.mu.Lock()
	verdict, known := a.subnetChecks[ec.Subnet]
	az, vpc := a.self.AvailabilityZone, a.self.VPCCIDRs
	a.mu.Unlock()
	if known {
		return describeENIConfig(ec, verdict)
	}
	subnets, err := a.cloud.DescribeSubnets(ctx, ec.Subnet)
	if err != nil {
		a.recordUnauthorized(err)
		verdict = fmt.Sprintf("EC2 could not describe it: %v", err)
		if cloud.IsNotFound(err) {
			a.mu.Lock()
			a.subnetChecks[ec.Subnet] = verdict
			a.mu.Unlock()
		}
		return describeENIConfig(ec, verdict)
	}
	if len(subnets) != 1 {
		return describeENIConfig(ec, fmt.Sprintf("EC2 returned %d subnets for it", len(subnets)))
	}
	s := subnets[0]
	switch {
	case s.AvailabilityZone != az:
		verdict = fmt.Sprintf("it is in zone %s, but this node is in %s, and an ENI cannot attach across zones: give each zone its own ENIConfig (ENI_CONFIG_LABEL_DEF=topology.kubernetes.io/zone names them after the zone)", s.AvailabilityZone, az)
	case !slices.ContainsFunc(vpc, func(p netip.Prefix) bool { return p.Contains(s.CIDR.Addr()) }):
		verdict = fmt.Sprintf("its CIDR %s is outside this VPC's %s", s.CIDR, prefixStrings(vpc))
	}
	a.mu.Lock()
	a.subnetChecks[ec.Subnet] = verdict
	if verdict == "" {
		a.subnets[s.ID] = s.CIDR
	}
	a.mu.Unlock()
	return describeENIConfig(ec, verdict)
}

// describe names the ENIConfig and its subnet in front of what is wrong
// with the subnet, or returns "" when nothing is.
func describeENIConfig(ec ENIConfigState, problem string) string {
	if problem == "" {
		return ""
	}
	return fmt.Sprintf("ENIConfig %s (named by %s) names subnet %s: %s", ec.Name, ec.From, ec.Subnet, problem)
}

// withoutENIChanges drops attaches and detaches from a plan made while
// the ENIConfig is not usable: a new ENI has no subnet to go in, and a
// detach planned against an attach that will not happen would shrink the
// pool pods need. Addresses on existing secondary ENIs still come and go.
func withoutENIChanges(actions []ipam.Action) []ipam.Action {
	return slices.DeleteFunc(actions, func(act ipam.Action) bool {
		return act.Kind == ipam.AttachENI || act.Kind == ipam.DetachENI
	})
}

// usesPrimaryBlockLocked says whether the pool should hold block p of the
// primary ENI. With custom networking only blocks that pods hold (per the
// checkpoint being restored, or the pool) are kept, until they are free.
func (a *Agent) usesPrimaryBlockLocked(p netip.Prefix) bool {
	if !a.cfg.CustomNetwork {
		return true
	}
	for ip := range a.ckAddrs {
		if p.Contains(ip) {
			return true
		}
	}
	return false
}

// dropFreePrimaryBlocks takes out of the pool, with custom networking,
// blocks of the primary ENI that no pod holds any more, so no new pod is
// given one. They stay assigned in EC2.
func (a *Agent) dropFreePrimaryBlocks() {
	if !a.cfg.CustomNetwork {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	now := a.now()
	for _, es := range a.pool.Stats(now).ENIs {
		e, _ := a.pool.ENI(es.ID)
		if !e.Primary {
			continue
		}
		for _, b := range es.Blocks {
			if b.Assigned > 0 || b.Cooling > 0 {
				continue
			}
			if err := a.pool.RemoveBlock(b.Prefix, now); err == nil {
				a.log.Info("custom networking: address on the primary ENI no longer used for pods", "block", b.Prefix.String())
			}
		}
	}
}
