package simulation

import (
	"fmt"
	"slices"
	"time"

	"github.com/vpcnet/vpcnet/agent/nodestate"
	"github.com/vpcnet/vpcnet/ipam"
	"github.com/vpcnet/vpcnet/sim"
)

// faultActions are the EC2 actions faults are injected into.
var faultActions = []string{"CreateNetworkInterface", "AttachNetworkInterface", "AssignPrivateIpAddresses",
	"UnassignPrivateIpAddresses", "DetachNetworkInterface", "DeleteNetworkInterface", "DescribeNetworkInterfaces",
	"ModifyNetworkInterfaceAttribute", "AssignIpv6Addresses"}

// act takes one random step of the schedule.
func (st *steps) act() error {
	r := st.r
	if r.bindStale && r.agent != nil {
		r.bindStale = false
		r.lastBind = r.stillBound()
		r.trace("%d pods bound to the node (a bound pod was deleted)", len(r.lastBind.Pods))
		if err := r.stepAgent(r.lastBind); err != nil {
			return err
		}
	}
	up := r.agent != nil
	if r.rng.IntN(8) == 0 {
		if name := r.answeredPod(); name != "" {
			return r.wire(name, r.pods[name])
		}
	}
	w := r.rng.IntN(100)
	switch {
	case w < 14:
		return r.do.addPod()
	case w < 24:
		return r.do.delPod()
	case w < 50 && up && len(r.agent.jobs) > 0:
		return r.do.runJob(r.rng.IntN(len(r.agent.jobs)), r.rng.IntN(20) == 0)
	case w >= 59 && w < 62 && up && r.agent.write != nil:
		return r.do.diskStall()
	case w < 62 && up && r.agent.write != nil:
		return r.do.finishPersist(r.rng.IntN(25) != 0)
	case w < 80:
		d := []time.Duration{100 * time.Millisecond, time.Second, 3 * time.Second, 10 * time.Second, 40 * time.Second, 2 * time.Minute}[r.rng.IntN(6)]
		return r.do.advance(d)
	case w < 84 && up:
		r.do.crash()
		return nil
	case w < 90 && !up:
		return r.do.restart()
	case w < 93:
		r.do.toggleFault()
		return nil
	case w < 95:
		r.host.mu.Lock()
		r.host.fail = !r.host.fail && r.rng.IntN(2) == 0
		r.host.mu.Unlock()
		return nil
	case w < 97 && up && r.opts.GC:
		return r.do.gc()
	case w < 99 && up:
		return r.do.bind()
	case w == 99 && r.ctrl != nil:
		r.do.controllerMoves()
		return nil
	}
	return r.do.advance(500 * time.Millisecond)
}

func (st *steps) addPod() error {
	r := st.r
	if len(r.pods) >= maxPods {
		return nil
	}
	r.nextPod++
	name := fmt.Sprintf("p%03d", r.nextPod)
	p := &pod{key: ipam.Key{Network: network, ContainerID: fmt.Sprintf("c%06d", r.nextPod), IfName: "eth0"}}
	r.pods[name] = p
	if r.agent == nil {
		p.retryAt = r.clk.Now().Add(time.Second)
		r.quietCrash = false // a pod changed: I3 does not apply to the restart
		return nil
	}
	return r.request(name, p, false)
}

// bind tells the agent which pods the API server has bound to the node:
// a random part of the pods the schedule knows, and some it has not
// added yet (a burst on its way), as a watch may show them in any order.
func (st *steps) bind() error {
	r := st.r
	names := make([]string, 0, len(r.pods))
	for name, p := range r.pods {
		// A pod being deleted is marked so in the API server: not bound
		// for an address any more.
		if p.state != podDeleting {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	var ev nodestate.PodsScheduled
	coming := false
	for _, name := range names {
		if r.rng.IntN(4) != 0 {
			ev.Pods = append(ev.Pods, ipam.Pod{Namespace: "default", Name: name})
			coming = coming || r.pods[name].state != podLive
		}
	}
	for i := range r.rng.IntN(20) {
		ev.Pods = append(ev.Pods, ipam.Pod{Namespace: "default", Name: fmt.Sprintf("p%03d", r.nextPod+1+i)})
		coming = true
	}
	r.trace("%d pods bound to the node", len(ev.Pods))
	r.bound, r.lastBind = true, ev
	if coming {
		// Pods on their way are demand the pool may grow for, as an
		// Add is: I3 no longer applies.
		r.agent.i3 = false
	}
	return r.stepAgent(ev)
}

// delPod deletes a live pod the way kubelet and the plugin do: the plugin
// asks the agent, then unwires; with the agent down it unwires and
// succeeds, and only the agent itself can find out later.
func (st *steps) delPod() error {
	r := st.r
	var live []string
	for name, p := range r.pods {
		if p.state == podLive && p.req == 0 {
			live = append(live, name)
		}
	}
	if len(live) == 0 {
		return nil
	}
	slices.Sort(live)
	name := live[r.rng.IntN(len(live))]
	p := r.pods[name]
	p.state = podDeleting
	if r.agent == nil {
		r.trace("DEL %s while the agent is down", name)
		r.unwire(name, p)
		r.quietCrash = false // a pod changed: I3 does not apply to the restart
		return nil
	}
	return r.request(name, p, true)
}

// runJob runs the agent's job i; lie makes its first mutating call
// report a failure although EC2 performed it.
func (st *steps) runJob(i int, lie bool) error {
	r := st.r
	a := r.agent
	w := a.jobs[i]
	a.jobs = slices.Delete(a.jobs, i, i+1)
	r.tr.mu.Lock()
	r.tr.lieNext = lie
	r.tr.mu.Unlock()
	defer func() {
		r.tr.mu.Lock()
		r.tr.lieNext = false
		r.tr.mu.Unlock()
	}()
	j := w.Job
	return r.perform(w, fmt.Sprintf("job %d %s %s", j.ID, j.Kind, j.Action.Kind))
}

func describe(ev nodestate.Event) string {
	switch e := ev.(type) {
	case nodestate.ActionResult:
		return fmt.Sprintf("blocks=%v eni=%s skipped=%v err=%v", e.Blocks, e.ENIID, e.Skipped, e.Err)
	case nodestate.ResyncResult:
		return fmt.Sprintf("%d ENIs err=%v", len(e.ENIs), e.Err)
	case nodestate.HostResult:
		return fmt.Sprintf("%d routed err=%v", len(e.Routed), e.Err)
	}
	return fmt.Sprintf("%+v", ev)
}

// finishPersist lets the agent's checkpoint write run: the disk takes it,
// or fails it (ok false: the volume is full).
func (st *steps) finishPersist(ok bool) error {
	r := st.r
	a := r.agent
	w := *a.write
	a.write = nil
	r.disk.failNext = !ok
	err := r.perform(w, fmt.Sprintf("persist v%d ok=%v (%d entries)", w.Write.Version, ok, len(w.Write.State.Entries)))
	r.disk.failNext = false
	if r.disk.unencodable != nil {
		return r.fail("checkpoint the agent asked for does not encode: %v", r.disk.unencodable)
	}
	return err
}

// diskStall holds the checkpoint write in flight while minutes pass, as a
// volume that stalls its fsync does: replies wait on it, EC2 and host
// jobs go on, kubelet retries, and the reclaim clock runs past
// ReclaimAfter. The invariants are checked at every turn.
func (st *steps) diskStall() error {
	r := st.r
	r.trace("disk stalls with v%d in flight", r.agent.write.Write.Version)
	for range 4 {
		if err := r.do.advance(40 * time.Second); err != nil {
			return err
		}
		for i := 0; len(r.agent.jobs) > 0 && i < 20; i++ {
			if err := r.do.runJob(0, false); err != nil {
				return err
			}
		}
		if err := r.check(); err != nil {
			return err
		}
	}
	return nil
}

// advance moves time: the emulator completes attachments, kubelet retries
// ADDs and DELs that came due, and the agent gets its tick.
func (st *steps) advance(d time.Duration) error {
	r := st.r
	r.clk.Advance(d)
	r.clockMoves++
	r.cloud.Tick()
	if err := r.wireDue(); err != nil {
		return err
	}
	var due []string
	for name, p := range r.pods {
		if p.req == 0 && (p.state == podAdding || p.state == podDeleting) && !p.retryAt.IsZero() && !r.clk.Now().Before(p.retryAt) {
			due = append(due, name)
		}
	}
	slices.Sort(due)
	for _, name := range due {
		p := r.pods[name]
		p.retryAt = time.Time{}
		if r.agent == nil {
			if p.state == podDeleting {
				r.unwire(name, p)
				continue
			}
			p.retryAt = r.clk.Now().Add(time.Second)
			continue
		}
		if err := r.request(name, p, p.state == podDeleting); err != nil {
			return err
		}
	}
	if r.agent != nil {
		return r.stepAgent(nodestate.Tick{})
	}
	return nil
}

// crash kills the agent process: each job in flight ran, ran in part, or
// never started; the write in flight landed or not; every request waiting
// on it failed, and kubelet will retry.
func (st *steps) crash() {
	r := st.r
	a := r.agent
	r.trace("CRASH with %d jobs, persist %v", len(a.jobs), a.write != nil)
	for _, w := range a.jobs {
		r.grant = nil
		switch r.rng.IntN(3) {
		case 1:
			w.Run(r.ctx, dead)
		case 2:
			r.tr.setBudget(r.rng.IntN(4))
			w.Run(r.ctx, dead)
			r.tr.setBudget(-1)
		}
	}
	if a.write != nil && r.rng.IntN(2) == 0 {
		a.write.Run(r.ctx, dead) // the write landed
	}
	quiet := a.ag.Node().Idle() && len(a.jobs) == 0 && a.write == nil && r.do.settledPlan() && r.do.cloudMatchesPool() && r.do.nothingDue()
	for _, p := range r.pods {
		if p.req == 0 {
			continue
		}
		p.req = 0
		switch p.state {
		case podAdding:
			p.retryAt = r.clk.Now().Add(2 * time.Second)
		case podDeleting:
			// The plugin's RPC failed: it treats the agent as gone,
			// unwires the pod and succeeds.
			p.retryAt = r.clk.Now()
		}
	}
	r.agent = nil
	r.quietCrash = quiet
}

// settledPlan says the planner wants nothing of EC2 now.
// cloudMatchesPool says EC2 has attached to the instance exactly the ENIs
// the pool holds: none that an earlier agent attached, the crash cut
// short and this agent has not heard of yet (the next agent adopts it
// and sets its DeleteOnTermination, a mutating call I3 must allow).
func (st *steps) cloudMatchesPool() bool {
	r := st.r
	ifs, err := r.cloud.Interfaces(instanceID)
	if err != nil {
		return false
	}
	pooled := map[string]bool{}
	for id := range r.agent.ag.Node().View(r.clk.Now()).ENIs {
		pooled[id] = true
	}
	n := 0
	for _, i := range ifs {
		if !pooled[i.ID] {
			return false
		}
		n++
	}
	return n == len(pooled)
}

// nothingDue says time alone changes nothing: no address cools and every
// address held is routed to a pod (one not routed is reclaimed later).
// Otherwise the pool shrinks after the restart as it would have without
// it, which I3 must not count against the restart.
func (st *steps) nothingDue() bool {
	r := st.r
	s := r.agent.ag.Node().View(r.clk.Now()).Stats
	r.host.mu.Lock()
	routed := len(r.host.routes)
	r.host.mu.Unlock()
	return s.Cooling == 0 && s.Assigned == routed
}

func (st *steps) settledPlan() bool {
	r := st.r
	acts, _ := r.agent.ag.Node().Plan(r.clk.Now())
	return len(acts) == 0
}

func (st *steps) restart() error {
	r := st.r
	mode := r.rng.IntN(20)
	keep := false
	switch {
	case mode < 12:
		keep = true
	case mode < 14:
		r.trace("restart: checkpoint deleted")
		if err := r.operatorLosesCheckpoint(nil); err != nil {
			return err
		}
	case mode < 17 && len(r.disk.older) > 0:
		r.trace("restart: an older checkpoint restored over the current one")
		if err := r.operatorLosesCheckpoint(r.disk.older[r.rng.IntN(len(r.disk.older))]); err != nil {
			return err
		}
	case mode < 20 && r.disk.bytes != nil:
		r.trace("restart: checkpoint corrupted")
		if err := r.operatorLosesCheckpoint(append([]byte(nil), r.disk.bytes[:len(r.disk.bytes)/2]...)); err != nil {
			return err
		}
	default:
		keep = true
	}
	quiet := keep && r.quietCrash
	if err := r.boot(); err != nil {
		return err
	}
	if quiet {
		r.agent.i3, r.agent.i3Base = true, r.tr.mutationCount()
	}
	return nil
}

func (st *steps) toggleFault() {
	r := st.r
	if r.faults && r.rng.IntN(2) == 0 {
		r.do.clearFaults()
		return
	}
	action := faultActions[r.rng.IntN(len(faultActions))]
	code := []string{"RequestLimitExceeded", "InternalError", "Unavailable"}[r.rng.IntN(3)]
	rate := []float64{0.3, 0.7, 1}[r.rng.IntN(3)]
	r.cloud.SetFault(action, sim.Fault{ErrorRate: rate, Code: code})
	r.faults = true
	r.trace("fault %s %s %.1f", action, code, rate)
}

func (st *steps) gc() error {
	r := st.r
	valid := map[ipam.Key]bool{}
	for _, p := range r.pods {
		valid[p.key] = true
	}
	// Nobody waits for the GC's reply.
	r.agent.ag.Submit(r.ctx, func(id uint64) nodestate.Event {
		return nodestate.GCRequest{ID: id, Network: network, Valid: valid}
	})
	return r.collect()
}

func (st *steps) clearFaults() {
	r := st.r
	for _, a := range faultActions {
		r.cloud.SetFault(a, sim.Fault{})
	}
	r.faults = false
	r.trace("faults cleared")
}
