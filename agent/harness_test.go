package agent

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/vpcnet/vpcnet/agent/nodestate"
	"github.com/vpcnet/vpcnet/clock"
	"github.com/vpcnet/vpcnet/cloud"
	"github.com/vpcnet/vpcnet/config"
	"github.com/vpcnet/vpcnet/internal/testlog"
	"github.com/vpcnet/vpcnet/ipam"
	"github.com/vpcnet/vpcnet/sim"
	"github.com/vpcnet/vpcnet/sim/simtest"
)

const topology = `
region: us-west-2
vpc: {id: vpc-0sim, cidrs: [10.0.0.0/16]}
subnets:
- {id: subnet-a, az: us-west-2a, cidr: 10.0.0.0/24}
- {id: subnet-tiny, az: us-west-2a, cidr: 10.0.1.0/28}
- {id: subnet-pods, az: us-west-2a, cidr: 10.0.4.0/24}
- {id: subnet-2b, az: us-west-2b, cidr: 10.0.5.0/24}
securityGroups: [sg-0sim, sg-pods]
instanceTypes: [{name: x9.sim, maxENIs: 2, ipv4PerENI: 4}]
instances:
- {id: i-node1, type: m5.large, subnet: subnet-a}
- {id: i-tiny, type: m5.large, subnet: subnet-tiny}
- {id: i-x9, type: x9.sim, subnet: subnet-a}
attachDelay: 50ms
detachDelay: 20ms
imdsLag: 0s
seed: 1
`

// fakeHost stands in for the dataplane: it records ENI setups and lets a
// test say which pod addresses the host routes.
type fakeHost struct {
	mu     sync.Mutex // guards below
	routes map[netip.Addr]bool
	enis   map[string]ENINet
}

func newFakeHost() *fakeHost {
	return &fakeHost{routes: map[netip.Addr]bool{}, enis: map[string]ENINet{}}
}

func (h *fakeHost) Setup(ctx context.Context, n NodeNet) error { return nil }

func (h *fakeHost) SetupENI(ctx context.Context, e ENINet) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.enis[e.ID] = e
	return nil
}

func (h *fakeHost) TeardownENI(ctx context.Context, e ENINet) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.enis, e.ID)
	return nil
}

func (h *fakeHost) PodAddrs(ctx context.Context) ([]nodestate.Route, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []nodestate.Route
	for ip := range h.routes {
		out = append(out, nodestate.Route{Addr: ip})
	}
	return out, nil
}

func (h *fakeHost) route(ip netip.Addr, on bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if on {
		h.routes[ip] = true
	} else {
		delete(h.routes, ip)
	}
}

// world is one local cloud shared by the agents of a test.
type world struct {
	t     *testing.T
	cloud *sim.Cloud
	ec2   string

	mu    sync.Mutex
	calls map[string]int // EC2 requests by action, DryRun ones apart
	dry   map[string]int // DryRun requests by action: they change nothing
}

// countCalls counts EC2 requests by action before the emulator serves them.
func (w *world) countCalls(next http.Handler) http.Handler {
	return http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		if q, err := url.ParseQuery(string(body)); err == nil {
			w.mu.Lock()
			if q.Get("DryRun") == "true" {
				w.dry[q.Get("Action")]++
			} else {
				w.calls[q.Get("Action")]++
			}
			w.mu.Unlock()
		}
		next.ServeHTTP(rw, r)
	})
}

// dryRunCount is how many DryRun requests for action EC2 has had.
func (w *world) dryRunCount(action string) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.dry[action]
}

// callCount is how many requests for action EC2 has had, DryRun ones
// not counted.
func (w *world) callCount(action string) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.calls[action]
}

func newWorld(t *testing.T) *world {
	t.Helper()
	return newWorldOf(t, topology)
}

// newWorldOf is newWorld with another topology, usually topology edited.
func newWorldOf(t *testing.T, topology string) *world {
	t.Helper()
	return newWorldWith(t, topology, sim.Options{})
}

// newWorldOn is newWorld on clk: the local cloud's attaches and detaches
// are done once clk has passed their delay, and an agent given clk
// (Options.Clock) sees them done when it reads after moving it.
func newWorldOn(t *testing.T, clk *clock.Manual) *world {
	t.Helper()
	return newWorldWith(t, topology, sim.Options{Now: clk.Now})
}

func newWorldWith(t *testing.T, topology string, opts sim.Options) *world {
	t.Helper()
	simtest.IsolateAWSEnv(t)
	t.Setenv("AWS_EC2_METADATA_DISABLED", "false")
	cl := simtest.New(t, topology, opts)
	w := &world{t: t, cloud: cl, calls: map[string]int{}, dry: map[string]int{}}
	w.ec2 = simtest.Serve(t, w.countCalls(cl.EC2Handler()))
	return w
}

// node is one agent's environment: its instance, state dir and host.
type node struct {
	w        *world
	instance string
	dir      string
	host     *fakeHost
	imds     string
	env      map[string]string
	// kube is the Kubernetes layer; nil runs the agent without one.
	kube Kube
	// budget is the cluster's EC2 budget; nil runs the agent without one.
	budget Budget
	// ports records the hostPort rules the agent writes.
	ports *fakePorts
	// veths, when set, deletes veths for the agent.
	veths Veths
	// policy is the agent's NetworkPolicy enforcement (off when zero).
	policy PolicyOptions
	// disk, when set, holds the agent's files instead of the node's
	// file system.
	disk Disk
}

func (w *world) node(instance string, env map[string]string) *node {
	imdsURL := simtest.Serve(w.t, w.cloud.IMDSHandler(instance))
	dir := w.t.TempDir()
	e := map[string]string{
		"VPCNET_STATE_DIR":              filepath.Join(dir, "state"),
		"VPCNET_SOCKET":                 filepath.Join(dir, "run", "vpcnetd.sock"),
		"VPCNET_CNI_CONF_DIR":           filepath.Join(dir, "net.d"),
		"VPCNET_AWS_VPC_CNI_CHECKPOINT": filepath.Join(dir, "aws-node", "ipam.json"),
		"INTROSPECTION_BIND_ADDRESS":    "127.0.0.1:0",
		"VPCNET_METRICS_BIND_ADDRESS":   "127.0.0.1:0",
		"VPCNET_ADD_WAIT":               "5s",
		"IP_COOLDOWN_PERIOD":            "1",
		"VPCNET_ENI_GRACE":              "0s",
		"VPCNET_ENI_DETACH_HOLD":        "0s",
		"CLUSTER_NAME":                  "sim",
	}
	for k, v := range env {
		e[k] = v
	}
	if err := os.MkdirAll(e["VPCNET_STATE_DIR"], 0o700); err != nil {
		w.t.Fatal(err)
	}
	return &node{w: w, instance: instance, dir: dir, host: newFakeHost(), imds: imdsURL, env: e, ports: &fakePorts{}}
}

// running is an agent started by start; stop ends it and waits.
type running struct {
	*Agent
	cancel  context.CancelFunc
	done    chan error
	once    sync.Once
	stopErr error
}

func (n *node) start(t *testing.T) *running {
	t.Helper()
	a, err := New(n.options(t))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{Agent: a, cancel: cancel, done: make(chan error, 1)}
	go func() { r.done <- a.Run(ctx) }()
	t.Cleanup(func() { r.stop() })
	return r
}

// options are the agent's on this node: its settings, an EC2 client of
// the node's instance, its host and layers.
func (n *node) options(t *testing.T) Options {
	t.Helper()
	cfg, err := config.Load(func(k string) (string, bool) { v, ok := n.env[k]; return v, ok })
	if err != nil {
		t.Fatal(err)
	}
	log := testlog.New(t, slog.LevelWarn)
	c, err := cloud.New(context.Background(), cloud.Options{
		EC2Endpoint: n.w.ec2, IMDSEndpoint: n.imds,
		// The instance ID as access key: the local cloud applies the
		// instance's role to the agent's calls.
		Credentials: credentials.NewStaticCredentialsProvider(n.instance, "secret", ""),
		ClusterName: cfg.ClusterName, MaxBackoff: 5 * time.Millisecond, Registerer: prometheus.NewRegistry(), Logger: log,
	})
	if err != nil {
		t.Fatal(err)
	}
	return Options{Config: cfg, Cloud: c, Host: n.host, HostPorts: n.ports, Veths: n.veths, Kube: n.kube, Budget: n.budget, Policy: n.policy, Disk: n.disk, Logger: log, AttachTimeout: 10 * time.Second}
}

func (r *running) stop() error {
	r.once.Do(func() {
		r.cancel()
		r.stopErr = <-r.done
	})
	return r.stopErr
}

// waitReady waits until every readiness condition holds.
func (r *running) waitReady(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		if ok, _ := r.ready.get(); ok {
			return
		}
		select {
		case err := <-r.done:
			r.done <- err // for stop, which the test's cleanup calls
			t.Fatalf("agent exited before ready: %v", err)
		case <-time.After(20 * time.Millisecond):
		}
	}
	_, conds := r.ready.get()
	t.Fatalf("agent not ready: %s", failing(conds))
}

// settle waits until the pool's stats stop changing after a kick.
func (r *running) settle(t *testing.T, want func(ipam.Stats) bool) ipam.Stats {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	var st ipam.Stats
	for time.Now().Before(deadline) {
		v, _ := r.view(context.Background())
		st = v.Stats
		if want(st) {
			return st
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("pool never reached the expected state; last: %s", st)
	return st
}

func key(i int) ipam.Key {
	return ipam.Key{Network: "aws-cni", ContainerID: fmt.Sprintf("c%03d", i), IfName: "eth0"}
}
func pod(i int) ipam.Pod { return ipam.Pod{Namespace: "default", Name: fmt.Sprintf("p%03d", i)} }

// failing lists the conditions that do not hold, for test failures.
func failing(conds []Condition) string {
	var parts []string
	for _, c := range conds {
		if !c.OK {
			parts = append(parts, c.Name+": "+c.Message)
		}
	}
	return strings.Join(parts, "; ")
}

// reconcile reads EC2 and the host again now and waits until every job
// that started has answered.
func (r *running) reconcile(ctx context.Context, _ bool) {
	r.send(ctx, nodestate.ResyncNow{})
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		if v, _ := r.view(ctx); v.InFlight == 0 && v.Attaching == 0 {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// lookup is what the agent holds for k.
func (r *running) lookup(k ipam.Key) (ipam.Assignment, bool) {
	var as ipam.Assignment
	var ok bool
	r.query(context.Background(), func(n *nodestate.Node) { as, _, ok = n.Lookup(k) })
	return as, ok
}
