package scale

import (
	"fmt"
	"net/netip"
	"slices"
	"time"

	"github.com/vpcnet/vpcnet/agent/executor"
	"github.com/vpcnet/vpcnet/agent/nodestate"
	"github.com/vpcnet/vpcnet/checkpoint"
	"github.com/vpcnet/vpcnet/cloud"
	"github.com/vpcnet/vpcnet/ipam"
)

// node is one Kubernetes node: its instance, host, checkpoint file, pods,
// and the agent process when one runs.
type node struct {
	r      *run
	idx    int
	id     string
	tr     *transport
	client *cloud.Client
	host   *host
	// disk is the checkpoint file's content; nil when there is none.
	disk []byte
	pods map[string]*pod
	// agent is the running process; nil while it is down or starting.
	agent *agentProc
	// gen numbers the agent's runs: what an earlier run started is
	// dropped when it finishes (that process is gone).
	gen     int
	backoff time.Duration
	// upAt is when the current run finished start-up.
	upAt time.Time
	// jobs counts jobs handed out and not answered, for quiescence.
	jobs int
}

// agentProc is one run of the agent on a node.
type agentProc struct {
	sm      *nodestate.Node
	x       *executor.Executor
	replies map[uint64]*pod
	nextReq uint64
	wake    time.Time
}

type podState int

const (
	podAdding podState = iota
	podLive
	podDeleting
)

// pod is one pod the kubelet of a node runs.
type pod struct {
	n       *node
	name    string
	key     ipam.Key
	state   podState
	created time.Time
	addrAt  time.Time
	addr    netip.Addr
	req     uint64
	// measured says the pod counts in the scenario's figures.
	measured bool
}

// boot starts the agent as agent/startup.go does: IMDS, the type's limits
// (the table: no EC2 call), EC2's attached ENIs, then the host's routes.
// A failed EC2 read is retried with start-up's backoff (500 ms doubling to
// 30 s) in simulated time.
func (n *node) boot() { n.bootWith(false) }

// bootWith is boot; granted says the shared budget (if any) has granted
// its EC2 read.
func (n *node) bootWith(granted bool) {
	r := n.r
	n.gen++
	gen := n.gen
	self, err := n.client.DescribeSelf(r.ctx)
	if err != nil {
		r.fatal(fmt.Errorf("node %s: describe self from IMDS: %w", n.id, err))
		return
	}
	lim, err := n.client.InstanceLimits(r.ctx, self.InstanceType)
	if err != nil {
		r.fatal(fmt.Errorf("node %s: limits of %s: %w", n.id, self.InstanceType, err))
		return
	}
	x := &executor.Executor{Cloud: n.client, Host: n.host, InstanceID: n.id, Self: self, ENIMTU: 9001}
	st, missing := checkpoint.State{}, n.disk == nil
	if !missing {
		if st, err = checkpoint.Decode(n.disk); err != nil {
			r.fatal(fmt.Errorf("node %s: checkpoint: %w", n.id, err))
			return
		}
	}
	boot := nodestate.Boot{Checkpoint: st, CheckpointMissing: missing}
	if r.budget != nil && !granted {
		// Start-up's EC2 read asks the controller too, as urgent: the
		// node serves no pod until it has read EC2.
		r.budget.acquire(n, gen, []string{"DescribeNetworkInterfaces"}, func() bool { return true }, func() {
			n.gen-- // boot numbers its run again
			n.bootWith(true)
		})
		return
	}
	calls := n.tr.count()
	at, err := x.Attached(r.ctx, nil)
	boot.ENIs, boot.Devices, boot.Unmanaged = at.ENIs, at.Devices, at.Unmanaged
	took := r.latency(n.tr.count() - calls)
	if err != nil {
		n.backoff = min(max(2*n.backoff, 500*time.Millisecond), 30*time.Second)
		r.q.at(r.now().Add(took+n.backoff), func() {
			if n.gen == gen {
				n.bootWith(false)
			}
		})
		return
	}
	n.backoff = 0
	r.q.at(r.now().Add(took), func() {
		if n.gen != gen {
			return
		}
		boot.Routed, _ = n.host.PodAddrs(r.ctx)
		plan := ipam.DefaultPlanConfig()
		plan.WarmENITarget, plan.WarmIPTarget, plan.MinimumIPTarget = r.cfg.WarmENITarget, r.cfg.WarmIPTarget, r.cfg.MinimumIPTarget
		plan.ENIGracePeriod = r.cfg.ENIGrace
		plan.SubnetID, plan.SecurityGroups = self.Primary.SubnetID, self.Primary.SecurityGroups
		sm, err := nodestate.New(nodestate.Config{
			InstanceID: n.id, InstanceType: self.InstanceType, Plan: plan,
			Limits:   ipam.Limits{MaxENIs: lim.MaxENIs, IPv4PerENI: lim.IPv4PerENI},
			Cooldown: r.cfg.Cooldown, AddWait: r.cfg.AddWait, DemandMemory: r.cfg.DemandMemory, ReclaimAfter: r.cfg.ReclaimAfter, DetachHold: r.cfg.DetachHold,
			ResyncInterval: r.cfg.ReconcileInterval, AttachTimeout: 2 * time.Minute, Classify: executor.Classify, HostVeth: hostVeth,
		}, boot, r.now())
		if err != nil {
			r.fatal(fmt.Errorf("node %s: start the state machine: %w", n.id, err))
			return
		}
		n.agent = &agentProc{sm: sm, x: x, replies: map[uint64]*pod{}}
		n.upAt = r.now()
		r.booted++
		n.collect()
		if r.budget != nil {
			r.budget.watchPressure(n, gen, nil)
		}
		// Pods kubelet held back while the agent was down ask now.
		for _, p := range n.sortedPods() {
			if p.req == 0 && p.state == podAdding {
				n.request(p, false)
			}
		}
	})
}

// crash ends the agent process: its jobs' results and its requests are
// lost; kubelet retries the requests.
func (n *node) crash() {
	if n.agent == nil {
		return
	}
	for _, p := range n.agent.replies {
		p.req = 0
	}
	n.agent = nil
	n.jobs = 0
	n.gen++
}

// step feeds the machine one event and performs what it wants.
func (n *node) step(ev nodestate.Event) {
	a := n.agent
	a.sm.Step(n.r.now(), ev)
	n.collect()
}

// collect performs the machine's Ready: jobs run now against EC2 and
// answer after their calls' latency; checkpoint writes finish after a
// millisecond; replies go to the pods; the wake-up is scheduled.
func (n *node) collect() {
	r := n.r
	a := n.agent
	gen := n.gen
	rd := a.sm.Ready()
	if rd.Persist != nil {
		p := *rd.Persist
		b, err := checkpoint.Encode(p.State)
		if err != nil {
			r.fatal(fmt.Errorf("node %s: encode checkpoint: %w", n.id, err))
			return
		}
		n.disk = b
		r.q.at(r.now().Add(time.Millisecond), func() {
			if n.gen == gen {
				n.step(nodestate.Persisted{Version: p.Version})
			}
		})
	}
	for _, j := range rd.Jobs {
		n.jobs++
		if calls := j.Calls(); r.budget != nil && len(calls) > 0 {
			r.budget.acquire(n, gen, calls, func() bool { return n.urgent(j.ID) }, func() { n.runJob(j, gen) })
			continue
		}
		n.runJob(j, gen)
	}
	for _, rep := range rd.Replies {
		n.reply(rep)
	}
	if !rd.Wake.IsZero() && !rd.Wake.Equal(a.wake) {
		a.wake = rd.Wake
		at := rd.Wake
		r.q.at(at, func() {
			if n.gen == gen && n.agent.wake.Equal(at) {
				n.agent.wake = time.Time{}
				n.step(nodestate.Tick{})
			}
		})
	}
}

// runJob performs a job against EC2 now; its result arrives after its
// calls' latency.
func (n *node) runJob(j nodestate.Job, gen int) {
	r := n.r
	calls := n.tr.count()
	ev := n.agent.x.Run(r.ctx, j)
	took := r.latency(n.tr.count() - calls)
	r.q.at(r.now().Add(took), func() {
		if n.gen == gen {
			n.jobs--
			n.step(ev)
		}
	})
}

// urgent says pods wait for job id, as the agent's machine sees it.
func (n *node) urgent(id uint64) bool {
	return n.agent != nil && slices.Contains(n.agent.sm.Summary(n.r.now()).Urgent, id)
}

func (n *node) sortedPods() []*pod {
	out := make([]*pod, 0, len(n.pods))
	for _, p := range n.pods {
		out = append(out, p)
	}
	sortPods(out)
	return out
}

// addPod creates a pod; kubelet asks the agent for its address now.
func (n *node) addPod(name string, measured bool) {
	r := n.r
	p := &pod{n: n, name: name, key: ipam.Key{Network: "aws-cni", ContainerID: "c-" + name, IfName: "eth0"},
		created: r.now(), measured: measured}
	n.pods[name] = p
	if measured {
		r.waiting++
	}
	n.request(p, false)
}

// delPod deletes a live pod: the plugin asks the agent, then unwires.
func (n *node) delPod(p *pod) {
	if p.state != podLive || p.req != 0 {
		return
	}
	p.state = podDeleting
	n.request(p, true)
}

func (n *node) request(p *pod, del bool) {
	a := n.agent
	if a == nil {
		if del {
			n.unwire(p) // the plugin unwires and succeeds without the agent
		}
		return // kubelet retries the ADD once the agent is up (boot)
	}
	a.nextReq++
	id := a.nextReq
	a.replies[id] = p
	p.req = id
	if del {
		n.step(nodestate.DelRequest{ID: id, Key: p.key})
		return
	}
	n.step(nodestate.AddRequest{ID: id, Key: p.key, Pod: ipam.Pod{Namespace: "default", Name: p.name}})
}

// reply delivers the agent's answer. A failed ADD is retried by kubelet
// after 1 to 3 s (the pod sandbox is created again).
func (n *node) reply(rep nodestate.Reply) {
	r := n.r
	p, ok := n.agent.replies[rep.ID]
	if !ok {
		return
	}
	delete(n.agent.replies, rep.ID)
	if p.req != rep.ID {
		return
	}
	p.req = 0
	switch p.state {
	case podAdding:
		if rep.Err != nil {
			r.addFailures++
			gen := n.gen
			r.q.at(r.now().Add(time.Second+time.Duration(r.rng.Int64N(int64(2*time.Second)))), func() {
				if n.pods[p.name] == p && p.state == podAdding && p.req == 0 && n.gen == gen {
					n.request(p, false)
				}
			})
			return
		}
		p.state, p.addr, p.addrAt = podLive, rep.Assignment.Addr, r.now()
		n.host.route(p.addr, p.name)
		if p.measured {
			r.podDone(p)
		}
	case podDeleting:
		if rep.Err != nil {
			gen := n.gen
			r.q.at(r.now().Add(time.Second), func() {
				if n.gen == gen && n.pods[p.name] == p {
					n.request(p, true)
				}
			})
			return
		}
		n.unwire(p)
	}
}

func (n *node) unwire(p *pod) {
	n.host.unroute(p.addr, p.name)
	delete(n.pods, p.name)
}

// quiet says the agent is up, has nothing in flight and plans nothing.
func (n *node) quiet() bool {
	if n.agent == nil || n.jobs > 0 {
		return false
	}
	acts, _ := n.agent.sm.Plan(n.r.now())
	return len(acts) == 0
}
