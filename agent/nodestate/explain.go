package nodestate

import (
	"errors"
	"fmt"
	"time"

	"github.com/vpcnet/vpcnet/ipam"
)

// NoAddressError says why a pod got no address: what ran out, where, and
// what an operator can do. Reason is a stable word for metrics and Events.
type NoAddressError struct {
	Pod    ipam.Pod
	Reason string
	Detail string
	Stats  ipam.Stats
}

func (e *NoAddressError) Error() string {
	return fmt.Sprintf("no address for pod %s: %s (pool: %s)", e.Pod, e.Detail, e.Stats)
}

// Reasons a pod can get no address.
const (
	ReasonSubnetExhausted = "subnet_exhausted"
	ReasonENILimit        = "eni_limit"
	ReasonMaxPods         = "max_pods"
	ReasonThrottled       = "ec2_throttled"
	ReasonUnauthorized    = "ec2_unauthorized"
	ReasonCooldown        = "cooldown"
	ReasonEC2Error        = "ec2_error"
	ReasonPending         = "pending"
	ReasonENIConfig       = "eniconfig_not_ready"
	ReasonCordoned        = "node_cordoned"
)

// explain turns the planner's shortfall and the last EC2 failure into the
// error the pod's Event and kubelet show; waited is how long the Add
// waited, when it fails now (zero while it is only being judged).
func (n *Node) explain(pod ipam.Pod, now time.Time, waited time.Duration) *NoAddressError {
	st := n.pool.Stats(now)
	e := &NoAddressError{Pod: pod, Stats: st}
	sf, growErr := n.cloud.lastShortfall, n.cloud.lastGrowErr
	c := n.classify(growErr)
	subnet, itype := n.cloud.plan.SubnetID, n.cfg.InstanceType
	switch {
	case n.cloud.plan.CustomNetworking && !n.cloud.eniCfgOK:
		e.Reason = ReasonENIConfig
		e.Detail = "custom networking: no ENI can be attached for pod addresses: " + n.cloud.eniCfgMsg
	case n.cloud.cordonHold:
		e.Reason = ReasonCordoned
		e.Detail = "the node is cordoned (taint node.kubernetes.io/unschedulable), and with AWS_MANAGE_ENIS_NON_SCHEDULABLE=false, as in the Amazon VPC CNI, no address is added while it is: uncordon the node, or set AWS_MANAGE_ENIS_NON_SCHEDULABLE=true"
	case growErr != nil && c.SubnetFragmented && n.frag.active:
		e.Reason = ReasonSubnetFragmented
		e.Detail = n.frag.message()
	case growErr != nil && (c.SubnetExhausted || c.SubnetFragmented):
		e.Reason = ReasonSubnetExhausted
		e.Detail = fmt.Sprintf("subnet %s has no free addresses (%s); add capacity with a larger or additional subnet (custom networking ENIConfig), or lower WARM_IP_TARGET/WARM_ENI_TARGET on other nodes", subnet, c.Code)
	case growErr != nil && c.AttachmentLimit:
		e.Reason = ReasonENILimit
		e.Detail = fmt.Sprintf("EC2 refused another ENI on %s (%s); use a larger instance type or enable prefix delegation", itype, c.Code)
	case growErr != nil && c.Unauthorized:
		e.Reason = ReasonUnauthorized
		e.Detail = fmt.Sprintf("the node's IAM role may not call EC2: %v; grant the actions in deploy/iam-policy.json", growErr)
	case growErr != nil && c.Throttled:
		e.Reason = ReasonThrottled
		e.Detail = "EC2 is throttling this account (RequestLimitExceeded); the agent retries with backoff; lower the warm targets cluster-wide or spread node start-ups"
	case sf.Short() && sf.Limit == ipam.MaxPodsLimit:
		e.Reason = ReasonMaxPods
		e.Detail = fmt.Sprintf("the node already holds as many addresses as max pods (%d) can use; the scheduler should not place more pods here", sf.Max)
	case sf.Short():
		e.Reason = ReasonENILimit
		e.Detail = fmt.Sprintf("%s on %s", sf.String(), itype)
	case growErr != nil:
		e.Reason = ReasonEC2Error
		e.Detail = fmt.Sprintf("growing the pool failed: %v", growErr)
	case st.Cooling > 0:
		e.Reason = ReasonCooldown
		e.Detail = fmt.Sprintf("every address is held or cooling down after release (IP_COOLDOWN_PERIOD=%s); the first comes free at %s; retry shortly",
			n.cfg.Cooldown, st.NextFree.UTC().Format(time.RFC3339))
	default:
		e.Reason = ReasonPending
		e.Detail = fmt.Sprintf("new addresses from EC2 did not arrive within %s; the runtime will retry", n.cfg.AddWait)
		if waited > n.cfg.AddWait {
			// Held past AddWait for addresses EC2 was making, or through
			// a budget controller's failover: say the wait it was.
			e.Detail = fmt.Sprintf("new addresses from EC2 did not arrive in the %s this ADD waited (VPCNET_ADD_WAIT=%s, and longer while EC2 was making them or the budget controller failed over); the runtime will retry",
				waited.Round(time.Second), n.cfg.AddWait)
		}
	}
	// Whatever ran out, addresses held for pods the host no longer has
	// are the first thing an operator should know: a larger instance
	// type does not fix a node whose DELs were lost.
	if k, due := n.heldForGone(now); k > 0 {
		e.Detail += fmt.Sprintf("; %d address(es) are held for pods the host no longer has (no route to them, and no DEL or CNI GC came): each is released once missing for VPCNET_RECLAIM_AFTER=%s, the first at %s",
			k, n.cfg.ReclaimAfter, due.UTC().Format(time.RFC3339))
	}
	return e
}

// onItsWay says whether an address may still come without anyone's
// help: EC2 is being asked (pending), will be asked again (throttled, an
// error that may pass), a released address is cooling down, or a
// fragmented subnet's fallback to single addresses is under way. The
// other reasons need an operator, or other pods to go.
func (e *NoAddressError) onItsWay() bool {
	switch e.Reason {
	case ReasonPending, ReasonThrottled, ReasonEC2Error, ReasonCooldown, ReasonSubnetFragmented:
		return true
	}
	return false
}

// IsNoAddress says whether err is a NoAddressError.
func IsNoAddress(err error) bool {
	var na *NoAddressError
	return errors.As(err, &na)
}

// growthNotice tells the Node why the pool could not grow.
func (n *Node) growthNotice(c ErrorClass, err error) {
	subnet, itype := n.cloud.plan.SubnetID, n.cfg.InstanceType
	switch {
	case c.SubnetFragmented:
		// The prefix fallback says so, with the free count and the fix.
	case c.SubnetExhausted:
		n.notice("SubnetExhausted", fmt.Sprintf("subnet %s has no free addresses (%s): pods on this node wait for addresses; add a larger or additional subnet (custom networking ENIConfig), or lower WARM_IP_TARGET/WARM_ENI_TARGET on other nodes", subnet, c.Code))
	case c.AttachmentLimit:
		n.notice("ENILimitReached", fmt.Sprintf("EC2 refused another ENI on this %s (%s); use a larger instance type or enable prefix delegation", itype, c.Code))
	}
}

// shortfallNotice tells the Node that pods wait and the instance has no
// room for another ENI.
func (n *Node) shortfallNotice(short ipam.Shortfall) {
	switch short.Limit {
	case ipam.InstanceENILimit:
		n.notice("ENILimitReached", fmt.Sprintf("pods wait for addresses, and all %d ENIs a %s allows are attached and full; use a larger instance type or enable prefix delegation", short.Max, n.cfg.InstanceType))
	case ipam.MaxENILimit:
		n.notice("ENILimitReached", fmt.Sprintf("pods wait for addresses, and MAX_ENI=%d ENIs are attached and full; raise MAX_ENI or lower the warm targets", short.Max))
	}
}

func (n *Node) notice(reason, msg string) {
	n.out.Notices = append(n.out.Notices, Notice{Warning: true, Reason: reason, Message: msg})
}
