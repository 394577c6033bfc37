package agent

import (
	"context"
	"fmt"

	"github.com/vpcnet/vpcnet/agent/nodestate"
	"github.com/vpcnet/vpcnet/config"
	"github.com/vpcnet/vpcnet/introspect"
	"github.com/vpcnet/vpcnet/limits"
)

// Max pods (issue 12): the pool never grows past what the node's max pods
// can use, so the planner must know the value the scheduler works with.
// That is the kubelet's (the Node's status.capacity.pods) once the
// Kubernetes layer has read it; MAX_PODS on nodes without the API; else
// EKS's rule. A kubelet that advertises more pods than the node can
// address, or far fewer than it could run, is reported: pods past the
// first fail, and the second wastes the node.

// Where the max pods in effect came from, as /v1/status says.
const (
	MaxPodsFromKubelet = "kubelet"
	MaxPodsFromSetting = "MAX_PODS"
	MaxPodsFromRule    = "EKS rule"
)

// Event reasons of the max pods checks.
const (
	EventMaxPodsAboveAddressable = "MaxPodsAboveAddressable"
	EventMaxPodsBelowCapacity    = "MaxPodsBelowCapacity"
)

// maxPodsBase is what start-up learned: the numbers every verdict
// compares against.
type maxPodsBase struct {
	setting     int // MAX_PODS; 0: unset
	addressable int // the most pods the pod ENIs can address
	recommended int // EKS's recommended value (capped at 110 or 250)
	rule        int // the default: EKS's rule for the mode
	shape       string
}

func newMaxPodsBase(l limits.Limits, cfg config.Config) maxPodsBase {
	shape := limits.PodShape{PrefixDelegation: cfg.PrefixDelegation, CustomNetworking: cfg.CustomNetwork, MaxENI: cfg.MaxENI}
	desc := "secondary addresses"
	if cfg.PrefixDelegation && l.SupportsPrefixDelegation() {
		desc = "/28 prefixes"
	}
	return maxPodsBase{
		setting:     cfg.MaxPods,
		addressable: l.AddressablePods(shape),
		recommended: l.RecommendedMaxPods(shape),
		rule:        l.DefaultMaxPods(shape),
		shape:       fmt.Sprintf("%s with %s", l.InstanceType, desc),
	}
}

// startValue is the max pods to plan with before the kubelet's is known.
func (b maxPodsBase) startValue() int {
	if b.setting > 0 {
		return b.setting
	}
	return b.rule
}

// resolve decides the max pods in effect from the kubelet's value (0:
// unknown) and judges it.
func (b maxPodsBase) resolve(kubelet int) introspect.MaxPods {
	mp := introspect.MaxPods{Kubelet: kubelet, Setting: b.setting, Rule: b.rule, Addressable: b.addressable, Recommended: b.recommended}
	who := ""
	switch {
	case kubelet > 0:
		mp.Value, mp.Source, who = kubelet, MaxPodsFromKubelet, "the kubelet advertises"
	case b.setting > 0:
		mp.Value, mp.Source, who = b.setting, MaxPodsFromSetting, "MAX_PODS says"
	default:
		mp.Value, mp.Source = b.rule, MaxPodsFromRule
		return mp
	}
	switch {
	case b.addressable > 0 && mp.Value > b.addressable:
		mp.Problem = fmt.Sprintf("%s %d pods, but this node (%s) can address only %d: pods past %d fail with \"max pods\"; set the kubelet's max pods (--max-pods or maxPods) to %d, or give the node more addresses (ENABLE_PREFIX_DELEGATION=true on Nitro, a larger instance type)",
			who, mp.Value, b.shape, b.addressable, b.addressable, b.recommended)
		mp.Warning = true
	case mp.Value*2 < b.recommended:
		mp.Problem = fmt.Sprintf("%s %d pods, but this node (%s) could run %d (EKS's recommended max pods); raise the kubelet's max pods (--max-pods or maxPods) to %d to use it",
			who, mp.Value, b.shape, b.recommended, b.recommended)
	}
	return mp
}

// noteMaxPods follows the kubelet's max pods: the state machine plans with
// the value in effect, and a new verdict is logged, recorded on the Node
// and shown in /v1/status and the metrics. last is the previous call's
// result; the first call has the zero value.
func (a *Agent) noteMaxPods(ctx context.Context, last introspect.MaxPods) introspect.MaxPods {
	b := a.info().maxPods
	mp := b.resolve(a.kube.State().MaxPods)
	if mp.Value != last.Value && mp.Value > 0 {
		a.send(ctx, nodestate.MaxPodsUpdate{MaxPods: mp.Value})
		a.log.Info("max pods", "value", mp.Value, "source", mp.Source, "addressable", mp.Addressable, "recommended", mp.Recommended)
	}
	a.mu.Lock()
	a.maxPods = mp
	a.mu.Unlock()
	a.met.maxPods.Set(float64(mp.Value))
	a.met.addressablePods.Set(float64(mp.Addressable))
	above, below := 0.0, 0.0
	if mp.Problem != "" && mp.Warning {
		above = 1
	} else if mp.Problem != "" {
		below = 1
	}
	a.met.maxPodsMismatch.WithLabelValues("above_addressable").Set(above)
	a.met.maxPodsMismatch.WithLabelValues("below_capacity").Set(below)
	if mp.Problem != "" && mp.Problem != last.Problem {
		reason := EventMaxPodsBelowCapacity
		if mp.Warning {
			reason = EventMaxPodsAboveAddressable
		}
		a.log.Warn("max pods does not fit this node", "problem", mp.Problem)
		a.kube.Record(Event{Warning: mp.Warning, Reason: reason, Message: mp.Problem})
	}
	return mp
}
