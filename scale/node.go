package scale

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"net/netip"
	"slices"
	"time"

	"github.com/vpcnet/vpcnet/agent"
	"github.com/vpcnet/vpcnet/agent/nodestate"
	"github.com/vpcnet/vpcnet/budget/budgetapi"
	"github.com/vpcnet/vpcnet/checkpoint"
	"github.com/vpcnet/vpcnet/checkpoint/disk"
	"github.com/vpcnet/vpcnet/cloud"
	"github.com/vpcnet/vpcnet/cniconf"
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
	// disk holds the checkpoint file, which outlives the agent.
	disk *nodeDisk
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
	// failedStarts counts the starts that failed in a row.
	failedStarts int
	// probeCalls counts the EC2 calls the agent's IAM preflight made
	// (DryRun probes and its read of the primary ENI) since measure.
	probeCalls int
	// bc is the agent's budget client, which outlives the agent's runs
	// here (a restart would forget it; no scenario restarts an agent
	// while its controller fails over).
	bc clientState
}

// agentProc is one run of the agent on a node: vpcnetd's own agent,
// whose owner the driver is.
type agentProc struct {
	ag *agent.Agent
	// replies are the requests made and not answered, by id.
	replies map[uint64]waiter
	// armed is the Tick the driver has queued for the agent.
	armed time.Time
}

// waiter is a pod's request waiting for the agent's reply.
type waiter struct {
	p  *pod
	ch <-chan nodestate.Reply
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

// boot starts vpcnetd on the node: its own start-up (agent.Start) reads
// IMDS, the type's limits (the table: no EC2 call), the checkpoint,
// EC2's attached ENIs and the host's routes. The agent is up once its
// EC2 read's latency has passed; what it handed out meanwhile runs then.
// A failed start is tried again with start-up's backoff (500 ms doubling
// to 30 s) in simulated time: on the event queue nothing can wait, so
// the agent's own retry gives up at its first wait (runs.Sleep) and the
// driver starts it again.
func (n *node) boot() { n.bootWith(false) }

// bootWith is boot; granted says the shared budget (if any) has granted
// its EC2 read.
func (n *node) bootWith(granted bool) {
	r := n.r
	n.gen++
	gen := n.gen
	if r.budget != nil && !granted {
		// Start-up's EC2 read asks the controller too, as urgent: the
		// node serves no pod until it has read EC2.
		r.budget.acquire(n, gen, []string{"DescribeNetworkInterfaces"}, func() budgetapi.Need { return budgetapi.Need{Urgent: true} }, func() {
			n.gen-- // boot numbers its run again
			n.bootWith(true)
		})
		return
	}
	fx := &runs{n: n, gen: gen, starting: true}
	ag, err := agent.New(agent.Options{Config: r.cfg, Cloud: n.client, Host: n.host, Clock: r.clk, Disk: n.disk, Effects: fx})
	if err != nil {
		r.fatal(fmt.Errorf("node %s: %w", n.id, err))
		return
	}
	calls := n.tr.count()
	err = ag.Start(r.ctx)
	took := r.latency(n.tr.count() - calls)
	if bad := (*disk.CorruptError)(nil); errors.As(err, &bad) {
		r.fatal(fmt.Errorf("node %s: %w", n.id, err))
		return
	}
	if err != nil {
		if n.failedStarts++; n.failedStarts > maxFailedStarts {
			r.fatal(fmt.Errorf("node %s: start-up failed %d times: %w", n.id, n.failedStarts, err))
			return
		}
		n.backoff = min(max(2*n.backoff, 500*time.Millisecond), 30*time.Second)
		r.q.at(r.now().Add(took+n.backoff), func() {
			if n.gen == gen {
				n.bootWith(false)
			}
		})
		return
	}
	n.backoff, n.failedStarts = 0, 0
	r.q.at(r.now().Add(took), func() {
		if n.gen != gen {
			return
		}
		n.agent = &agentProc{ag: ag, replies: map[uint64]waiter{}}
		n.upAt = r.now()
		r.booted++
		fx.up()
		n.collect()
		if !r.opts.NoPreflight {
			n.preflight(gen)
		}
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

// preflight is vpcnetd's IAM preflight (runPreflight, which runs beside
// start-up on a goroutine of its own): a valid record of a passed one
// vouches and nothing is called; else the probes are asked of the budget
// controller, if any, as warm-pool work (after every waiting pod), as
// vpcnetd's budget client asks, and made once. Probes EC2 does not answer
// (throttled) are not asked again here: vpcnetd asks after a backoff, on
// a goroutine the event queue does not have.
func (n *node) preflight(gen int) {
	r := n.r
	probe := func() {
		if n.gen != gen || n.agent == nil {
			return
		}
		before := n.tr.count()
		n.agent.ag.Preflight(r.ctx)
		n.probeCalls += n.tr.count() - before
	}
	calls := n.agent.ag.PreflightCalls()
	if calls == nil || r.budget == nil {
		probe()
		return
	}
	r.budget.acquire(n, gen, calls, func() budgetapi.Need { return budgetapi.Need{} }, probe)
}

// maxFailedStarts bounds the starts a node tries in a row: a start-up
// that keeps failing in the emulator is a bug, not a scenario.
const maxFailedStarts = 50

// crash ends the agent process: its jobs' results and its requests are
// lost; kubelet retries the requests.
func (n *node) crash() {
	if n.agent == nil {
		return
	}
	for _, w := range n.agent.replies {
		w.p.req = 0
	}
	n.agent = nil
	n.jobs = 0
	n.gen++
}

// step hands the agent one event and collects what it answered.
func (n *node) step(ev nodestate.Event) {
	n.agent.ag.Step(n.r.ctx, ev)
	n.collect()
}

// collect hands the pods the replies the agent released, in the order
// they were asked, and queues the Tick the agent wants next.
func (n *node) collect() {
	r := n.r
	a := n.agent
	ids := make([]uint64, 0, len(a.replies))
	for id := range a.replies {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		w := a.replies[id]
		select {
		case rep := <-w.ch:
			delete(a.replies, id)
			n.reply(w.p, rep)
		default:
		}
	}
	if n.agent != a {
		return
	}
	gen := n.gen
	if wake := a.ag.Wake(); !wake.IsZero() && !wake.Equal(a.armed) {
		a.armed = wake
		r.q.at(wake, func() {
			if n.gen == gen && n.agent.armed.Equal(wake) {
				n.agent.armed = time.Time{}
				n.step(nodestate.Tick{})
			}
		})
	}
}

// runs are one run's Effects on the event queue: a checkpoint write lands
// at once and is reported a millisecond later; a job runs against EC2
// once the budget (if any) grants it and answers after its calls'
// latency. What a run hands out while it starts waits until it is up; what
// an earlier run handed out is dropped (that process is gone).
type runs struct {
	n        *node
	gen      int
	starting bool
	held     []agent.Work
}

var _ agent.Effects = (*runs)(nil)

func (fx *runs) Go(ctx context.Context, w agent.Work) {
	if fx.starting {
		fx.held = append(fx.held, w)
		return
	}
	n, r, gen := fx.n, fx.n.r, fx.gen
	if n.gen != gen {
		return
	}
	switch {
	case w.Write != nil:
		w.Run(ctx, func(ev nodestate.Event) bool {
			r.q.at(r.now().Add(time.Millisecond), func() {
				if n.gen == gen {
					n.step(ev)
				}
			})
			return true
		})
	case w.Job != nil:
		n.jobs++
		j := *w.Job
		run := func() {
			calls := n.tr.count()
			w.Run(ctx, func(ev nodestate.Event) bool {
				took := r.latency(n.tr.count() - calls)
				_, granted := ev.(nodestate.JobGrant)
				r.q.at(r.now().Add(took), func() {
					if n.gen == gen {
						if !granted {
							n.jobs-- // the job's result
						}
						n.step(ev)
					}
				})
				return true
			})
		}
		if calls := w.Calls; r.budget != nil && len(calls) > 0 {
			r.budget.acquire(n, gen, calls, func() budgetapi.Need { return n.need(j.ID) }, run)
			return
		}
		run()
	default:
		r.q.at(r.now(), func() {
			if n.gen == gen {
				w.Run(ctx, func(ev nodestate.Event) bool { n.step(ev); return true })
			}
		})
	}
}

// Sleep does not wait: on the event queue nothing can. Start-up gives up,
// and boot starts the agent again after the backoff.
func (fx *runs) Sleep(context.Context, time.Duration) bool { return false }

// up runs what the run handed out while it started.
func (fx *runs) up() {
	fx.starting = false
	held := fx.held
	fx.held = nil
	for _, w := range held {
		fx.Go(fx.n.r.ctx, w)
	}
}

// need is what job id is wanted for, as the agent's machine sees it
// (agent.granted).
func (n *node) need(id uint64) budgetapi.Need {
	if n.agent == nil {
		return budgetapi.Need{}
	}
	return agent.JobNeed(n.agent.ag.Node().Summary(n.r.now()), id)
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
	build := func(id uint64) nodestate.Event {
		return nodestate.AddRequest{ID: id, Key: p.key, Pod: ipam.Pod{Namespace: "default", Name: p.name}}
	}
	if del {
		build = func(id uint64) nodestate.Event { return nodestate.DelRequest{ID: id, Key: p.key} }
	}
	id, ch := a.ag.Submit(n.r.ctx, build)
	p.req = id
	a.replies[id] = waiter{p: p, ch: ch}
	n.collect()
}

// reply delivers the agent's answer. A failed ADD or DEL is retried as
// kubelet retries it: the pod worker's sync failed, and it is queued
// again after kubeletBackoff (the sandbox torn down and created again).
func (n *node) reply(p *pod, rep nodestate.Reply) {
	r := n.r
	if p.req != rep.ID {
		return
	}
	p.req = 0
	switch p.state {
	case podAdding:
		if rep.Err != nil {
			r.addFailures++
			gen := n.gen
			r.q.at(r.now().Add(kubeletBackoff(r.rng)), func() {
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
			r.q.at(r.now().Add(kubeletBackoff(r.rng)), func() {
				if n.gen == gen && n.pods[p.name] == p {
					n.request(p, true)
				}
			})
			return
		}
		n.unwire(p)
	}
}

// kubeletBackoff is how long kubelet's pod worker waits before it syncs a
// pod again after a failed sync (a sandbox whose ADD or DEL failed):
// wait.Jitter(backOffPeriod, workerBackOffPeriodJitterFactor), 10 s
// plus up to half again (k8s.io/kubernetes v1.37 pkg/kubelet/kubelet.go
// and pod_workers.go). The driver used 1 to 3 s, which made every
// failed ADD cheap and the join look faster than a cluster's.
func kubeletBackoff(rng *rand.Rand) time.Duration {
	const period = 10 * time.Second
	return period + time.Duration(rng.Int64N(int64(period/2)))
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
	acts, _ := n.agent.ag.Node().Plan(n.r.now())
	return len(acts) == 0
}

// nodeDisk is a node's disk as its agent sees it (agent.Disk): the
// checkpoint file's bytes and the agent's other state files (the
// preflight record), kept across the agent's restarts. Every write lands.
type nodeDisk struct {
	bytes []byte
	agent.MemFiles
}

var _ agent.Disk = (*nodeDisk)(nil)

func (d *nodeDisk) Load(path string) (checkpoint.State, error) {
	if d.bytes == nil {
		return checkpoint.State{}, fmt.Errorf("load checkpoint: %w", &fs.PathError{Op: "open", Path: path, Err: fs.ErrNotExist})
	}
	st, err := checkpoint.Decode(d.bytes)
	if err != nil {
		return checkpoint.State{}, &disk.CorruptError{Path: path, Err: err, CopyErr: errors.New("scale driver's disk")}
	}
	return st, nil
}

func (d *nodeDisk) Save(_ string, s checkpoint.State) error {
	b, err := checkpoint.Encode(s)
	if err != nil {
		return fmt.Errorf("encode checkpoint: %w", err)
	}
	d.bytes = b
	return nil
}

func (d *nodeDisk) InstallConf(string, string, cniconf.Options) error { return nil }
