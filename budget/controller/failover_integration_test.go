package controller_test

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/leaderelection"

	"github.com/vpcnet/vpcnet/budget"
	"github.com/vpcnet/vpcnet/budget/budgetapi"
	"github.com/vpcnet/vpcnet/budget/controller"
	"github.com/vpcnet/vpcnet/internal/testlog"
	"github.com/vpcnet/vpcnet/kube"
)

// productionLease runs the failover test with the controller's default
// Lease timings (15 s, 10 s, 2 s) instead of a test's short ones: make
// budget-failover.
var productionLease = flag.Bool("production-lease", false, "TestALeaderCrashUnderLoad: the controller's default Lease timings (takes about a minute)")

// leaseTimings are the election's: the controller's defaults with
// -production-lease, else short ones so the test takes seconds.
func leaseTimings() (lease, renew, retry time.Duration) {
	if *productionLease {
		return 15 * time.Second, 10 * time.Second, 2 * time.Second
	}
	// A retry period of 1 s: the leader grants only while its last
	// renewal is two of them old, and a loaded test machine (the race
	// detector, 300 agents) can take half a second to renew.
	return 6 * time.Second, 4 * time.Second, time.Second
}

// killSwitch cuts a replica off as a crash of its process would: the API
// server hears no more from it (so it neither renews nor releases its
// Lease), and agents' connections to it, open or new, are reset.
type killSwitch struct {
	net.Listener
	dead atomic.Bool
	// apiDead cuts only the API server off: a partition, the replica
	// still serving agents.
	apiDead atomic.Bool

	mu    sync.Mutex // guards conns
	conns []net.Conn
}

func (k *killSwitch) Accept() (net.Conn, error) {
	for {
		c, err := k.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if k.dead.Load() {
			c.Close() // the port answers nobody: as refused, for the agent
			continue
		}
		k.mu.Lock()
		k.conns = append(k.conns, c)
		k.mu.Unlock()
		return c, nil
	}
}

func (k *killSwitch) kill() {
	k.dead.Store(true)
	k.mu.Lock()
	defer k.mu.Unlock()
	for _, c := range k.conns {
		c.Close()
	}
}

var errKilled = errors.New("replica killed")

// refillPerSecond is every bucket's refill in the failover test: grants
// come many times a second, so a gap in them is the failover's.
const refillPerSecond = 200

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// startKillableReplica runs a controller as startReplica does, with the
// timings of leaseTimings and a budget generous enough that a few
// hundred agents get grants many times a second, so a gap in them is
// the failover's.
func (e *env) startKillableReplica(t *testing.T, name string) (*replica, *killSwitch) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ks := &killSwitch{Listener: ln}
	lease, renew, retry := leaseTimings()
	cfg := budget.DefaultConfig()
	cfg.Default = budget.Bucket{Burst: 200, Refill: refillPerSecond}
	for a := range cfg.Buckets {
		cfg.Buckets[a] = cfg.Default
	}
	s := controller.Settings{
		Pod: name, Namespace: ns, PodIP: netip.MustParseAddr("127.0.0.1"), Lease: leaseName,
		LeaseDuration: lease, RenewDeadline: renew, RetryPeriod: retry,
		Budget: cfg, Clients: []string{"system:serviceaccount:kube-system:vpcnet"},
	}
	rc := rest.CopyConfig(e.as(t, ns, "vpcnet-budget"))
	rc.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripFunc(func(r *http.Request) (*http.Response, error) {
			if ks.dead.Load() || ks.apiDead.Load() {
				return nil, errKilled
			}
			return rt.RoundTrip(r)
		})
	})
	ctx, cancel := context.WithCancel(context.Background())
	r := &replica{name: name, endpoint: ln.Addr().String(), cancel: cancel, done: make(chan error, 1)}
	go func() {
		// A connection an agent opened and never used (its job ended
		// first) holds Shutdown for 5 s (net/http treats it as
		// active that long): more than the default timeout.
		r.done <- controller.Run(ctx, controller.Options{Settings: s, REST: rc, Log: testlog.New(t, slog.LevelWarn).With("replica", name), Listener: ks,
			ShutdownTimeout: 15 * time.Second})
	}()
	t.Cleanup(func() { r.stop(t) })
	return r, ks
}

// TestALeaderCrashUnderLoad runs two replicas of the real controller
// (HTTP, TokenReview, client-go's election on the Lease) and a few
// hundred agents' budget clients, each asking for calls over and over.
// The leader crashes: its Lease is not released. The agents hold their
// jobs (none goes alone), and every one is granted again by the standby
// within the Lease's takeover time plus the clients' pause between asks
// and the new leader's gathering of the jobs held (TermGather).
func TestALeaderCrashUnderLoad(t *testing.T) {
	const agents = 300
	e := setup(t)
	lookup := e.agentLookupFast(t)
	a, killA := e.startKillableReplica(t, "vpcnet-budget-a")
	eventually(t, 20*time.Second, "replica a leads", func() error {
		ep, err := lookup(t.Context())
		if err == nil && ep != a.endpoint {
			err = fmt.Errorf("leader at %s, want %s", ep, a.endpoint)
		}
		return err
	})
	b, _ := e.startKillableReplica(t, "vpcnet-budget-b")
	eventually(t, 10*time.Second, "replica b is ready", func() error {
		if code := b.get(t, "/readyz"); code != http.StatusOK {
			return fmt.Errorf("/readyz answered %d", code)
		}
		return nil
	})

	token := e.as(t, ns, "vpcnet").BearerToken
	ctx, cancel := context.WithCancel(t.Context())
	// grants[i] are when agent i's grants came (after their wait), in
	// order; alone counts jobs that went on their node's own budget.
	var mu sync.Mutex
	grants := make([][]time.Time, agents)
	alone := 0
	var wg sync.WaitGroup
	for i := range agents {
		c := budgetapi.NewClient(budgetapi.ClientOptions{
			Node: fmt.Sprintf("ip-10-0-%d-%d", i/250, i%250), Endpoint: lookup,
			Token: func() (string, error) { return token, nil },
			// A loaded test machine answers slower than a cluster; an
			// agent whose first ask timed out would go alone.
			Timeout: 10 * time.Second,
			Observe: func(outcome string, _ time.Duration) {
				mu.Lock()
				defer mu.Unlock()
				if outcome == budgetapi.Granted {
					grants[i] = append(grants[i], time.Now())
				} else {
					alone++
				}
			},
		})
		wg.Go(func() {
			for ctx.Err() == nil {
				_ = c.Acquire(ctx, []string{"CreateNetworkInterface"}, func() budgetapi.Need { return budgetapi.Need{Urgent: true} })
			}
		})
	}
	defer func() { cancel(); wg.Wait() }() // also when a check fails
	granted := func(since time.Time) (n int) {
		mu.Lock()
		defer mu.Unlock()
		for _, g := range grants {
			if len(g) > 0 && g[len(g)-1].After(since) {
				n++
			}
		}
		return n
	}
	start := time.Now()
	eventually(t, 60*time.Second, "every agent granted by a", func() error {
		if n := granted(start); n < agents {
			return fmt.Errorf("%d of %d agents granted", n, agents)
		}
		return nil
	})

	mu.Lock()
	aloneBefore := alone // an agent's first ask may land on a renewal that is late
	mu.Unlock()
	killed := time.Now()
	killA.kill()
	lease, renew, retry := leaseTimings()
	// A candidate takes the Lease over once it saw no renewal for the
	// Lease's duration; it looks every retry period plus client-go's
	// jitter, and needs one look to see the last renewal and one to
	// take over. An agent asks again every ElectionPause.
	takeover := lease + 2*time.Duration(float64(retry)*(1+leaderelection.JitterFactor))
	// The new term starts with its buckets empty: granting every agent
	// once takes agents ÷ the granted refill.
	refill := float64(agents) / (refillPerSecond * budget.DefaultConfig().Margin)
	serve := time.Duration(refill * float64(time.Second))
	// The new leader gathers the held jobs for TermGather before it
	// books them, oldest first, and lets a quarter second pass for
	// their holders to be back.
	gather := budgetapi.TermGather + 250*time.Millisecond
	bound := takeover + budgetapi.ElectionPause + gather + serve + time.Second // slack: the API server's and the test's own pace
	// When the Lease names the standby, for the log.
	var tookOver time.Duration
	eventually(t, bound, "the Lease names the standby", func() error {
		ep, err := lookup(t.Context())
		if err == nil && ep != b.endpoint {
			err = fmt.Errorf("the Lease names %s", ep)
		}
		tookOver = time.Since(killed)
		return err
	})
	// The dead leader's grants wait at most its horizon: those after it
	// are the standby's.
	horizon, _, _ := controller.Settings{LeaseDuration: lease, RenewDeadline: renew, RetryPeriod: retry}.Horizon()
	eventually(t, bound+20*time.Second, "every agent granted by b", func() error {
		if n := granted(killed.Add(horizon)); n < agents {
			return fmt.Errorf("%d of %d agents granted since the kill", n, agents)
		}
		return nil
	})
	mu.Lock()
	wentAlone := alone - aloneBefore // a job cancelled at the end counts as alone
	mu.Unlock()
	cancel()
	wg.Wait()

	// For each agent, when it was granted again by the standby, and its
	// longest time without a grant across the crash.
	var worst, gap time.Duration
	mu.Lock()
	defer mu.Unlock()
	for i, g := range grants {
		k, _ := slices.BinarySearchFunc(g, killed, func(a, b time.Time) int { return a.Compare(b) })
		j, _ := slices.BinarySearchFunc(g, killed.Add(horizon), func(a, b time.Time) int { return a.Compare(b) })
		if k == 0 || j == len(g) {
			t.Fatalf("agent %d: %d grants, none before the kill or none from the standby", i, len(g))
		}
		worst, gap = max(worst, g[j].Sub(killed)), max(gap, g[j].Sub(g[j-1]))
	}
	t.Logf("%d agents, Lease %v (retry %v): the Lease named the standby %v after the leader's crash (seen by polling every 100 ms); every agent granted by the standby within %v of the crash (bound %v: takeover at most %v + ElectionPause + gathering %v + %v to grant every agent from empty buckets + 1 s); the longest an agent went without a grant %v; jobs alone: %d",
		agents, lease, retry, tookOver.Round(100*time.Millisecond), worst.Round(time.Millisecond), bound.Round(time.Millisecond), takeover, gather, serve.Round(time.Millisecond), gap.Round(time.Millisecond), wentAlone)
	if worst > bound {
		t.Errorf("an agent was granted by the standby %v after the crash; want at most %v", worst, bound)
	}
	if wentAlone > 0 {
		t.Errorf("%d jobs went alone during the failover; want every one held for the next leader", wentAlone)
	}
}

// agentLookupFast is agentLookup with client-go's rate limit off: a few
// hundred agents in one process share the client, where each node has
// its own.
func (e *env) agentLookupFast(t *testing.T) func(ctx context.Context) (string, error) {
	t.Helper()
	rc := e.as(t, ns, "vpcnet")
	rc.QPS, rc.Burst = -1, 0
	k, err := kube.NewForConfig(rc, kube.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return func(ctx context.Context) (string, error) { return k.BudgetEndpoint(ctx, ns, leaseName) }
}

// A leader cut off from the API server stops granting once its last
// renewal is older than fresh, long before client-go's renew deadline
// ends its leadership: the next leader counts on it when it takes the
// buckets as refilled since (Settings.Horizon's credit).
func TestALeaderCutOffFromTheAPIServerStopsGrantingWhenItsRenewalIsStale(t *testing.T) {
	e := setup(t)
	lookup := e.agentLookup(t)
	a, ks := e.startKillableReplica(t, "vpcnet-budget-a")
	eventually(t, 20*time.Second, "replica a leads", func() error { _, err := lookup(t.Context()); return err })
	token := e.as(t, ns, "vpcnet").BearerToken
	eventually(t, 10*time.Second, "a grants", func() error {
		if code, msg := a.reserve(t, token); code != http.StatusOK {
			return fmt.Errorf("%d %s", code, msg)
		}
		return nil
	})
	lease, renew, retry := leaseTimings()
	_, fresh, _ := controller.Settings{LeaseDuration: lease, RenewDeadline: renew, RetryPeriod: retry}.Horizon()
	cut := time.Now()
	ks.apiDead.Store(true)
	eventually(t, renew+retry, "a stops granting", func() error {
		if code, msg := a.reserve(t, token); code != http.StatusServiceUnavailable || !strings.Contains(msg, "not the leader") {
			return fmt.Errorf("%d %s", code, msg)
		}
		return nil
	})
	took := time.Since(cut)
	t.Logf("cut off from the API server, the leader stopped granting after %v (fresh %v, renew deadline %v)", took.Round(time.Millisecond), fresh, renew)
	if slack := 300 * time.Millisecond; took > fresh+slack {
		t.Errorf("the leader granted for %v after its API server was cut off; want at most %v (its last renewal's freshness) + %v", took, fresh, slack)
	}
}
