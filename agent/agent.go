// Package agent is vpcnetd: it owns the node's address pool, keeps the warm
// pool at target through EC2, serves the CNI plugin over a root-only unix
// socket, and reports what it is doing and why.
//
// The pure core (ipam) decides; this package performs. All pool state sits
// behind one mutex, every change to who holds what is on disk before it is
// visible, and one reconcile goroutine is the only place EC2 is mutated for
// the pool.
package agent

import (
	"log/slog"
	"net/netip"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/vpcnet/vpcnet/checkpoint"
	"github.com/vpcnet/vpcnet/cloud"
	"github.com/vpcnet/vpcnet/config"
	"github.com/vpcnet/vpcnet/ipam"
)

// Options are the agent's dependencies. Cloud, Host and Config are
// required; the rest have working defaults.
type Options struct {
	Config config.Config
	Cloud  Cloud
	Host   Host
	Logger *slog.Logger
	// Now is the clock. Nil means time.Now.
	Now func() time.Time
	// Registerer receives the vpcnet_* metrics. Nil means a private registry.
	Registerer prometheus.Registerer
	// Gatherer serves /metrics; nil means the private registry's.
	Gatherer prometheus.Gatherer
	// AttachTimeout bounds the wait for a new ENI to reach "attached".
	AttachTimeout time.Duration
	// Kube is the Kubernetes layer. Nil means NoKube: the agent runs
	// without node identity, Events, custom networking or the taint.
	Kube Kube
}

// Agent is one node's vpcnetd.
type Agent struct {
	cfg   config.Config
	cloud Cloud
	host  Host
	log   *slog.Logger
	now   func() time.Time
	met   *metrics
	ready *readiness
	// diag are the diagnostic conditions, which never block readiness.
	diag *readiness
	kube Kube

	attachTimeout time.Duration
	kickCh        chan struct{}
	// passMu makes reconcile passes take turns: the loop runs them, and
	// tests call reconcile directly to force one.
	passMu sync.Mutex
	// confInstalled is set once the CNI configuration is written. Only a
	// reconcile pass touches it.
	confInstalled bool

	mu sync.Mutex // guards everything below

	// self, limits, planCfg and node are learned during start-up.
	self   cloud.Self
	limits ipam.Limits
	// limitsSource says where limits came from, for /v1/status.
	limitsSource string
	planCfg      ipam.PlanConfig
	node         NodeNet

	// pool is who holds which address; it is the checkpoint's content.
	pool *ipam.Pool
	// stale are checkpoint entries whose address is on no attached ENI.
	// They are kept on disk, never released automatically, and reported.
	stale []checkpoint.Entry
	// quarantined are addresses the host routes to a pod that the
	// checkpoint does not know: held under a synthetic key so nobody gets
	// them, and, while any exist, nothing is released.
	quarantined map[netip.Addr]bool
	// hold, when set, says why no address or ENI may be released now.
	hold string
	// waiting counts Add calls blocked for an address; avail is closed and
	// replaced whenever addresses may have become available.
	waiting int
	avail   chan struct{}
	// eniMeta is what the pool does not keep about each ENI.
	eniMeta map[string]eniMeta
	// subnets caches subnet CIDRs learned from EC2.
	subnets map[string]netip.Prefix
	// grow spaces out growth after EC2 refused it.
	grow growBackoff
	// lastShortfall and lastGrowErr explain an empty pool to the plugin.
	lastShortfall ipam.Shortfall
	lastGrowErr   error
	lastReconcile time.Time
	lastEC2Err    string
	cloudOK       bool
	// With custom networking: eniCfgOK says planCfg's subnet and security
	// groups are the ENIConfig's, and eniCfgMsg which, or why not;
	// subnetChecks are EC2's definitive verdicts on ENIConfig subnets
	// ("" is usable); ckAddrs are the checkpoint's addresses while it is
	// restored, the only ones on the primary ENI the pool takes.
	eniCfgOK      bool
	eniCfgMsg     string
	lastENIConfig ENIConfigState
	subnetChecks  map[string]string
	ckAddrs       map[netip.Addr]bool
	// httpAddrs are the introspection and metrics listeners, in that
	// order, once bound (tests bind port 0).
	httpAddrs []string
}

// eniMeta is what the agent needs about an attached ENI beyond the pool.
type eniMeta struct {
	MAC          string
	AttachmentID string
}

// New checks the options and builds an agent; Run starts it.
func New(o Options) (*Agent, error) {
	if o.Cloud == nil || o.Host == nil {
		panic("agent.New: Cloud and Host are required")
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Now == nil {
		o.Now = time.Now
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
		now:           o.Now,
		attachTimeout: o.AttachTimeout,
		kickCh:        make(chan struct{}, 1),
		pool:          ipam.NewPool(o.Config.Cooldown),
		quarantined:   make(map[netip.Addr]bool),
		avail:         make(chan struct{}),
		eniMeta:       make(map[string]eniMeta),
		subnets:       make(map[string]netip.Prefix),
		subnetChecks:  make(map[string]string),
		kube:          o.Kube,
	}
	a.ready = newReadiness(o.Now, conditionOrder(o.Config.CustomNetwork))
	a.ready.set(CondConfig, true, "all settings valid")
	if o.Config.CustomNetwork {
		a.eniCfgMsg = "waiting for the Kubernetes layer to read the node's ENIConfig"
		a.ready.set(CondENIConfig, false, a.eniCfgMsg)
	}
	a.diag = newReadiness(o.Now, diagnosticOrder)
	met, err := newMetrics(o.Registerer, o.Gatherer, a)
	if err != nil {
		return nil, err
	}
	a.met = met
	return a, nil
}

// kick asks the reconciler for a pass soon; kicks coalesce.
func (a *Agent) kick() {
	select {
	case a.kickCh <- struct{}{}:
	default:
	}
}

// wakeLocked wakes every Add waiting for an address. a.mu must be held.
func (a *Agent) wakeLocked() {
	close(a.avail)
	a.avail = make(chan struct{})
}

// maxENIsLocked is how many ENIs the pool may use: the instance type's
// limit, lowered by MAX_ENI.
func (a *Agent) maxENIsLocked() int {
	n := a.limits.MaxENIs
	if a.cfg.MaxENI > 0 && a.cfg.MaxENI < n {
		n = a.cfg.MaxENI
	}
	return n
}
