package agent

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/vpcnet/vpcnet/agent/nodestate"
	"github.com/vpcnet/vpcnet/clock"
	"github.com/vpcnet/vpcnet/cloud"
	"github.com/vpcnet/vpcnet/introspect"
	"github.com/vpcnet/vpcnet/ipam"
)

// Custom networking (AWS_VPC_K8S_CNI_CUSTOM_NETWORK_CFG), as in the
// Amazon VPC CNI: pods get addresses on secondary ENIs created in the
// subnet and security groups of the node's ENIConfig; the primary ENI's
// addresses are not used for pods. It is the one Kubernetes feature
// readiness waits for: without the ENIConfig there is no subnet.

// bridgeKube is the Kubernetes bridge: it turns what the Kubernetes layer
// knows into diagnostics and, with custom networking, into the ENIConfig
// verdict the state machine plans with. It runs on its own goroutine: the
// subnet check calls EC2.
func (a *Agent) bridgeKube(ctx context.Context, wg *sync.WaitGroup) {
	wg.Add(1)
	go func() {
		defer wg.Done()
		checks := map[string]string{} // EC2's definitive verdicts on subnets ("" is usable)
		var last nodestate.ENIConfigUpdate
		var lastMaxPods introspect.MaxPods
		var lastBound []ipam.Pod
		var lastCordon bool
		first := true
		for {
			a.noteKube()
			lastMaxPods = a.noteMaxPods(ctx, lastMaxPods)
			lastCordon = a.noteCordon(ctx, lastCordon)
			lastBound = a.noteScheduled(ctx, lastBound)
			if a.cfg.CustomNetwork {
				up := a.evalENIConfig(ctx, checks)
				if first || up.OK != last.OK || up.Message != last.Message {
					a.send(ctx, up)
					a.eniConfigChanged(up)
				}
				first, last = false, up
			}
			tick, stop := clock.After(a.clk, a.cfg.ReconcileInterval)
			select {
			case <-ctx.Done():
				stop()
				return
			case <-a.kubeKick:
			case <-tick:
			}
			stop()
		}
	}()
}

// noteScheduled tells the state machine which pods the API server has
// bound to the node when that changed since last (the pods it was told):
// Adds on their way, whose attachments can start before they come.
func (a *Agent) noteScheduled(ctx context.Context, last []ipam.Pod) []ipam.Pod {
	pods := a.kube.ScheduledPods()
	if slices.Equal(pods, last) {
		return last
	}
	if !a.send(ctx, nodestate.PodsScheduled{Pods: pods}) {
		return last
	}
	return pods
}

// kubeChanged is the Kubernetes layer's callback; it must not block.
// The policy keeper hears it too: a pod just bound to this node gets its
// rules before its Add.
func (a *Agent) kubeChanged() {
	select {
	case a.kubeKick <- struct{}{}:
	default:
	}
	a.policy.changed()
}

// evalENIConfig decides whether the node's ENIConfig is usable now.
func (a *Agent) evalENIConfig(ctx context.Context, checks map[string]string) nodestate.ENIConfigUpdate {
	ks := a.kube.State()
	ec := ks.ENIConfig
	groups := ec.SecurityGroups
	if len(groups) == 0 {
		groups = a.info().self.Primary.SecurityGroups
	}
	var problem string
	switch {
	case !ks.Enabled:
		problem = "AWS_VPC_K8S_CNI_CUSTOM_NETWORK_CFG=true needs the Kubernetes API to read the node's ENIConfig, and none is configured: run in the cluster or set VPCNET_KUBECONFIG"
	case !ec.Found:
		problem = ec.Problem
	default:
		problem = a.checkENISubnet(ctx, ec, checks)
	}
	if problem != "" {
		return nodestate.ENIConfigUpdate{Message: problem}
	}
	return nodestate.ENIConfigUpdate{OK: true, SubnetID: ec.Subnet, SecurityGroups: groups,
		Message: fmt.Sprintf("ENIConfig %s (named by %s): new ENIs in %s with security groups %s; the primary ENI's addresses are not used for pods",
			ec.Name, ec.From, ec.Subnet, strings.Join(groups, ","))}
}

// eniConfigChanged reports a new verdict: readiness, the log, an Event.
func (a *Agent) eniConfigChanged(up nodestate.ENIConfigUpdate) {
	a.mu.Lock()
	a.eniCfgMsg = up.Message
	a.mu.Unlock()
	a.ready.set(CondENIConfig, up.OK, up.Message)
	if up.OK {
		a.log.Info("custom networking: using the node's ENIConfig", "subnet", up.SubnetID, "securityGroups", up.SecurityGroups)
		return
	}
	a.log.Warn("custom networking: ENIConfig not usable; no ENI is attached or detached until it is, and the node is not ready", "problem", up.Message)
	if a.kube.State().ENIConfig.Known {
		// A verdict, not the wait for one at start-up.
		a.kube.Record(Event{Warning: true, Reason: EventENIConfig, Message: up.Message})
	}
}

// checkENISubnet asks EC2 about the ENIConfig's subnet once: an ENI in
// another zone cannot attach to this instance, and one outside the VPC
// cannot exist here. It returns what is wrong, or "".
func (a *Agent) checkENISubnet(ctx context.Context, ec ENIConfigState, checks map[string]string) string {
	if verdict, known := checks[ec.Subnet]; known {
		return describeENIConfig(ec, verdict)
	}
	self := a.info().self
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	subnets, err := a.cloud.DescribeSubnets(cctx, ec.Subnet)
	if err != nil {
		verdict := fmt.Sprintf("EC2 could not describe it: %v", err)
		if cloud.IsNotFound(err) {
			checks[ec.Subnet] = verdict
		}
		return describeENIConfig(ec, verdict)
	}
	if len(subnets) != 1 {
		return describeENIConfig(ec, fmt.Sprintf("EC2 returned %d subnets for it", len(subnets)))
	}
	s := subnets[0]
	var verdict string
	switch {
	case s.AvailabilityZone != self.AvailabilityZone:
		verdict = fmt.Sprintf("it is in zone %s, but this node is in %s, and an ENI cannot attach across zones: give each zone its own ENIConfig (ENI_CONFIG_LABEL_DEF=topology.kubernetes.io/zone names them after the zone)", s.AvailabilityZone, self.AvailabilityZone)
	case !slices.ContainsFunc(self.VPCCIDRs, func(p netip.Prefix) bool { return p.Contains(s.CIDR.Addr()) }):
		verdict = fmt.Sprintf("its CIDR %s is outside this VPC's %s", s.CIDR, prefixStrings(self.VPCCIDRs))
	}
	checks[ec.Subnet] = verdict
	return describeENIConfig(ec, verdict)
}

// describeENIConfig names the ENIConfig and its subnet in front of what
// is wrong with the subnet, or returns "" when nothing is.
func describeENIConfig(ec ENIConfigState, problem string) string {
	if problem == "" {
		return ""
	}
	return fmt.Sprintf("ENIConfig %s (named by %s) names subnet %s: %s", ec.Name, ec.From, ec.Subnet, problem)
}
