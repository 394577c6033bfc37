package agent

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/vpcnet/vpcnet/cloud"
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
)

// Add gives key an address, waiting up to the configured time for the
// reconciler to bring more when the pool is empty. The same key always
// gets the same address. The assignment is on disk before Add returns.
func (a *Agent) Add(ctx context.Context, key ipam.Key, pod ipam.Pod) (as ipam.Assignment, err error) {
	defer a.met.observeRPC("add", a.now(), &err)
	deadline := time.NewTimer(a.cfg.AddWait)
	defer deadline.Stop()
	for {
		a.mu.Lock()
		as, err := a.assignLocked(key, pod)
		var nf *ipam.NoFreeAddressError
		if !errors.As(err, &nf) {
			a.mu.Unlock()
			if err == nil {
				// Each address taken lowers what is available; the
				// reconciler restores the warm target now rather than at
				// the next periodic pass, so the next pods do not wait.
				a.kick()
			}
			return as, err
		}
		a.waiting++
		avail := a.avail
		wake := a.coolingWake(nf.Stats)
		a.mu.Unlock()
		a.kick()

		var timedOut bool
		select {
		case <-avail:
		case <-wake:
		case <-deadline.C:
			timedOut = true
		case <-ctx.Done():
			timedOut = true
		}
		a.mu.Lock()
		a.waiting--
		if timedOut {
			// One last try: addresses may have arrived as the timer fired.
			if as, err := a.assignLocked(key, pod); err == nil {
				a.mu.Unlock()
				return as, nil
			}
			noAddr := a.explainLocked(pod)
			a.mu.Unlock()
			a.met.noAddress.WithLabelValues(noAddr.Reason).Inc()
			a.recordNoAddress(noAddr)
			return ipam.Assignment{}, noAddr
		}
		a.mu.Unlock()
	}
}

// assignLocked assigns and persists, or changes nothing.
func (a *Agent) assignLocked(key ipam.Key, pod ipam.Pod) (ipam.Assignment, error) {
	if as, ok := a.pool.Lookup(key); ok {
		return as, nil
	}
	as, err := a.pool.Assign(key, pod, a.now())
	if err != nil {
		return ipam.Assignment{}, err
	}
	stale := slices.Clone(a.stale)
	dropped := a.dropStaleLocked(key)
	if err := a.saveLocked(nil); err != nil {
		// Not durable, so not given: the address cools down as if freed,
		// which is the safe side if the write did reach the disk, and the
		// stale entry stays for the next write.
		a.pool.Unassign(key, a.now())
		a.stale = stale
		return ipam.Assignment{}, fmt.Errorf("assign %s: %w", key, err)
	}
	if dropped {
		a.log.Warn("stale checkpoint entry replaced: the runtime added the attachment again", "key", key.String())
	}
	a.log.Info("assigned", "key", key.String(), "pod", pod.String(), "addr", as.Addr.String(), "eni", as.ENIID)
	return as, nil
}

// coolingWake fires when the first cooling address comes free, so a waiting
// Add does not sleep through it.
func (a *Agent) coolingWake(st ipam.Stats) <-chan time.Time {
	if st.NextFree.IsZero() {
		return nil
	}
	d := st.NextFree.Sub(a.now())
	if d < 0 {
		d = 0
	}
	return time.After(d)
}

// explainLocked turns the planner's shortfall and the last EC2 failure into
// the error the pod's Event and kubelet show.
func (a *Agent) explainLocked(pod ipam.Pod) *NoAddressError {
	st := a.pool.Stats(a.now())
	e := &NoAddressError{Pod: pod, Stats: st}
	sf, growErr := a.lastShortfall, a.lastGrowErr
	switch {
	case a.cfg.CustomNetwork && !a.eniCfgOK:
		e.Reason = ReasonENIConfig
		e.Detail = "custom networking: no ENI can be attached for pod addresses: " + a.eniCfgMsg
	case growErr != nil && cloud.IsSubnetExhausted(growErr):
		e.Reason = ReasonSubnetExhausted
		e.Detail = fmt.Sprintf("subnet %s has no free addresses (%s); add capacity with a larger or additional subnet (custom networking ENIConfig), or lower WARM_IP_TARGET/WARM_ENI_TARGET on other nodes", a.planCfg.SubnetID, cloud.ErrorCode(growErr))
	case growErr != nil && cloud.IsAttachmentLimit(growErr):
		e.Reason = ReasonENILimit
		e.Detail = fmt.Sprintf("EC2 refused another ENI on %s (%s); use a larger instance type or enable prefix delegation", a.self.InstanceType, cloud.ErrorCode(growErr))
	case growErr != nil && cloud.IsUnauthorized(growErr):
		e.Reason = ReasonUnauthorized
		e.Detail = fmt.Sprintf("the node's IAM role may not call EC2: %v; grant the actions in deploy/iam-policy.json", growErr)
	case growErr != nil && cloud.IsThrottled(growErr):
		e.Reason = ReasonThrottled
		e.Detail = "EC2 is throttling this account (RequestLimitExceeded); the agent retries with backoff; lower the warm targets cluster-wide or spread node start-ups"
	case sf.Short() && sf.Limit == ipam.MaxPodsLimit:
		e.Reason = ReasonMaxPods
		e.Detail = fmt.Sprintf("the node already holds as many addresses as max pods (%d) can use; the scheduler should not place more pods here", sf.Max)
	case sf.Short():
		e.Reason = ReasonENILimit
		e.Detail = fmt.Sprintf("%s on %s", sf.String(), a.self.InstanceType)
	case growErr != nil:
		e.Reason = ReasonEC2Error
		e.Detail = fmt.Sprintf("growing the pool failed: %v", growErr)
	case st.Cooling > 0:
		e.Reason = ReasonCooldown
		e.Detail = fmt.Sprintf("every address is held or cooling down after release (IP_COOLDOWN_PERIOD=%s); retry shortly", a.cfg.Cooldown)
	default:
		e.Reason = ReasonPending
		e.Detail = fmt.Sprintf("new addresses from EC2 did not arrive within %s; the runtime will retry", a.cfg.AddWait)
	}
	return e
}

// Del releases key's address into cooldown. Unknown keys succeed: the
// runtime may repeat a Del, or the agent may have restarted in between.
// The checkpoint without the key is written before the pool lets go, so a
// failed write changes nothing.
func (a *Agent) Del(ctx context.Context, key ipam.Key) (_ ipam.Assignment, _ bool, err error) {
	defer a.met.observeRPC("del", a.now(), &err)
	a.mu.Lock()
	defer a.mu.Unlock()
	_, held := a.pool.Lookup(key)
	stale := a.isStaleLocked(key)
	if !held && !stale {
		return ipam.Assignment{}, false, nil
	}
	if err := a.saveLocked(map[ipam.Key]bool{key: true}); err != nil {
		return ipam.Assignment{}, false, fmt.Errorf("release %s: %w", key, err)
	}
	a.dropStaleLocked(key)
	as, ok := a.pool.Unassign(key, a.now())
	if ok {
		a.log.Info("released", "key", key.String(), "pod", as.Pod.String(), "addr", as.Addr.String(), "cooldown", a.cfg.Cooldown.String())
	}
	a.kick()
	return as, ok, nil
}

// GC releases every assignment of network that the runtime no longer has,
// once it is older than the cooldown: an attachment whose ADD is still in
// flight is not yet in the runtime's list and must not be collected.
func (a *Agent) GC(ctx context.Context, network string, valid map[ipam.Key]bool) (_ []ipam.Assignment, err error) {
	defer a.met.observeRPC("gc", a.now(), &err)
	a.mu.Lock()
	defer a.mu.Unlock()
	now := a.now()
	var gone []ipam.Assignment
	for _, as := range a.pool.Assignments() {
		if as.Key.Network != network || valid[as.Key] || isQuarantine(as.Key) || now.Sub(as.AssignedAt) < a.cfg.Cooldown {
			continue
		}
		gone = append(gone, as)
	}
	if len(gone) == 0 {
		return nil, nil
	}
	without := make(map[ipam.Key]bool, len(gone))
	for _, as := range gone {
		without[as.Key] = true
	}
	if err := a.saveLocked(without); err != nil {
		return nil, fmt.Errorf("garbage-collect %s: %w", network, err)
	}
	for _, as := range gone {
		a.pool.Unassign(as.Key, now)
		a.log.Info("released by GC: the runtime no longer has the attachment", "key", as.Key.String(), "pod", as.Pod.String(), "addr", as.Addr.String())
	}
	a.kick()
	return gone, nil
}
