package scale

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/vpcnet/vpcnet/budget"
	"github.com/vpcnet/vpcnet/clock"
	"github.com/vpcnet/vpcnet/config"
	"github.com/vpcnet/vpcnet/limits"
	"github.com/vpcnet/vpcnet/sim"
)

// instanceType is every node's: 4 ENIs of 15 addresses, 58 pods.
const instanceType = "m5.xlarge"

// Options describe one run of a scenario.
type Options struct {
	// Scenario is one of Scenarios' names.
	Scenario string
	// Nodes and PodsPerNode size it; zero takes the scenario's default.
	Nodes       int
	PodsPerNode int
	// TotalPods, for scale-up, spreads this many pods over the nodes.
	TotalPods int
	// Account is the EC2 account's buckets and delays; zero values take
	// DefaultAccount's.
	Account Account
	// CallLatency is how long one EC2 call takes; a job answers after
	// the sum of its calls' latencies. Default 100 ms.
	CallLatency time.Duration
	// Churn is how long the churn scenario replaces pods; Steady how long
	// the steady scenario watches an idle cluster. Defaults 10 min, 1 h.
	Churn  time.Duration
	Steady time.Duration
	// Limit bounds the measured phase in simulated time. Default 2 h.
	Limit time.Duration
	Seed  uint64
	// Settings override the agent's defaults (env var → value), as the
	// DaemonSet's environment would.
	Settings map[string]string
	// Budget installs the budget controller (cmd/vpcnet-budget): every
	// node asks it before a job calls EC2, as vpcnetd does when
	// VPCNET_BUDGET_LEASE names a controller that answers.
	Budget bool
	// NoPreflight leaves out the agent's IAM preflight, which vpcnetd
	// runs at every start (its DryRun probes, or the record of a passed
	// one: agent/preflight_record.go). Zero is production's setting.
	NoPreflight bool
	// OtherShare is the share of each mutating bucket's refill that
	// another client of the account spends during the measured phase,
	// unknown to the budget controller (another cluster's agents and
	// controller, each of which grants 90% of the account's buckets).
	// The shared scenario's default is 0.3.
	OtherShare float64
	// FailoverAt is when, in the failover scenario's measured phase, the
	// budget controller's leader dies. Default: half the join's lower
	// bound.
	FailoverAt time.Duration
	// NoBaseline leaves out the failover scenario's join without a
	// failover (same seed), against which each pod's extra wait is
	// measured.
	NoBaseline bool
	// NoHold gives the agents' budget client as it was before it held
	// jobs through a failover: each failure sends the node alone.
	NoHold bool
	// NoHorizon gives the budget controller as it was before its grants
	// were bounded by a horizon (budget.Config.Horizon), in every
	// scenario.
	NoHorizon bool
	// Margin is the share of each bucket the budget controller grants
	// (its VPCNET_BUDGET_MARGIN); zero is its default. An operator
	// who knows of another client of the account leaves it its share.
	Margin float64
	// NoGather gives the budget controller as it was before a new
	// leader gathered the requests held through its takeover and booked
	// them oldest first (budget.Term.Gather): booked as they come back.
	NoGather bool
}

// The agent's settings are production's (config's defaults, subnet
// discovery among them) unless Options.Settings names them: the topology
// tags no subnet for pods, so discovery finds the node's own subnet, as
// on a cluster that never tagged one, and costs what it costs there.

// Scenario is a named way to load the account.
type Scenario struct {
	Name    string
	Summary string
	// Nodes and PodsPerNode are the defaults.
	Nodes, PodsPerNode, TotalPods int
	play                          func(r *run)
}

// Scenarios are issue 15's four, plus the idle cluster for the steady
// cost per node.
var Scenarios = []Scenario{
	{Name: "join", Summary: "nodes join at once and each gets its pods", Nodes: 1000, PodsPerNode: 30, play: playJoin},
	{Name: "scale-up", Summary: "warm nodes go from 0 pods to TotalPods at once", Nodes: 500, TotalPods: 23000, play: playScaleUp},
	{Name: "restart", Summary: "every agent restarts at once with its pods in place; each node gets one new pod", Nodes: 1000, PodsPerNode: 30, play: playRestart},
	{Name: "churn", Summary: "pod churn on nodes whose subnet is nearly full", Nodes: 200, PodsPerNode: 20, play: playChurn},
	{Name: "bursts", Summary: "bursts of pods a minute and a half apart, each gone 30 s later, for the churn time", Nodes: 100, PodsPerNode: 20, play: playBursts},
	{Name: "shared", Summary: "nodes join at once while another client of the account spends a share of every mutating bucket", Nodes: 1000, PodsPerNode: 30, play: playShared},
	{Name: "failover", Summary: "nodes join at once and the budget controller's leader dies mid-join; the standby takes the Lease over", Nodes: 1000, PodsPerNode: 30, play: playFailover},
	{Name: "steady", Summary: "an idle cluster for an hour: what each node spends doing nothing", Nodes: 1000, PodsPerNode: 30, play: playSteady},
}

// ScenarioByName finds a scenario.
func ScenarioByName(name string) (Scenario, bool) {
	i := slices.IndexFunc(Scenarios, func(s Scenario) bool { return s.Name == name })
	if i < 0 {
		return Scenario{}, false
	}
	return Scenarios[i], true
}

// run is one scenario's world.
type run struct {
	ctx   context.Context
	opts  Options
	cfg   config.Config
	rng   *rand.Rand
	clk   *clock.Manual
	cloud *sim.Cloud
	q     queue
	nodes []*node
	err   error

	// Measured phase.
	start       time.Time
	waiting     int // measured pods without an address
	lastAddr    time.Time
	booted      int
	addFailures int
	waits       []time.Duration
	// throttledWaits are the waits of pods whose node heard
	// RequestLimitExceeded while they waited.
	throttledWaits []time.Duration
	// needed are the calls the measured phase needs at the least.
	needed map[string]int
	// budget is the budget controller, with Options.Budget.
	budget *controller
	// other is the account's other client, in the shared scenario.
	other *otherClient
	// podWaits are the measured pods' waits by name.
	podWaits map[string]time.Duration
}

func (r *run) now() time.Time { return r.clk.Now() }

func (r *run) fatal(err error) {
	if r.err == nil {
		r.err = err
	}
}

func (r *run) latency(calls int) time.Duration {
	return max(time.Duration(calls)*r.opts.CallLatency, time.Millisecond)
}

// podDone records a measured pod's wait.
func (r *run) podDone(p *pod) {
	r.waiting--
	r.lastAddr = r.now()
	w := p.addrAt.Sub(p.created)
	r.waits = append(r.waits, w)
	r.podWaits[p.name] = w
	if p.n.tr.throttledBetween(p.created, p.addrAt) {
		r.throttledWaits = append(r.throttledWaits, w)
	}
}

// Run plays a scenario and returns its figures.
func Run(ctx context.Context, o Options) (*Report, error) {
	sc, ok := ScenarioByName(o.Scenario)
	if !ok {
		names := make([]string, len(Scenarios))
		for i, s := range Scenarios {
			names[i] = s.Name
		}
		return nil, fmt.Errorf("scenario %q: no such scenario; choose one of %s", o.Scenario, strings.Join(names, ", "))
	}
	o.Nodes = cmpOr(o.Nodes, sc.Nodes)
	o.PodsPerNode = cmpOr(o.PodsPerNode, sc.PodsPerNode)
	o.TotalPods = cmpOr(o.TotalPods, sc.TotalPods)
	if o.Account == (Account{}) {
		o.Account = DefaultAccount()
	}
	o.CallLatency = cmpOr(o.CallLatency, 100*time.Millisecond)
	o.Churn = cmpOr(o.Churn, 10*time.Minute)
	o.Steady = cmpOr(o.Steady, time.Hour)
	o.Limit = cmpOr(o.Limit, 2*time.Hour)
	if sc.Name == "shared" {
		o.OtherShare = cmpOr(o.OtherShare, 0.3)
	}
	if o.OtherShare < 0 || o.OtherShare >= 1 {
		return nil, fmt.Errorf("other share %v: want a share of the refill from 0 up to 1", o.OtherShare)
	}
	if o.Nodes <= 0 {
		return nil, fmt.Errorf("nodes %d: need at least one", o.Nodes)
	}
	o.Margin = cmpOr(o.Margin, budget.DefaultConfig().Margin)
	if err := o.budgetConfig().Validate(); err != nil {
		return nil, fmt.Errorf("--margin: %w", err)
	}
	var baseline *Report
	if sc.Name == "failover" {
		if !o.Budget {
			return nil, fmt.Errorf("the failover scenario fails the budget controller over: it needs --budget")
		}
		if !o.NoBaseline {
			// The same join with no failover, for each pod's extra wait.
			b := o
			b.Scenario, b.FailoverAt = "join", 0
			var err error
			if baseline, err = Run(ctx, b); err != nil {
				return nil, fmt.Errorf("the join without a failover: %w", err)
			}
		}
	}
	cfg, err := config.Load(func(k string) (string, bool) {
		v, ok := o.Settings[k]
		return v, ok
	})
	if err != nil {
		return nil, fmt.Errorf("agent settings: %w", err)
	}
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	r := &run{ctx: ctx, opts: o, cfg: cfg, rng: rand.New(rand.NewPCG(o.Seed, 0x7363616c65)), clk: clock.NewManual(start),
		podWaits: map[string]time.Duration{}}
	subnets, bits := (o.Nodes+249)/250, 16 // a /16 per 250 nodes: room for every pod
	if sc.Name == "churn" {
		// One subnet a little smaller than the nodes' pods plus one warm
		// ENI each: the warm pools cannot all fill.
		subnets, bits = 1, subnetBitsFor(o.Nodes*(o.PodsPerNode+18))
	}
	topo := topology(o.Account, o.Nodes, instanceType, subnets, bits)
	r.cloud, err = sim.NewCloud(topo, sim.Options{Now: r.clk.Now, Seed: int64(o.Seed%(1<<62)) + 1})
	if err != nil {
		return nil, err
	}
	defer r.cloud.Close()
	ec2 := r.cloud.EC2Handler()
	for i := range o.Nodes {
		id := instanceID(i)
		n := &node{r: r, idx: i, id: id, host: &host{routes: map[netip.Addr]string{}}, pods: map[string]*pod{}, disk: &nodeDisk{}, bc: clientState{addr: -1}}
		n.tr = newTransport(ec2, r.cloud.IMDSHandler(id), r.clk.Now)
		if n.client, err = newClient(ctx, n.tr, id); err != nil {
			return nil, fmt.Errorf("node %s: EC2 client: %w", id, err)
		}
		r.nodes = append(r.nodes, n)
	}
	if sc.Name != "join" {
		// The cluster the scenario starts from is built with EC2's
		// throttling off (it is not what is measured, and a thousand
		// throttled joins cost minutes of wall time); measure() puts
		// the account's buckets back, full.
		if err := r.cloud.SetThrottle(sim.ThrottleSpec{Disabled: true}); err != nil {
			return nil, err
		}
	}
	rep := &Report{Scenario: sc.Name, Summary: sc.Summary, Nodes: o.Nodes, Account: o.Account, Budget: o.Budget, Margin: o.Margin, OtherShare: o.OtherShare,
		Preflight: !o.NoPreflight, SubnetDiscovery: cfg.SubnetDiscovery && !cfg.CustomNetwork, Settings: o.Settings}
	sc.play(r)
	if r.err != nil {
		return nil, r.err
	}
	r.fill(rep)
	if baseline != nil {
		rep.Failover.compare(baseline, rep)
	}
	return rep, r.err
}

// subnetBitsFor is the prefix length of the smallest subnet holding want
// addresses (a /16 to a /28).
func subnetBitsFor(want int) int {
	bits := 28
	for bits > 16 && (1<<(32-bits))-5 < want {
		bits--
	}
	return bits
}

func cmpOr[T comparable](v, def T) T {
	var zero T
	if v == zero {
		return def
	}
	return v
}

// advanceTo runs every event up to t, moving the clock with them.
func (r *run) advanceTo(t time.Time) {
	for r.err == nil {
		at, ok := r.q.peek()
		if !ok || at.After(t) {
			break
		}
		ev, _ := r.q.pop()
		if ev.at.After(r.now()) {
			r.clk.Advance(ev.at.Sub(r.now()))
		}
		ev.fn()
	}
	if t.After(r.now()) {
		r.clk.Advance(t.Sub(r.now()))
	}
}

// runUntil runs events until done says so (checked after each event's
// time) or limit passes; it reports whether done.
func (r *run) runUntil(limit time.Time, done func() bool) bool {
	for r.err == nil {
		if done() {
			return true
		}
		at, ok := r.q.peek()
		if !ok || at.After(limit) {
			r.advanceTo(limit)
			return done()
		}
		r.advanceTo(at)
	}
	return false
}

// settle runs until every agent is up and quiet, checked every 5 s, or
// for at most limit.
func (r *run) settle(limit time.Duration) {
	end := r.now().Add(limit)
	for r.err == nil && r.now().Before(end) {
		r.advanceTo(r.now().Add(5 * time.Second))
		if r.allQuiet() {
			return
		}
	}
}

func (r *run) allQuiet() bool {
	for _, n := range r.nodes {
		if !n.quiet() {
			return false
		}
	}
	return true
}

// measure starts the measured phase: counts so far are forgotten and the
// account's buckets are in force, full.
func (r *run) measure() {
	acc := r.opts.Account
	if err := r.cloud.SetThrottle(sim.ThrottleSpec{Mutating: acc.Mutating, Describe: acc.Describe}); err != nil {
		r.fatal(err)
	}
	r.start = r.now()
	if r.opts.Budget {
		r.budget = newController(r.opts.budgetConfig())
		for _, n := range r.nodes {
			if n.agent != nil {
				r.budget.watchPressure(n, n.gen, nil)
			}
		}
	}
	r.lastAddr = time.Time{}
	r.waits, r.throttledWaits, r.addFailures, r.booted = nil, nil, 0, 0
	r.podWaits = map[string]time.Duration{}
	r.waiting = 0
	for _, n := range r.nodes {
		n.tr.reset()
		n.probeCalls = 0
		for _, p := range n.pods {
			p.measured = false
		}
	}
}

// need counts the calls the measured phase needs at the least for node i
// to hold target(i) addresses: one assign per ENI with room, then new ENIs
// each created with its addresses (one create, one attach, one
// DeleteOnTermination). booting adds start-up's read of the attached ENIs.
func (r *run) need(target func(i int) int, booting bool) {
	r.needed = map[string]int{}
	lim, _ := limits.Lookup(instanceType)
	per := lim.IPv4PerENI - 1
	for i, n := range r.nodes {
		if booting {
			r.needed["DescribeNetworkInterfaces"]++
		}
		ifs, err := r.cloud.Interfaces(n.id)
		if err != nil {
			r.fatal(err)
			return
		}
		have := 0
		for _, f := range ifs {
			have += len(f.Addresses) - 1
		}
		short := target(i) - have
		for _, f := range ifs {
			if room := per - (len(f.Addresses) - 1); short > 0 && room > 0 {
				r.needed["AssignPrivateIpAddresses"]++
				short -= room
			}
		}
		if short > 0 {
			k := min((short+per-1)/per, lim.MaxENIs-len(ifs))
			r.needed["CreateNetworkInterface"] += k
			r.needed["AttachNetworkInterface"] += k
			r.needed["ModifyNetworkInterfaceAttribute"] += k
		}
	}
	for a, k := range r.needed {
		if k == 0 {
			delete(r.needed, a)
		}
	}
}

// bootAll starts every agent now.
func (r *run) bootAll() {
	for _, n := range r.nodes {
		r.q.at(r.now(), n.boot)
	}
}

// addPods gives each node per pods now, measured.
func (r *run) addPods(per func(i int) int, tag string) {
	for i, n := range r.nodes {
		for k := range per(i) {
			n.addPod(fmt.Sprintf("%s-%d-%d", tag, i, k), true)
		}
	}
}

// untilPods runs until every measured pod has an address, or for at most
// limit, then settles.
func (r *run) untilPods(limit time.Duration) {
	r.runUntil(r.now().Add(limit), func() bool { return r.waiting == 0 })
	r.settle(5 * time.Minute)
}

func playJoin(r *run) {
	r.measure()
	r.need(func(int) int { return r.opts.PodsPerNode }, true)
	r.bootAll()
	r.addPods(func(int) int { return r.opts.PodsPerNode }, "p")
	r.untilPods(r.opts.Limit)
}

// playShared is the join while another client spends OtherShare of
// every mutating bucket's refill, from the start of the measured phase.
func playShared(r *run) {
	r.measure()
	oc := newOtherClient(r)
	r.other = oc
	oc.start()
	r.need(func(int) int { return r.opts.PodsPerNode }, true)
	r.bootAll()
	r.addPods(func(int) int { return r.opts.PodsPerNode }, "p")
	r.untilPods(r.opts.Limit)
	oc.stop()
}

// budgetConfig is the controller's Ledger for a run with options o.
func (o Options) budgetConfig() budget.Config {
	cfg := o.Account.budgetConfig()
	cfg.Margin = o.Margin
	if o.NoHorizon {
		cfg.Horizon = 0
	}
	return cfg
}

// playFailover is the join with the budget controller's two replicas
// electing a leader on a Lease; the leader dies at failoverAt, and the
// standby takes over once the Lease has gone unrenewed for its duration.
func playFailover(r *run) {
	r.measure()
	r.need(func(int) int { return r.opts.PodsPerNode }, true)
	el := newElection(r, r.opts.budgetConfig())
	r.budget.el, r.budget.l, r.budget.noHold = el, nil, r.opts.NoHold
	r.q.at(r.start.Add(failoverAt(r.opts, r.lowerBound())), el.kill)
	r.bootAll()
	r.addPods(func(int) int { return r.opts.PodsPerNode }, "p")
	r.untilPods(r.opts.Limit)
}

func playScaleUp(r *run) {
	r.bootAll()
	r.settle(r.opts.Limit)
	r.measure()
	total, nodes := r.opts.TotalPods, len(r.nodes)
	per := func(i int) int { return total/nodes + btoi(i < total%nodes) }
	r.need(per, false)
	r.addPods(per, "s")
	r.untilPods(r.opts.Limit)
}

func playRestart(r *run) {
	r.bootAll()
	r.addPods(func(int) int { return r.opts.PodsPerNode }, "p")
	r.runUntil(r.now().Add(r.opts.Limit), func() bool { return r.waiting == 0 })
	r.settle(r.opts.Limit)
	r.measure()
	r.need(func(i int) int { return len(r.nodes[i].pods) + 1 }, true)
	for _, n := range r.nodes {
		n.crash()
	}
	r.bootAll()
	r.addPods(func(int) int { return 1 }, "n")
	r.untilPods(r.opts.Limit)
}

// playChurn: the nodes share one subnet of about 38 addresses per node:
// room for their pods (two ENIs) but not for every warm ENI. Each node
// starts with its pods, then every 30 s (each node at its own phase)
// deletes two pods and creates two.
func playChurn(r *run) {
	r.bootAll()
	r.addPods(func(int) int { return r.opts.PodsPerNode }, "p")
	r.runUntil(r.now().Add(r.opts.Limit), func() bool { return r.waiting == 0 })
	r.settle(10 * time.Minute)
	r.measure()
	end := r.now().Add(r.opts.Churn)
	seq := 0
	for i, n := range r.nodes {
		phase := time.Duration(i) * 30 * time.Second / time.Duration(len(r.nodes))
		var tick func()
		tick = func() {
			if r.now().After(end) {
				return
			}
			live := n.sortedPods()
			live = slices.DeleteFunc(live, func(p *pod) bool { return p.state != podLive || p.req != 0 })
			for k := 0; k < 2 && k < len(live); k++ {
				n.delPod(live[k])
			}
			for range 2 {
				seq++
				n.addPod(fmt.Sprintf("c-%d-%d", i, seq), true)
			}
			r.q.at(r.now().Add(30*time.Second), tick)
		}
		r.q.at(r.now().Add(phase), tick)
	}
	r.advanceTo(end)
	// Pods on nodes that cannot grow may never get an address.
	r.untilPods(5 * time.Minute)
}

// playBursts: every node idles with its warm pool; every 90 s each node
// gets PodsPerNode pods, deleted 30 s after they have addresses. A pool
// that detaches its ENI between bursts creates a new one for each.
func playBursts(r *run) {
	r.bootAll()
	r.settle(r.opts.Limit)
	r.measure()
	end := r.now().Add(r.opts.Churn)
	burst := 0
	for r.err == nil && r.now().Before(end) {
		burst++
		tag := fmt.Sprintf("b%d", burst)
		r.addPods(func(int) int { return r.opts.PodsPerNode }, tag)
		r.q.at(r.now().Add(30*time.Second), func() {
			for _, n := range r.nodes {
				for _, p := range n.sortedPods() {
					n.delPod(p)
				}
			}
		})
		r.advanceTo(r.now().Add(90 * time.Second))
	}
	r.untilPods(r.opts.Limit)
}

func playSteady(r *run) {
	r.bootAll()
	r.addPods(func(int) int { return r.opts.PodsPerNode }, "p")
	r.runUntil(r.now().Add(r.opts.Limit), func() bool { return r.waiting == 0 })
	r.settle(r.opts.Limit)
	r.measure()
	r.advanceTo(r.now().Add(r.opts.Steady))
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

func sortPods(ps []*pod) {
	slices.SortFunc(ps, func(a, b *pod) int { return strings.Compare(a.name, b.name) })
}
