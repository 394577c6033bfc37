package simulation

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/vpcnet/vpcnet/agent/executor"
	"github.com/vpcnet/vpcnet/agent/nodestate"
	"github.com/vpcnet/vpcnet/checkpoint"
	"github.com/vpcnet/vpcnet/clock"
	"github.com/vpcnet/vpcnet/cloud"
	"github.com/vpcnet/vpcnet/ipam"
	"github.com/vpcnet/vpcnet/sim"
)

const (
	instanceID  = "i-sim"
	network     = "aws-cni"
	cooldown    = 30 * time.Second
	addWait     = 10 * time.Second
	maxPods     = 14
	quiesceTime = 20 * time.Minute
)

// Options shape a run of schedules.
type Options struct {
	Steps int
	// GC says the runtime calls CNI GC now and then; without it, the agent
	// must reclaim deleted pods' addresses on its own.
	GC bool
	// Trace receives one line per step, for replaying a failure.
	Trace func(string)
}

type podState int

const (
	podAdding podState = iota
	// podAnswered: the agent answered the ADD and the plugin, a process
	// of its own, has not wired the pod yet; the agent may crash meanwhile.
	podAnswered
	podLive
	podDeleting
)

type pod struct {
	key   ipam.Key
	state podState
	addr  netip.Addr
	// retryAt is when kubelet sends its ADD again; req is the ADD or DEL
	// in flight with the agent, 0 when none.
	retryAt time.Time
	req     uint64
	// wireBy is when the plugin has wired an answered pod at the latest.
	wireBy time.Time
	// unchecked: the pod was answered before an operator lost the
	// checkpoint (deleted, restored an older one, removed a corrupt one),
	// so I7 cannot hold for it.
	unchecked bool
}

// agentProc is one run of the agent process: its state machine and what
// it handed out and has not seen answered.
type agentProc struct {
	node    *nodestate.Node
	x       *executor.Executor
	jobs    []nodestate.Job
	persist *nodestate.Persist
	// replies route request ids to the pods that wait.
	replies map[uint64]string
	nextReq uint64
	wake    time.Time
	// i3 is set while a restart with no pod change must make no
	// mutating EC2 call; i3Base is the count at the restart.
	i3     bool
	i3Base int
}

// run is one schedule.
type run struct {
	ctx    context.Context
	opts   Options
	rng    *rand.Rand
	clk    *clock.Manual
	cloud  *sim.Cloud
	tr     *transport
	client *cloud.Client
	host   *host
	// disk is the checkpoint file (nil: none); older holds copies that an
	// operator could restore by mistake.
	disk  []byte
	older [][]byte
	// diskHolds is what disk holds, key to address, decoded when I7
	// first asks after disk changed (setDisk); nil until then.
	diskHolds map[ipam.Key]netip.Addr
	agent     *agentProc
	pods      map[string]*pod
	// gone are keys of pods deleted for good, whose addresses must come
	// back (I4).
	gone    map[ipam.Key]bool
	nextPod int
	step    int
	faults  bool
	// quietCrash says the agent was idle and at its target when it died.
	quietCrash bool
	// bound: the schedule has told an agent which pods are bound to the
	// node (steps.bind); lastBind is what it told last.
	bound    bool
	lastBind nodestate.PodsScheduled
	// bindStale: a bound pod was deleted since lastBind was told.
	bindStale bool
	// do takes the schedule's random steps.
	do steps
	// clockMoves counts clock advances; with the transport's request
	// count it says when EC2 may have changed (ec2Addrs).
	clockMoves int
	onNode     map[string]bool
	onNodeGen  int
}

// steps are the moves a schedule makes: pods, time, crashes, restarts,
// faults.
type steps struct{ r *run }

// Violation is a broken invariant, with the step it broke at.
type Violation struct {
	Seed uint64
	Step int
	What string
}

func (v *Violation) Error() string {
	return fmt.Sprintf("seed %d step %d: %s (replay: go test ./agent/simulation -run TestSimulation -seed %d -v)", v.Seed, v.Step, v.What, v.Seed)
}

// Run plays the schedule of seed and returns the first invariant it broke.
func Run(ctx context.Context, topo *sim.Topology, seed uint64, opts Options) error {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	r := &run{ctx: ctx, opts: opts, rng: rand.New(rand.NewPCG(seed, 0x76706e6574)), clk: clock.NewManual(start),
		host: &host{routes: map[netip.Addr]string{}}, pods: map[string]*pod{}, gone: map[ipam.Key]bool{}}
	r.do.r = r
	c, err := sim.NewCloud(topo, sim.Options{Now: r.clk.Now, AfterFunc: r.clk.AfterFunc, Seed: int64(seed%(1<<62)) + 1})
	if err != nil {
		return err
	}
	defer c.Close()
	r.cloud = c
	r.tr = &transport{ec2: c.EC2Handler(), imds: c.IMDSHandler(instanceID), calls: map[string]int{}, budget: -1}
	if r.client, err = newClient(ctx, r.tr, instanceID, r.clk.Now); err != nil {
		return err
	}
	if err := r.boot(); err != nil {
		return r.violation(seed, err)
	}
	for r.step = 1; r.step <= opts.Steps; r.step++ {
		if err := r.do.act(); err != nil {
			return r.violation(seed, err)
		}
		if err := r.check(); err != nil {
			return r.violation(seed, err)
		}
	}
	if err := r.quiesce(); err != nil {
		return r.violation(seed, err)
	}
	return nil
}

func (r *run) violation(seed uint64, err error) error {
	var v *Violation
	if errors.As(err, &v) {
		v.Seed = seed
		return v
	}
	return &Violation{Seed: seed, Step: r.step, What: err.Error()}
}

func (r *run) fail(format string, args ...any) error {
	return &Violation{Step: r.step, What: fmt.Sprintf(format, args...)}
}

func (r *run) trace(format string, args ...any) {
	if r.opts.Trace != nil {
		r.opts.Trace(fmt.Sprintf("[%4d %s] ", r.step, r.clk.Now().Format("15:04:05.000")) + fmt.Sprintf(format, args...))
	}
}

// traceWriter sends the agent's log lines to the trace.
type traceWriter struct{ r *run }

func (w traceWriter) Write(b []byte) (int, error) {
	w.r.trace("agent: %s", strings.TrimSpace(string(b)))
	return len(b), nil
}

// boot starts the agent as vpcnetd's start-up does: checkpoint, EC2, host.
func (r *run) boot() error {
	st := checkpoint.State{}
	missing := r.disk == nil
	if !missing {
		var err error
		st, err = checkpoint.Decode(r.disk)
		if err != nil {
			// vpcnetd stops and keeps the file aside; the operator moves
			// it away and the agent starts as if it were lost.
			r.trace("boot: corrupt checkpoint refused (%v); operator removes it", err)
			r.setDisk(nil)
			missing = true
			st = checkpoint.State{}
		}
	}
	r.tr.setBudget(-1)
	self, err := r.client.DescribeSelf(r.ctx)
	if err != nil {
		return fmt.Errorf("boot: describe self: %w", err)
	}
	x := &executor.Executor{Cloud: r.client, Host: r.host, InstanceID: instanceID, Self: self, ENIMTU: 9001}
	boot := nodestate.Boot{Checkpoint: st, CheckpointMissing: missing}
	for try := 0; ; try++ {
		var at executor.Attached
		at, err = x.Attached(r.ctx, nil)
		boot.ENIs, boot.Devices, boot.Unmanaged = at.ENIs, at.Devices, at.Unmanaged
		if err == nil {
			break
		}
		// vpcnetd retries until EC2 answers; time passes meanwhile, and
		// a fault does not last for ever.
		r.clk.Advance(2 * time.Second)
		r.clockMoves++
		if try == 5 {
			r.do.clearFaults()
		}
	}
	for {
		boot.Routed, err = r.host.PodAddrs(r.ctx)
		if err == nil {
			break
		}
		r.host.mu.Lock()
		r.host.fail = false // the next dump works
		r.host.mu.Unlock()
	}
	plan := ipam.DefaultPlanConfig()
	plan.SubnetID, plan.SecurityGroups = self.Primary.SubnetID, self.Primary.SecurityGroups
	plan.ENIGracePeriod = time.Minute
	cfg := nodestate.Config{
		InstanceID: instanceID, InstanceType: self.InstanceType, Plan: plan, Limits: ipam.Limits{MaxENIs: 3, IPv4PerENI: 5},
		Cooldown: cooldown, AddWait: addWait, DemandMemory: time.Minute, ReclaimAfter: 2 * time.Minute,
		ResyncInterval: time.Minute, AttachTimeout: 2 * time.Minute, Classify: executor.Classify,
		HostVeth: hostVeth,
	}
	if r.opts.Trace != nil {
		cfg.Log = slog.New(slog.NewTextHandler(traceWriter{r}, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	n, err := nodestate.New(cfg, boot, r.clk.Now())
	if err != nil {
		return fmt.Errorf("boot: %w", err)
	}
	r.agent = &agentProc{node: n, x: x, replies: map[uint64]string{}}
	r.trace("boot: %d checkpoint entries (missing %v), %d ENIs, %d routed", len(st.Entries), missing, len(boot.ENIs), len(boot.Routed))
	if r.bound {
		// The new agent's Kubernetes layer lists the pods bound to the
		// node again: those of the last binding not deleted since.
		r.agent.node.Step(r.clk.Now(), r.stillBound())
	}
	return r.collect()
}

// stillBound is the last binding the schedule told less the pods deleted
// since (the API server drops them): kept are pods still there and not
// being deleted, and pods not added yet.
func (r *run) stillBound() nodestate.PodsScheduled {
	var ev nodestate.PodsScheduled
	for _, p := range r.lastBind.Pods {
		q, ok := r.pods[p.Name]
		var n int
		_, _ = fmt.Sscanf(p.Name, "p%d", &n)
		if (ok && q.state != podDeleting) || (!ok && n > r.nextPod) {
			ev.Pods = append(ev.Pods, p)
		}
	}
	return ev
}

// stepAgent feeds one event to the agent and collects what it wants.
func (r *run) stepAgent(ev nodestate.Event) error {
	if r.agent == nil {
		return nil
	}
	r.agent.node.Step(r.clk.Now(), ev)
	return r.collect()
}

func (r *run) collect() error {
	a := r.agent
	rd := a.node.Ready()
	if rd.Persist != nil {
		if a.persist != nil {
			return r.fail("two checkpoint writes handed out at once (%d and %d)", a.persist.Version, rd.Persist.Version)
		}
		a.persist = rd.Persist
	}
	a.jobs = append(a.jobs, rd.Jobs...)
	a.wake = rd.Wake
	for _, rep := range rd.Replies {
		if err := r.reply(rep); err != nil {
			return err
		}
	}
	return nil
}

// reply delivers an agent's answer to the pod that asked.
func (r *run) reply(rep nodestate.Reply) error {
	name, ok := r.agent.replies[rep.ID]
	if !ok {
		return nil // the caller gave up (a crash) or it was a GC
	}
	delete(r.agent.replies, rep.ID)
	p := r.pods[name]
	if p == nil || p.req != rep.ID {
		return nil
	}
	p.req = 0
	switch p.state {
	case podAdding:
		if rep.Err != nil {
			// I6: every failed ADD says why.
			if strings.TrimSpace(rep.Err.Error()) == "" {
				return r.fail("ADD of %s failed without a reason", name)
			}
			p.retryAt = r.clk.Now().Add(time.Duration(1+r.rng.IntN(5)) * time.Second)
			r.trace("ADD %s failed: %v", name, rep.Err)
			return nil
		}
		// I6: no ADD succeeds without an address on an attached ENI.
		if !r.attachedInEC2(rep.Assignment.Addr) {
			return r.fail("ADD of %s got %s, which is on no ENI attached in EC2", name, rep.Assignment.Addr)
		}
		p.state, p.addr, p.retryAt = podAnswered, rep.Assignment.Addr, time.Time{}
		p.wireBy = r.clk.Now().Add(wireDelays[r.rng.IntN(len(wireDelays))])
		r.trace("ADD %s answered %s; the plugin wires it by %s", name, p.addr, p.wireBy.Format("15:04:05.000"))
		if r.rng.IntN(3) == 0 {
			return r.wire(name, p) // the plugin was quick
		}
	case podDeleting:
		if rep.Err != nil {
			r.trace("DEL %s failed: %v; kubelet retries", name, rep.Err)
			p.retryAt = r.clk.Now().Add(time.Second)
			return nil
		}
		r.unwire(name, p)
	}
	return nil
}

func (r *run) unwire(name string, p *pod) {
	r.host.mu.Lock()
	if r.host.routes[p.addr] == name {
		delete(r.host.routes, p.addr)
	}
	r.host.mu.Unlock()
	delete(r.pods, name)
	r.gone[p.key] = true
	r.trace("DEL %s done (%s)", name, p.addr)
	// The API server drops the deleted pod; the agent's watch hears it
	// before the schedule's next step.
	r.bindStale = r.bound
}

func (r *run) attachedInEC2(addr netip.Addr) bool {
	ifs, err := r.cloud.Interfaces(instanceID)
	if err != nil {
		return false
	}
	for _, i := range ifs {
		if i.Status == "in-use" && slices.Contains(i.Addresses[1:], addr) {
			return true
		}
	}
	return false
}

// request sends a pod's ADD or DEL to the agent.
func (r *run) request(name string, p *pod, del bool) error {
	a := r.agent
	a.nextReq++
	id := a.nextReq
	a.replies[id] = name
	p.req = id
	if a.i3 {
		a.i3 = false // a pod changed: I3 no longer applies
	}
	if del {
		return r.stepAgent(nodestate.DelRequest{ID: id, Key: p.key})
	}
	return r.stepAgent(nodestate.AddRequest{ID: id, Key: p.key, Pod: ipam.Pod{Namespace: "default", Name: name}})
}
