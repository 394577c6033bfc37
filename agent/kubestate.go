package agent

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// startKube runs the Kubernetes layer beside the agent. Nothing the agent
// does for pods already known waits for it.
func (a *Agent) startKube(ctx context.Context, wg *sync.WaitGroup) {
	self := a.info().self
	inst := Instance{ID: self.InstanceID, AvailabilityZone: self.AvailabilityZone}
	wg.Add(1)
	go func() {
		defer wg.Done()
		if err := a.kube.Run(ctx, inst, a.kubeChanged); err != nil {
			a.log.Error("Kubernetes layer stopped; node identity, Events, custom networking and the startup taint are off", "err", err)
		}
	}()
}

// noteKube sets the diagnostic conditions from the Kubernetes layer's
// state, and returns the ENIConfig it holds.
func (a *Agent) noteKube() ENIConfigState {
	ks := a.kube.State()
	ok, msg := kubeAPICondition(ks)
	a.diag.set(CondKubernetes, ok, msg)
	ok, msg = nodeIdentityCondition(ks)
	a.diag.set(CondNodeIdentity, ok, msg)
	switch {
	case ks.Enabled:
		a.diag.set(CondStartupTaint, ks.TaintRemoved, ks.StartupTaint)
	case a.cfg.StartupTaint != "":
		a.diag.set(CondStartupTaint, false, fmt.Sprintf("VPCNET_STARTUP_TAINT=%s, but there is no Kubernetes API to remove it with", a.cfg.StartupTaint))
	default:
		a.diag.set(CondStartupTaint, true, "none: VPCNET_STARTUP_TAINT is empty")
	}
	return ks.ENIConfig
}

func kubeAPICondition(ks KubeState) (bool, string) {
	switch {
	case !ks.Enabled:
		return false, "no Kubernetes API: " + ks.Source
	case ks.Since.IsZero():
		return false, fmt.Sprintf("connecting to the API server (%s)", ks.Source)
	case !ks.Reachable:
		return false, fmt.Sprintf("unreachable since %s: %s; pods already known keep their addresses, while Events wait in a bounded queue, the startup taint waits, and custom networking keeps the ENIConfig it last read",
			ks.Since.UTC().Format(time.RFC3339), ks.LastError)
	case ks.LastError != "":
		return false, fmt.Sprintf("reachable (%s), but requests fail: %s", ks.Source, ks.LastError)
	}
	return true, fmt.Sprintf("reachable (%s)", ks.Source)
}

func nodeIdentityCondition(ks KubeState) (bool, string) {
	switch {
	case !ks.Enabled:
		return true, "not checked: no Kubernetes API"
	case ks.Node == "":
		return false, "Node not found: " + ks.NodeProblem
	case ks.Mismatch != "":
		return false, fmt.Sprintf("using Node %s (found by %s), but names disagree: %s", ks.Node, ks.NodeFoundBy, ks.Mismatch)
	}
	return true, fmt.Sprintf("Node %s, found by %s; its names agree", ks.Node, ks.NodeFoundBy)
}
