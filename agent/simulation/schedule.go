package simulation

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math/rand/v2"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/vpcnet/vpcnet/agent"
	"github.com/vpcnet/vpcnet/agent/nodestate"
	"github.com/vpcnet/vpcnet/checkpoint/disk"
	"github.com/vpcnet/vpcnet/clock"
	"github.com/vpcnet/vpcnet/cloud"
	"github.com/vpcnet/vpcnet/config"
	"github.com/vpcnet/vpcnet/ipam"
	"github.com/vpcnet/vpcnet/sim"
)

const (
	instanceID  = "i-sim"
	network     = "aws-cni"
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

// run is one schedule.
type run struct {
	ctx    context.Context
	world  *world
	opts   Options
	rng    *rand.Rand
	clk    *clock.Manual
	cloud  *sim.Cloud
	tr     *transport
	client *cloud.Client
	host   *host
	disk   *nodeDisk
	// cfg is vpcnetd's configuration on the simulated node.
	cfg   config.Config
	agent *agentProc
	pods  map[string]*pod
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
	onNode6    []netip.Prefix // IPv6 /80s on the node's ENIs
	onNodeGen  int
	// foreign are the interfaces vpcnet must leave alone (I8), as they
	// were at launch.
	foreign map[string]foreignInterface
	// ctrl is the cluster's budget controller, nil in a cluster without
	// one; budget is the running agent's client of it. grant are the
	// EC2 actions granted to the piece of work running now (I11);
	// unwatched says the calls now are the schedule's, not the agent's.
	ctrl      *controller
	budget    *budgetProbe
	grant     []string
	grantErr  error
	unwatched bool
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

// Run plays the schedule of seed on node w and returns the first
// invariant it broke.
func Run(ctx context.Context, w *world, seed uint64, opts Options) error {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	r := &run{ctx: ctx, world: w, opts: opts, rng: rand.New(rand.NewPCG(seed, 0x76706e6574)), clk: clock.NewManual(start),
		host: &host{routes: map[netip.Addr]string{}}, pods: map[string]*pod{}, gone: map[ipam.Key]bool{}}
	r.do.r = r
	r.trace("world %s", w.name)
	cfg, err := agentConfig(w)
	if err != nil {
		return err
	}
	r.cfg = cfg
	r.disk = &nodeDisk{rng: r.rng, path: cfg.CheckpointPath()}
	c, err := sim.NewCloud(w.topo, sim.Options{Now: r.clk.Now, AfterFunc: r.clk.AfterFunc, Seed: int64(seed%(1<<62)) + 1})
	if err != nil {
		return err
	}
	defer c.Close()
	r.cloud = c
	launched, err := c.Interfaces(instanceID)
	if err != nil {
		return err
	}
	r.foreign = foreignOf(launched)
	if r.rng.IntN(2) == 0 {
		r.ctrl = &controller{state: controllerState(r.rng.IntN(4))}
		r.trace("budget controller: %s", r.ctrl.state)
	}
	r.tr = &transport{ec2: c.EC2Handler(), imds: c.IMDSHandler(instanceID), calls: map[string]int{}, budget: -1, onEC2: r.ec2Call}
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

// boot starts vpcnetd: its own start-up (agent.Start) learns the node
// from IMDS and EC2, reads the checkpoint, EC2's attachments and the
// host's routes, and builds the state machine; the schedule is its owner
// from then on.
func (r *run) boot() error {
	r.tr.setBudget(-1)
	for {
		p := &agentProc{replies: map[uint64]waiter{}}
		waits := 0
		p.wait = func(d time.Duration) {
			// vpcnetd retries until EC2 and the host answer; time passes
			// meanwhile, the next host dump works, and a fault does not
			// last for ever.
			r.clk.Advance(d)
			r.clockMoves++
			r.host.mu.Lock()
			r.host.fail = false
			r.host.mu.Unlock()
			if waits++; waits == 5 {
				r.do.clearFaults()
			}
		}
		o := agent.Options{Config: r.cfg, Cloud: r.client, Host: r.host, Clock: r.clk, Disk: r.disk, Effects: p}
		r.budget, r.grant = nil, nil
		if r.ctrl != nil {
			// Each vpcnetd process has a client of its own.
			r.budget = r.newBudget()
			o.Budget = r.budget
		}
		if r.opts.Trace != nil {
			// The trace stamps each line with the schedule's clock; the
			// wall clock's would make two replays differ.
			o.Logger = slog.New(slog.NewTextHandler(traceWriter{r}, &slog.HandlerOptions{Level: slog.LevelDebug,
				ReplaceAttr: func(groups []string, a slog.Attr) slog.Attr {
					if len(groups) == 0 && a.Key == slog.TimeKey {
						return slog.Attr{}
					}
					return a
				}}))
		}
		a, err := agent.New(o)
		if err != nil {
			return fmt.Errorf("boot: %w", err)
		}
		p.ag = a
		err = a.Start(r.ctx)
		if bad := (*disk.CorruptError)(nil); errors.As(err, &bad) {
			// vpcnetd stops and keeps the file aside; the operator moves
			// it away and the agent starts as if it were lost.
			r.trace("boot: corrupt checkpoint refused (%v); operator removes it", err)
			r.disk.set(nil)
			continue
		}
		if err != nil {
			return fmt.Errorf("boot: %w", err)
		}
		r.agent = p
		break
	}
	r.trace("boot: up, %d jobs and a write %v handed out", len(r.agent.jobs), r.agent.write != nil)
	if r.bound {
		// The new agent's Kubernetes layer lists the pods bound to the
		// node again: those of the last binding not deleted since.
		return r.stepAgent(r.stillBound())
	}
	return r.collect()
}

// agentConfig is vpcnetd's configuration on the simulated node: its
// defaults, but for what keeps the schedules' node small and busy and
// the world's own settings. Its paths name files of the simulated disk
// only.
func agentConfig(w *world) (config.Config, error) {
	env := map[string]string{
		"VPCNET_STATE_DIR":    "/sim/state",
		"VPCNET_CNI_CONF_DIR": "/sim/cni",
		// ENIs attach and detach often on the small instance type.
		"VPCNET_ENI_DETACH_HOLD": "0s",
	}
	maps.Copy(env, w.env)
	cfg, err := config.Load(func(k string) (string, bool) { v, ok := env[k]; return v, ok })
	if err != nil {
		return config.Config{}, fmt.Errorf("simulated node's settings: %w", err)
	}
	return cfg, nil
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

// stepAgent hands the agent one event and collects its replies.
func (r *run) stepAgent(ev nodestate.Event) error {
	if r.agent == nil {
		return nil
	}
	r.agent.ag.Step(r.ctx, ev)
	return r.collect()
}

// collect hands the pods the replies the agent has released, in the order
// the requests were made, and runs its chores.
func (r *run) collect() error {
	a := r.agent
	for {
		if a.err != nil {
			return r.fail("%v", a.err)
		}
		for _, id := range a.pending() {
			w := a.replies[id]
			select {
			case rep := <-w.ch:
				delete(a.replies, id)
				if err := r.reply(w.name, rep); err != nil {
					return err
				}
			default:
			}
		}
		if len(a.chores) == 0 {
			return nil
		}
		w := a.chores[0]
		a.chores = a.chores[1:]
		if err := r.perform(w, "chore"); err != nil {
			return err
		}
	}
}

// perform runs one piece of the agent's work. What it tells the agent is
// stepped at once, and the invariants are checked right then, before the
// work goes on: work that tells the agent too early is caught at the
// instant it does.
func (r *run) perform(w agent.Work, what string) error {
	r.grant = nil
	var err error
	w.Run(r.ctx, func(ev nodestate.Event) bool {
		r.trace("%s → %s", what, describe(ev))
		if err == nil {
			err = r.stepAgent(ev)
		}
		if err == nil {
			err = r.check()
		}
		return true
	})
	return err
}

// reply delivers an agent's answer to the pod that asked.
func (r *run) reply(name string, rep nodestate.Reply) error {
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

// attachedInEC2 says addr is a secondary address, or in a prefix, of an
// ENI vpcnet manages that EC2 shows attached to the node.
func (r *run) attachedInEC2(addr netip.Addr) bool {
	ifs, err := r.cloud.Interfaces(instanceID)
	if err != nil {
		return false
	}
	for _, i := range ifs {
		if _, foreign := r.foreign[i.ID]; foreign || i.Status != "in-use" {
			continue
		}
		inPrefix := func(p netip.Prefix) bool { return p.Contains(addr) }
		if slices.Contains(i.Addresses[1:], addr) || slices.ContainsFunc(i.Prefixes, inPrefix) || slices.ContainsFunc(i.IPv6Prefixes, inPrefix) {
			return true
		}
	}
	return false
}

// request sends a pod's ADD or DEL to the agent, as the plugin does.
func (r *run) request(name string, p *pod, del bool) error {
	a := r.agent
	if a.i3 {
		a.i3 = false // a pod changed: I3 no longer applies
	}
	build := func(id uint64) nodestate.Event {
		return nodestate.AddRequest{ID: id, Key: p.key, Pod: ipam.Pod{Namespace: "default", Name: name}}
	}
	if del {
		build = func(id uint64) nodestate.Event { return nodestate.DelRequest{ID: id, Key: p.key} }
	}
	id, ch := a.ag.Submit(r.ctx, build)
	p.req = id
	a.replies[id] = waiter{name: name, ch: ch}
	return r.collect()
}
