package kube

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"github.com/vpcnet/vpcnet/agent"
)

// Options configure a Client.
type Options struct {
	// Client is required; Dynamic is required with CustomNetwork.
	Client  Core
	Dynamic dynamic.Interface
	// NodeName is MY_NODE_NAME; empty means find the Node by providerID.
	NodeName string
	// CustomNetwork turns on the ENIConfig watch. The Node's annotation
	// ENIConfigAnnotation, else its label ENIConfigLabel, names the
	// ENIConfig; with neither it is the one named "default".
	CustomNetwork       bool
	ENIConfigAnnotation string
	ENIConfigLabel      string
	// StartupTaint is the taint key removed once the agent is ready;
	// empty means none.
	StartupTaint string
	// Hostname is the host's name, compared with the Node's name; empty
	// skips the comparison.
	Hostname string
	// Source says how the API server is reached, for /v1/status.
	Source string
	Logger *slog.Logger
	// Now is the clock. Nil means time.Now.
	Now func() time.Time
	// RetryInterval caps the backoff of the Node lookup and of taint
	// removal. Zero means 30 seconds.
	RetryInterval time.Duration
	// ProbeInterval is how often the API server is asked for its version
	// while it is failing, to notice when it is back. Zero means 10 s.
	ProbeInterval time.Duration
	// EventInterval: an Event about one object with one reason is recorded
	// at most once per EventInterval, so a stuck pod's retries do not
	// flood the API server. Zero means one minute.
	EventInterval time.Duration
	// ListPageSize is how many Nodes one page of the providerID search
	// asks for. Zero means 500.
	ListPageSize int64
}

// Client is the Kubernetes layer of one node's agent.
type Client struct {
	o      Options
	cs     Core
	dyn    dynamic.Interface
	log    *slog.Logger
	now    func() time.Time
	events chan agent.Event
	// wakeTaint asks the taint worker to look again; nodeFound is closed
	// once the Node is known.
	wakeTaint chan struct{}
	nodeFound chan struct{}

	mu sync.Mutex // guards everything below

	changed func()
	inst    agent.Instance
	runCtx  context.Context
	wg      *sync.WaitGroup

	// API server health: see health.go.
	reachable bool
	since     time.Time
	errs      map[string]apiErr

	// The Node: see identity.go and watch.go.
	node        *corev1.Node
	foundBy     string
	nodeProblem string
	mismatch    string
	pods        cache.Store

	// Startup taint: see taint.go.
	ready     bool
	taintErr  string
	taintGone time.Time
	// taintPatching: the patch removing the taint is in flight.
	taintPatching bool
	eniWatcher    *eniWatch
}

// eventQueue bounds the Events waiting to be recorded: past it, new ones
// are dropped rather than block the agent.
const eventQueue = 256

// New checks the options and builds a Client; Run starts it.
func New(o Options) (*Client, error) {
	switch {
	case o.Client == nil:
		return nil, errors.New("kube: no Kubernetes client: set Options.Client")
	case o.CustomNetwork && o.Dynamic == nil:
		return nil, errors.New("kube: custom networking reads ENIConfigs through a dynamic client: set Options.Dynamic")
	case o.CustomNetwork && (o.ENIConfigAnnotation == "" || o.ENIConfigLabel == ""):
		return nil, errors.New("kube: custom networking needs the ENIConfig annotation and label keys")
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.RetryInterval == 0 {
		o.RetryInterval = 30 * time.Second
	}
	if o.ProbeInterval == 0 {
		o.ProbeInterval = 10 * time.Second
	}
	if o.EventInterval == 0 {
		o.EventInterval = time.Minute
	}
	if o.ListPageSize == 0 {
		o.ListPageSize = 500
	}
	return &Client{
		o: o, cs: o.Client, dyn: o.Dynamic, log: o.Logger.With("component", "kube"), now: o.Now,
		events:    make(chan agent.Event, eventQueue),
		wakeTaint: make(chan struct{}, 1),
		nodeFound: make(chan struct{}),
		errs:      make(map[string]apiErr),
	}, nil
}

// NewForConfig builds the clients from rc and then a Client. Typed
// requests use protobuf, which costs the API server and the agent less
// than JSON; the dynamic client (ENIConfigs) needs JSON.
func NewForConfig(rc *rest.Config, o Options) (*Client, error) {
	rc = rest.CopyConfig(rc)
	if rc.UserAgent == "" {
		rc.UserAgent = "vpcnetd"
	}
	reach := &reachTracker{}
	rc.Wrap(reach.wrap)
	typed := rest.CopyConfig(rc)
	typed.ContentType = "application/vnd.kubernetes.protobuf"
	typed.AcceptContentTypes = "application/vnd.kubernetes.protobuf,application/json"
	core, err := newRESTCore(typed)
	if err != nil {
		return nil, err
	}
	dyn, err := dynamic.NewForConfig(rc)
	if err != nil {
		return nil, fmt.Errorf("kube: dynamic client for %s: %w", rc.Host, err)
	}
	o.Client, o.Dynamic = core, dyn
	c, err := New(o)
	if err != nil {
		return nil, err
	}
	reach.c.Store(c)
	return c, nil
}

var _ agent.Kube = (*Client)(nil)

// Run finds the Node, then watches it, its pods and its ENIConfig until
// ctx ends. Call it once. It returns nil when ctx ends: an unreachable API server is
// waited out, never returned.
func (c *Client) Run(ctx context.Context, inst agent.Instance, changed func()) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	defer wg.Wait()
	c.mu.Lock()
	c.inst, c.changed, c.runCtx, c.wg = inst, changed, ctx, &wg
	c.mu.Unlock()

	host := c.o.NodeName
	if host == "" {
		host = inst.ID
	}
	rec := newRecorder(c, host)
	wg.Add(4)
	go func() { defer wg.Done(); rec.run(ctx) }()
	go func() { defer wg.Done(); c.eventLoop(ctx, rec) }()
	go func() { defer wg.Done(); c.probeLoop(ctx, host) }()
	go func() { defer wg.Done(); c.taintLoop(ctx) }()

	node, err := c.resolveNode(ctx, inst)
	if err != nil {
		return nil // ctx ended
	}
	// Act on the Node as read (its ENIConfig, its taint) while the watch
	// on it starts.
	c.onNode(node)
	c.watch(ctx, &wg, node.Name)
	<-ctx.Done()
	return nil
}

// notify tells the agent that State may have changed. It must be called
// without c.mu held.
func (c *Client) notify() {
	c.mu.Lock()
	f := c.changed
	c.mu.Unlock()
	if f != nil {
		f()
	}
}

// SetReady records whether the agent can serve pods; the taint worker
// acts on it.
func (c *Client) SetReady(ready bool) {
	c.mu.Lock()
	was := c.ready
	c.ready = ready
	c.mu.Unlock()
	if was != ready {
		c.poke() // the worker reports what it does
	}
}

// poke wakes the taint worker; wakes coalesce.
func (c *Client) poke() {
	select {
	case c.wakeTaint <- struct{}{}:
	default:
	}
}

// State is what the layer knows now.
func (c *Client) State() agent.KubeState {
	c.mu.Lock()
	defer c.mu.Unlock()
	st := agent.KubeState{
		Enabled: true, Source: c.o.Source, Reachable: c.reachable, Since: c.since, LastError: c.errorsLocked(),
		NodeFoundBy: c.foundBy, NodeProblem: c.nodeProblem, Mismatch: c.mismatch,
	}
	if c.node != nil {
		st.Node = c.node.Name
		// The kubelet's --max-pods (or its config's maxPods), as it
		// reports it; absent until the kubelet has posted its status.
		st.MaxPods = int(c.node.Status.Capacity.Pods().Value())
		st.Cordoned = cordoned(c.node)
	}
	if c.pods != nil {
		st.Pods = len(c.pods.ListKeys())
	}
	st.StartupTaint, st.TaintRemoved = c.taintStateLocked()
	if c.o.CustomNetwork {
		st.ENIConfig = c.eniStateLocked()
	}
	return st
}
