// Package agent is vpcnetd: it owns the node's address pool, keeps the warm
// pool at target through EC2, serves the CNI plugin over a root-only unix
// socket, and reports what it is doing and why.
//
// The shape is etcd raft's: one owner (loop.go) owns the node's state, a
// pure state machine (agent/nodestate). Plugin requests, EC2 and host
// results, checkpoint acknowledgements and clock ticks reach it as events;
// it hands out what must be done (a checkpoint write, EC2 and host jobs,
// replies) and never waits on disk or network itself. The writes and the
// jobs (run by agent/executor) go to the Effects, and replies leave only
// once what they promise is on disk. An Add hears its address earlier,
// while the checkpoint that records it is written, so its pod's
// NetworkPolicy rules are written alongside; it answers once both are.
//
// This is the one shell: vpcnetd runs it with Run (the owner a goroutine,
// each piece of work on a goroutine, the node's files and clock), and the
// deterministic simulation and the scale driver run the same start-up and
// owner with Start and Step, in worlds of their own (a manual clock, the
// EC2 emulator, a fake host, a disk in memory, Effects that they
// schedule).
package agent

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/vpcnet/vpcnet/agent/executor"
	"github.com/vpcnet/vpcnet/agent/nodestate"
	"github.com/vpcnet/vpcnet/budget/budgetapi"
	"github.com/vpcnet/vpcnet/clock"
	"github.com/vpcnet/vpcnet/cloud"
	"github.com/vpcnet/vpcnet/config"
	"github.com/vpcnet/vpcnet/introspect"
	"github.com/vpcnet/vpcnet/ipam"
	"github.com/vpcnet/vpcnet/netfacts"
)

// Options are the agent's dependencies. Cloud, Host and Config are
// required; the rest have working defaults.
type Options struct {
	Config config.Config
	Cloud  Cloud
	Host   Host
	Logger *slog.Logger
	// Clock is the one source of time. Nil means the wall clock.
	Clock clock.Clock
	// Registerer receives the vpcnet_* metrics. Nil means a private registry.
	Registerer prometheus.Registerer
	// Gatherer serves /metrics; nil means the private registry's.
	Gatherer prometheus.Gatherer
	// AttachTimeout bounds the wait for a new ENI to reach "attached".
	AttachTimeout time.Duration
	// Kube is the Kubernetes layer. Nil means NoKube: the agent runs
	// without node identity, Events, custom networking or the taint.
	Kube Kube
	// Budget grants EC2 calls from the cluster's shared budget (the
	// budget controller's budgetapi.Client). Nil: the node spends on
	// its own.
	Budget Budget
	// HostPorts writes the pods' hostPort rules. Nil: an Add with
	// hostPorts fails.
	HostPorts HostPorts
	// Veths deletes pods' veth pairs after a Del has answered. Nil: the
	// plugin deletes them itself, before its DEL returns.
	Veths Veths
	// Policy is NetworkPolicy enforcement; its zero value is off.
	Policy PolicyOptions
	// Disk holds the checkpoint and the CNI configuration. Nil: the
	// node's file system.
	Disk Disk
	// Effects runs the owner's work. Nil: vpcnetd's goroutines. A driver
	// that brings its own runs the agent with Start and Step, not Run.
	Effects Effects
}

// Veths deletes a pod's veth pair.
type Veths interface {
	// DeleteVeth deletes the host veth at index, if it still has name.
	DeleteVeth(ctx context.Context, name string, index int) error
}

// Budget is the cluster-wide EC2 budget, asked before a job calls EC2.
type Budget interface {
	// Acquire returns when the calls of actions may be made; urgent says,
	// each time it is asked, whether pods wait for them. It fails only
	// when ctx ends.
	Acquire(ctx context.Context, actions []string, need func() budgetapi.Need) error
	// Pressure reports the subnets EC2 found out of addresses and
	// answers which of subnets are nearly full (none without a
	// controller).
	Pressure(ctx context.Context, subnets, exhausted []string) []string
	// Status is what the client has seen of the controller, for
	// /v1/status.
	Status() budgetapi.ClientStatus
	// HoldChanges is signalled when the client starts or stops holding
	// calls for the controller's next leader (Status().Holding).
	HoldChanges() <-chan struct{}
}

// Agent is one node's vpcnetd.
type Agent struct {
	cfg   config.Config
	cloud Cloud
	host  Host
	log   *slog.Logger
	clk   clock.Clock
	met   *metrics
	ready *readiness
	// diag are the diagnostic conditions, which never block readiness.
	diag *readiness
	kube Kube
	// budget is nil without a cluster-wide budget.
	budget Budget

	attachTimeout time.Duration
	// events and queries feed the owner goroutine; requests and results
	// are events, views are queries run there.
	events  chan nodestate.Event
	queries chan func(*nodestate.Node)
	// done is closed when the owner goroutine has stopped.
	done chan struct{}
	// health is what the owner last published for metrics and readiness
	// readers that must not wait for it.
	summary atomic.Pointer[health]
	// confState says whether the CNI configuration is written (conf*);
	// Run waits for confWG, so a write under way finishes before it returns.
	confState atomic.Int32
	confWG    sync.WaitGroup

	// bootp is what start-up learned about the node; set once, before
	// the owner starts, and read-only afterwards.
	bootp atomic.Pointer[bootInfo]
	// kubeKick wakes the Kubernetes bridge; kicks coalesce.
	kubeKick chan struct{}

	// The owner's state: the state machine, the executor its jobs run on
	// and when the machine next wants a Tick. Start-up sets them before
	// the owner runs; from then on only the owner touches them (vpcnetd's
	// owner goroutine, or a driver that is the owner itself).
	node *nodestate.Node
	x    *executor.Executor
	wake time.Time
	// fx runs the owner's work; disk holds its files.
	fx   Effects
	disk Disk
	// writes are the checkpoint writes handed out and not finished; the
	// owner goroutine waits for them before it stops.
	writes sync.WaitGroup
	// replies route replies to the requests waiting for them.
	replies replies
	// ports are the pods' hostPorts.
	ports *hostPortKeeper
	// policy is the pods' NetworkPolicy rules.
	policy *policyKeeper
	// veths deletes the veths of deleted pods; nil leaves it to the plugin.
	veths Veths

	mu sync.Mutex // guards below; never held across I/O
	// httpAddrs are the introspection and metrics listeners, in that
	// order, once bound (tests bind port 0).
	httpAddrs []string
	// eniCfgMsg is the last ENIConfig verdict, for /v1/status.
	eniCfgMsg string
	// maxPods is the last max pods verdict, for /v1/status.
	maxPods introspect.MaxPods
	// pre is the IAM preflight's verdict; it has its own lock.
	pre *preflight
}

// bootInfo is what start-up learned about the node.
type bootInfo struct {
	self         cloud.Self
	limits       ipam.Limits
	limitsSource string
	planCfg      ipam.PlanConfig
	maxPods      maxPodsBase
	node         NodeNet
}

// health is a published summary of the node state.
type health struct {
	view nodestate.View
}

// New checks the options and builds an agent; Run starts it.
func New(o Options) (*Agent, error) {
	if o.Cloud == nil || o.Host == nil {
		panic("agent.New: Cloud and Host are required")
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Clock == nil {
		o.Clock = clock.Real{}
	}
	if o.Registerer == nil {
		reg := prometheus.NewRegistry()
		o.Registerer, o.Gatherer = reg, reg
	}
	if o.AttachTimeout == 0 {
		o.AttachTimeout = 2 * time.Minute
	}
	if o.Kube == nil {
		o.Kube = NoKube{}
	}
	a := &Agent{
		cfg:           o.Config,
		cloud:         o.Cloud,
		host:          o.Host,
		log:           o.Logger,
		clk:           o.Clock,
		attachTimeout: o.AttachTimeout,
		events:        make(chan nodestate.Event, 1024),
		queries:       make(chan func(*nodestate.Node)),
		done:          make(chan struct{}),
		kubeKick:      make(chan struct{}, 1),
		kube:          o.Kube,
		budget:        o.Budget,
		veths:         o.Veths,
		fx:            o.Effects,
		disk:          o.Disk,
	}
	if a.fx == nil {
		a.fx = goroutines{clk: o.Clock, send: a.send}
	}
	if a.disk == nil {
		a.disk = files{}
	}
	a.ports = newHostPortKeeper(o.Config.HostPortPath(), o.HostPorts, o.Logger, o.Clock)
	a.policy = newPolicyKeeper(o.Policy, o.Logger, o.Clock)
	a.ready = newReadiness(a.clk.Now, conditionOrder(o.Config.CustomNetwork))
	a.ready.set(CondConfig, true, "all settings valid")
	if o.Config.CustomNetwork {
		a.eniCfgMsg = "waiting for the Kubernetes layer to read the node's ENIConfig"
		a.ready.set(CondENIConfig, false, a.eniCfgMsg)
	}
	a.diag = newReadiness(a.clk.Now, diagnosticOrder)
	a.pre = newPreflight()
	met, err := newMetrics(o.Registerer, o.Gatherer, a)
	if err != nil {
		return nil, err
	}
	a.met = met
	if err := a.policy.register(o.Registerer); err != nil {
		return nil, err
	}
	return a, nil
}

func (a *Agent) now() time.Time { return a.clk.Now() }

// info is what start-up learned, or the zero bootInfo before it has.
func (a *Agent) info() *bootInfo {
	if b := a.bootp.Load(); b != nil {
		return b
	}
	return &bootInfo{}
}

// maxENIs is how many ENIs the pool may use: the instance type's limit,
// lowered by MAX_ENI.
func (a *Agent) maxENIs() int {
	n := a.info().limits.MaxENIs
	if a.cfg.MaxENI > 0 && a.cfg.MaxENI < n {
		n = a.cfg.MaxENI
	}
	return n
}

// hostVeth names a pod's host veth as the plugin does (the Amazon VPC
// CNI's rule), so the state machine can tell whose route an address is.
func (a *Agent) hostVeth(p ipam.Pod) string {
	return netfacts.HostVethName(a.cfg.VethPrefix, p.Namespace, p.Name)
}
