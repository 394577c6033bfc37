package simulation

import (
	"context"
	"math/rand/v2"
	"net/netip"
	"slices"
	"time"

	"github.com/vpcnet/vpcnet/agent/nodestate"
	"github.com/vpcnet/vpcnet/cloud"
	"github.com/vpcnet/vpcnet/ipam"
	"github.com/vpcnet/vpcnet/leakgc"
	"github.com/vpcnet/vpcnet/sim"
)

// check runs the invariants that hold after every step.
func (r *run) check() error {
	if r.grantErr != nil {
		return r.grantErr
	}
	onNode, err := r.ec2Addrs()
	if err != nil {
		return err
	}
	for name, p := range r.pods {
		if p.state == podAdding {
			continue
		}
		// I2: a live pod's address stays assigned on an attached ENI...
		if !onNode[p.addr.String()] && !slices.ContainsFunc(r.onNode6, func(q netip.Prefix) bool { return q.Contains(p.addr) }) {
			return r.fail("I2: live pod %s's address %s is no longer assigned on an ENI attached to the node", name, p.addr)
		}
		// ... and is never given to another pod by the agent.
		if r.agent != nil {
			k, held := r.agent.ag.Node().Holder(p.addr)
			if !held {
				return r.fail("I2: the agent holds nobody at %s, which live pod %s uses: it can be handed out", p.addr, name)
			}
			if k != p.key && !nodestate.IsQuarantine(k) {
				return r.fail("I2: the agent holds %s for %s, but live pod %s (%s) uses it", p.addr, k, name, p.key)
			}
		}
	}
	if err := r.checkDurable(); err != nil {
		return err
	}
	// I3: a restart with no pod change makes no mutating EC2 call.
	if a := r.agent; a != nil && a.i3 && r.tr.mutationCount() != a.i3Base {
		return r.fail("I3: %d mutating EC2 calls after a restart with no pod change", r.tr.mutationCount()-a.i3Base)
	}
	return nil
}

// quiesce stops faults and pod changes, lets the agent run for a bounded
// simulated time, and checks that it settled: I4 (the pool at its target,
// every deleted pod's address free) and I5 (DeleteOnTermination).
func (r *run) quiesce() error {
	r.step = r.opts.Steps + 1
	for _, a := range faultActions {
		r.cloud.SetFault(a, sim.Fault{})
	}
	r.host.mu.Lock()
	r.host.fail = false
	r.host.mu.Unlock()
	// The plugins finish wiring the pods they were answered for.
	if err := r.wireAll(); err != nil {
		return err
	}
	if r.agent == nil {
		if err := r.boot(); err != nil {
			return err
		}
	}
	// Pods still waiting for an address are given up by kubelet.
	for name, p := range r.pods {
		if p.state == podAdding {
			delete(r.pods, name)
			r.gone[p.key] = true
		}
	}
	// And deleted from the API server, as are the pods bound to the node
	// that never came: only the live pods stay bound.
	if r.bound {
		var ev nodestate.PodsScheduled
		names := make([]string, 0, len(r.pods))
		for name, p := range r.pods {
			if p.state == podLive {
				names = append(names, name)
			}
		}
		slices.Sort(names)
		for _, name := range names {
			ev.Pods = append(ev.Pods, ipam.Pod{Namespace: "default", Name: name})
		}
		if !slices.Equal(ev.Pods, r.stillBound().Pods) {
			r.agent.i3 = false // pods left the node: I3 no longer applies
		}
		if err := r.stepAgent(ev); err != nil {
			return err
		}
	}
	// The leaked-ENI collector runs on every node: ENIs whose attach
	// and then delete EC2 refused under the faults are its to delete, or
	// they hold the small subnet's addresses for good.
	gc, err := leakgc.New(leakgc.Options{Cloud: r.client, InstanceID: instanceID, Clock: r.clk,
		Rand: rand.New(rand.NewPCG(r.rng.Uint64(), 0)), DeleteLimiter: noWait{}})
	if err != nil {
		return err
	}
	deadline := r.clk.Now().Add(quiesceTime)
	for r.clk.Now().Before(deadline) {
		before := r.tr.mutationCount()
		r.unwatched = true // the collector has no budget client
		_, err := gc.Scan(r.ctx)
		r.unwatched = false
		if err != nil {
			return r.fail("leaked-ENI scan with no faults: %v", err)
		}
		if a := r.agent; a.i3 {
			// The collector's deletes are not the agent's doing: I3
			// counts only the agent's calls.
			a.i3Base += r.tr.mutationCount() - before
		}
		a := r.agent
		for i := 0; len(a.jobs) > 0 || a.write != nil; i++ {
			if i > 500 {
				return r.fail("the agent keeps handing out work without time passing: %d jobs, e.g. %s", len(a.jobs), a.jobs[0].Job.Kind)
			}
			if a.write != nil {
				if err := r.do.finishPersist(true); err != nil {
					return err
				}
			}
			if len(a.jobs) > 0 {
				if err := r.do.runJob(0, false); err != nil {
					return err
				}
			}
		}
		if err := r.check(); err != nil {
			return err
		}
		if err := r.do.advance(30 * time.Second); err != nil {
			return err
		}
	}
	for i := 0; len(r.agent.jobs) > 0 || r.agent.write != nil; i++ {
		if i > 500 {
			return r.fail("the agent keeps handing out work without time passing")
		}
		if r.agent.write != nil {
			if err := r.do.finishPersist(true); err != nil {
				return err
			}
		}
		if len(r.agent.jobs) > 0 {
			if err := r.do.runJob(0, false); err != nil {
				return err
			}
		}
	}
	return r.settled()
}

// noWait is the collector's delete pace in simulated time: none.
type noWait struct{}

func (noWait) Wait(context.Context) error { return nil }

func (r *run) settled() error {
	now := r.clk.Now()
	v := r.agent.ag.Node().View(now)
	// I4: the pool reaches the planner's target. Shrinking may be held
	// while a live pod the checkpoint lost is quarantined: by design.
	for _, act := range v.Planned {
		if act.Kind == ipam.AssignBlocks || act.Kind == ipam.AttachENI || len(v.Quarantined) == 0 {
			return r.fail("I4: after %s without faults the planner still wants: %s (%s)", quiesceTime, act, act.Reason)
		}
	}
	// I4: every address of a deleted pod is free again.
	live := map[ipam.Key]bool{}
	for _, p := range r.pods {
		live[p.key] = true
	}
	for _, as := range v.Assignments {
		if nodestate.IsQuarantine(as.Key) {
			r.host.mu.Lock()
			_, routed := r.host.routes[as.Addr]
			r.host.mu.Unlock()
			if !routed {
				return r.fail("I4: %s stays quarantined with no pod routed to it", as.Addr)
			}
			continue
		}
		if !live[as.Key] {
			return r.fail("I4: %s still holds %s after its pod was deleted (gone=%v)", as.Key, as.Addr, r.gone[as.Key])
		}
	}
	if len(v.Quarantined) == 0 {
		if err := r.checkENIsNeeded(); err != nil {
			return err
		}
	}
	// I5: every ENI attached to the node has DeleteOnTermination.
	r.unwatched = true // the checker's read
	enis, err := r.client.ListENIs(r.ctx, cloud.ENIFilter{InstanceID: instanceID})
	r.unwatched = false
	if err != nil {
		return err
	}
	for _, e := range enis {
		if e.Attachment != nil && e.Attachment.InstanceID == instanceID && e.Attachment.State == cloud.AttachmentAttached && !e.Attachment.DeleteOnTermination {
			return r.fail("I5: %s attached at device %d without DeleteOnTermination after %s", e.ID, e.Attachment.DeviceIndex, quiesceTime)
		}
	}
	return nil
}

// ec2Addrs is the set of addresses, secondary or in a prefix, on ENIs
// vpcnet manages that EC2 shows in use on the node. EC2 changes only
// through a request or the clock moving, so the set is read again only
// after one of those, and I8 and I9 are checked then.
func (r *run) ec2Addrs() (map[string]bool, error) {
	gen := r.tr.total() + r.clockMoves
	if r.onNode != nil && gen == r.onNodeGen {
		return r.onNode, nil
	}
	ifs, err := r.cloud.Interfaces(instanceID)
	if err != nil {
		return nil, err
	}
	if err := r.checkForeign(ifs); err != nil {
		return nil, err
	}
	onNode := map[string]bool{}
	// IPv6 /80s hold 2^48 addresses each: kept as prefixes.
	var onNode6 []netip.Prefix
	for _, i := range ifs {
		if _, foreign := r.foreign[i.ID]; foreign {
			continue
		}
		// I9: vpcnet's ENIs are in subnets it may use.
		if !r.world.eligible[i.SubnetID] {
			return nil, r.fail("I9: %s (device %d) is in subnet %s, which is not one new ENIs may use on this node", i.ID, i.DeviceIndex, i.SubnetID)
		}
		if i.Status != "in-use" {
			continue
		}
		for _, a := range i.Addresses[1:] {
			onNode[a.String()] = true
		}
		for _, p := range i.Prefixes {
			for a := p.Addr(); p.Contains(a); a = a.Next() {
				onNode[a.String()] = true
			}
		}
		onNode6 = append(onNode6, i.IPv6Prefixes...)
	}
	// Interfaces itself is a read, not a request through the transport.
	r.onNode, r.onNode6, r.onNodeGen = onNode, onNode6, gen
	return onNode, nil
}

// checkForeign is I8: every interface vpcnet must leave alone keeps its
// attachment and its addresses.
func (r *run) checkForeign(ifs []sim.InterfaceInfo) error {
	seen := 0
	for _, i := range ifs {
		f, ok := r.foreign[i.ID]
		if !ok {
			continue
		}
		seen++
		if i.NetworkCardIndex != f.card || i.DeviceIndex != f.device || i.Status != f.status || !slices.Equal(i.Addresses, f.addrs) {
			return r.fail("I8: foreign interface %s changed: card %d device %d %s %v, launched as card %d device %d %s %v",
				i.ID, i.NetworkCardIndex, i.DeviceIndex, i.Status, i.Addresses, f.card, f.device, f.status, f.addrs)
		}
	}
	if seen != len(r.foreign) {
		return r.fail("I8: %d of the node's %d foreign interfaces are no longer attached", len(r.foreign)-seen, len(r.foreign))
	}
	return nil
}

// checkENIsNeeded is I10: once quiet, the node holds no more ENIs than
// its pods and its warm target need. Every secondary ENI vpcnet attached
// either carries a live pod's address or is needed for the warm target:
// without it, fewer addresses would be free than the target keeps. It is
// counted from EC2 and the host, not from the agent's view. (Pods are
// never moved, so ENIs that each carry a pod all stay.) Shrinking is held
// while a quarantine lasts: the caller skips it then.
func (r *run) checkENIsNeeded() error {
	if r.world.warm == 0 {
		return nil
	}
	ifs, err := r.cloud.Interfaces(instanceID)
	if err != nil {
		return err
	}
	r.host.mu.Lock()
	defer r.host.mu.Unlock()
	free := 0
	var idle []sim.InterfaceInfo
	for _, i := range ifs {
		if _, foreign := r.foreign[i.ID]; foreign || i.Status != "in-use" {
			continue
		}
		used := false
		for _, a := range i.Addresses[1:] {
			if _, routed := r.host.routes[a]; routed {
				used = true
			} else {
				free++
			}
		}
		if !used && i.DeviceIndex != 0 {
			idle = append(idle, i)
		}
	}
	for _, i := range idle {
		if n := len(i.Addresses) - 1; free-n >= r.world.warm {
			return r.fail("I10: once quiet, %s (device %d) carries no pod and is not needed: without its %d addresses %d would still be free, the warm target keeps %d (%d pods live)",
				i.ID, i.DeviceIndex, n, free-n, r.world.warm, len(r.host.routes))
		}
	}
	return nil
}
