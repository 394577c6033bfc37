package agent

import (
	"context"
	"fmt"
	"time"

	"github.com/vpcnet/vpcnet/agent/nodestate"
	"github.com/vpcnet/vpcnet/cniconf"
)

// publish stores a summary of the node state for readers that must not
// wait for the owner (metrics, readiness), re-evaluates the conditions
// that change after start-up, and installs the CNI configuration the
// first time all hold. The write happens off the owner goroutine.
func (a *Agent) publish(ctx context.Context) {
	now := a.clk.Now()
	v := a.node.Summary(now)
	a.summary.Store(&health{view: v})
	a.met.unknownRoutes.Set(float64(len(v.Quarantined)))
	a.met.staleEntries.Set(float64(len(v.Stale)))
	a.updateReadiness(ctx, v)
}

func (a *Agent) updateReadiness(ctx context.Context, v nodestate.View) {
	st, short, growErr := v.Stats, v.Shortfall, v.LastGrowErr
	if v.CloudOK {
		a.ready.set(CondCloud, true, "EC2 reachable; pool matches what EC2 says is attached")
	} else {
		a.ready.set(CondCloud, false, "EC2 unreachable: "+v.LastEC2Err)
	}
	switch {
	case st.Free == 0 && st.Cooling == 0 && v.Growing && a.confState.Load() == confNone:
		// At start-up, the first addresses are on their way: ready once
		// they are in hand, so the first pods do not wait for them.
		a.ready.set(CondAddresses, false, "waiting for EC2 to deliver the first addresses")
	case st.Free > 0:
		a.ready.set(CondAddresses, true, fmt.Sprintf("%d addresses free", st.Free))
	case st.Cooling > 0:
		a.ready.set(CondAddresses, true, fmt.Sprintf("no address free now; %d come out of cooldown from %s", st.Cooling, st.NextFree.Format(time.RFC3339)))
	case v.CloudOK && !short.Short() && growErr == nil:
		a.ready.set(CondAddresses, true, "no address free now; more obtainable from EC2")
	case short.Short():
		a.ready.set(CondAddresses, false, short.String())
	case growErr != nil:
		a.ready.set(CondAddresses, false, "no address free and growing the pool failed: "+growErr.Error())
	default:
		a.ready.set(CondAddresses, false, "no address free and EC2 unreachable")
	}
	ready, _ := a.ready.get()
	if ready && a.confState.CompareAndSwap(confNone, confWriting) {
		a.confWG.Add(1)
		a.fx.Go(ctx, Work{Run: func(ctx context.Context, tell func(nodestate.Event) bool) {
			defer a.confWG.Done()
			a.installConf(tell)
		}})
	}
	// Only once the configuration is written may the startup taint go:
	// the node can network its pods.
	a.kube.SetReady(ready && a.confState.Load() == confWritten)
}

// egressV4 is the IPv4 egress plugin's entry of an IPv6 node with
// ENABLE_V4_EGRESS=true (aws-node's default), as aws-node's entrypoint
// renders egress-cni's: SNAT to the node's primary IPv4 address, the
// pods' MTU, AWS_VPC_K8S_CNI_RANDOMIZESNAT. nil otherwise: an IPv4 node,
// or IPv6 pods with no IPv4 egress, as aws-node leaves egress-cni
// disabled then.
func (a *Agent) egressV4() *cniconf.EgressV4Conf {
	b := a.bootp.Load()
	if !a.cfg.IPv6 || !a.cfg.V4Egress || b == nil {
		return nil
	}
	e := cniconf.EgressV4(b.node.PrimaryIP, a.cfg.PodMTU, a.cfg.RandomizeSNAT)
	e.IPAM.DataDir = a.cfg.EgressV4IPAMDir
	return &e
}

// pluginTimeoutSlack is how much longer than VPCNET_ADD_WAIT the plugin
// waits for the agent's answer to an Add: the longest the machine holds
// an Add past it (nodestate.AnswerSlack), and 5 s for the answer to
// reach the plugin.
const pluginTimeoutSlack = nodestate.AnswerSlack + 5*time.Second

// The CNI configuration's state: not yet written, being written, written.
const (
	confNone int32 = iota
	confWriting
	confWritten
)

func (a *Agent) installConf(tell func(nodestate.Event) bool) {
	// Bandwidth is chained as aws-node chains it (ENABLE_BANDWIDTH_PLUGIN):
	// after the plugin that wires the pod, taking the runtime's
	// bandwidth capability from the pod's annotations.
	// The plugin waits for the agent's longest answer to an Add, a
	// wait for an address, with room for the checkpoint and the pod's
	// policy rules.
	opts := cniconf.Options{NetworkName: a.cfg.NetworkName, Socket: a.cfg.Socket, HostPorts: true, Bandwidth: a.cfg.BandwidthPlugin,
		IPv6: a.cfg.IPv6, Timeout: a.cfg.AddWait + pluginTimeoutSlack, EgressV4: a.egressV4()}
	if err := a.disk.InstallConf(a.cfg.CNIConfDir, a.cfg.CNIConfName, opts); err != nil {
		a.log.Error("could not write the CNI configuration; kubelet keeps the node network unready; trying again at the next change", "err", err)
		a.confState.Store(confNone)
		return
	}
	// After a switch-over aws-node's configuration would still win: the
	// runtime takes the first file by name.
	moved, err := cniconf.Supersede(a.cfg.CNIConfDir, a.cfg.CNIConfName)
	for _, m := range moved {
		a.log.Warn("moved the Amazon VPC CNI's CNI configuration aside: it sorts before vpcnet's, so the runtime would have sent new pods to aws-node", "path", m, "now", m+cniconf.SupersededSuffix)
	}
	if err != nil {
		a.log.Error("could not move the Amazon VPC CNI's CNI configuration aside; new pods go to aws-node's plugin until it is removed; trying again at the next change", "err", err)
		a.confState.Store(confNone)
		return
	}
	a.confState.Store(confWritten)
	a.log.Info("ready: CNI configuration written", "path", a.cfg.CNIConfPath())
	a.kube.SetReady(true)
	// Wake the owner so readiness is published with the file in place.
	tell(nodestate.Tick{})
}
