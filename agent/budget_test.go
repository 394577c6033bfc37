package agent

import (
	"context"
	"errors"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vpcnet/vpcnet/agent/nodestate"
	"github.com/vpcnet/vpcnet/budget"
	"github.com/vpcnet/vpcnet/budget/budgetapi"
	"github.com/vpcnet/vpcnet/clock"
	"github.com/vpcnet/vpcnet/ipam"
)

// controller is a budget controller serving a real Ledger over HTTP,
// counting what it granted.
type controller struct {
	url string

	mu       sync.Mutex // guards below
	granted  map[string]int
	urgent   map[string]int
	requests int
}

func newController(t *testing.T) *controller {
	c := &controller{granted: map[string]int{}, urgent: map[string]int{}}
	srv := budgetapi.NewServer(budget.New(budget.DefaultConfig()), clock.Real{}, budgetapi.ServerOptions{
		Observe: func(r budget.Request, g budget.Grant) {
			c.mu.Lock()
			defer c.mu.Unlock()
			c.requests++
			if !g.Granted() {
				return
			}
			for _, a := range r.Actions {
				c.granted[a]++
				if r.Urgent {
					c.urgent[a]++
				}
			}
		},
	})
	hs := httptest.NewServer(srv)
	t.Cleanup(hs.Close)
	c.url = strings.TrimPrefix(hs.URL, "http://")
	return c
}

func (c *controller) count(m map[string]int, action string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return m[action]
}

// TestEveryEC2ChangeOfTheAgentIsGrantedByTheBudgetController: with a
// controller, the agent asks it before each job's EC2 calls and before
// start-up's read, and the ENI its waiting pods need is asked for as
// urgent. The test is the owner, on a clock it shares with the local
// cloud: nothing runs until it runs it, so all the Adds wait before any
// job asks. With the Adds on goroutines of their own, the warm pool's
// ENI (WARM_IP_TARGET=1) was at times asked, and granted as warm-pool
// work, before the tenth Add came to wait for it.
func TestEveryEC2ChangeOfTheAgentIsGrantedByTheBudgetController(t *testing.T) {
	clk := clock.NewManual(time.Now())
	w := newWorldOn(t, clk)
	ctl := newController(t)
	n := w.node("i-node1", map[string]string{"WARM_ENI_TARGET": "0", "WARM_IP_TARGET": "1", "VPCNET_ADD_WAIT": "20s"})
	n.budget = budgetapi.NewClient(budgetapi.ClientOptions{Node: "i-node1",
		Endpoint: func(context.Context) (string, error) { return ctl.url, nil }})
	a, fx, _ := startHeldAs(t, n, func(o *Options) { o.Clock = clk })
	ctx := context.Background()
	// An m5.large holds 9 pods on its primary ENI: the tenth and later
	// need a second ENI while they wait.
	var replies []<-chan nodestate.Reply
	for i := range 14 {
		_, ch := a.Submit(ctx, func(id uint64) nodestate.Event {
			return nodestate.AddRequest{ID: id, Key: key(i), Pod: pod(i)}
		})
		replies = append(replies, ch)
	}
	// The work runs in the order it was handed out; with none left the
	// clock moves to the owner's next Tick (an attach confirmed).
	tell := func(ev nodestate.Event) bool { a.Step(ctx, ev); return true }
	for step := 0; ; step++ {
		replies = slices.DeleteFunc(replies, func(ch <-chan nodestate.Reply) bool {
			select {
			case r := <-ch:
				if r.Err != nil {
					t.Errorf("add: %v", r.Err)
				}
				return true
			default:
				return false
			}
		})
		if len(replies) == 0 {
			break
		}
		if step == 1000 {
			t.Fatalf("%d Adds still unanswered after %d steps", len(replies), step)
		}
		if len(fx.work) > 0 {
			wk := fx.work[0]
			fx.work = fx.work[1:]
			wk.Run(ctx, tell)
			continue
		}
		wake := a.Wake()
		if wake.IsZero() {
			t.Fatalf("%d Adds unanswered, with no work out and no Tick wanted", len(replies))
		}
		clk.Advance(max(wake.Sub(clk.Now()), 0))
		a.Step(ctx, nodestate.Tick{})
	}
	for _, action := range []string{"CreateNetworkInterface", "AttachNetworkInterface", "ModifyNetworkInterfaceAttribute", "AssignPrivateIpAddresses", "DescribeNetworkInterfaces"} {
		calls, granted := w.callCount(action), ctl.count(ctl.granted, action)
		if action != "DescribeNetworkInterfaces" && calls == 0 {
			t.Errorf("no %s call; the test meant to make the pool grow", action)
		}
		if calls > granted {
			t.Errorf("%s: %d calls made, %d granted by the controller", action, calls, granted)
		}
	}
	if ctl.count(ctl.urgent, "CreateNetworkInterface") == 0 {
		t.Errorf("the ENI waiting pods needed was not asked for as urgent")
	}
	// No owner goroutine answers the status's query (ctx ended): it
	// reads the summary the owner published last.
	done, cancel := context.WithCancel(ctx)
	cancel()
	st := a.statusView(done).(statusView)
	if b := st.Budget; b == nil || b.Granted == 0 || b.Alone != 0 || b.AloneUntil != nil {
		t.Errorf("/v1/status budget %+v; want grants and no job gone alone", b)
	}
}

// TestWithoutAControllerTheAgentServesOnItsOwn: a controller that is not
// there (not installed, no leader) must not stop a node from growing.
func TestWithoutAControllerTheAgentServesOnItsOwn(t *testing.T) {
	w := newWorld(t)
	n := w.node("i-node1", map[string]string{"WARM_ENI_TARGET": "0", "WARM_IP_TARGET": "1"})
	var mu sync.Mutex
	outcomes := map[string]int{}
	n.budget = budgetapi.NewClient(budgetapi.ClientOptions{Node: "i-node1",
		Endpoint: func(context.Context) (string, error) {
			return "", errors.New(`lease kube-system/vpcnet-budget not found`)
		},
		Observe: func(o string, _ time.Duration) { mu.Lock(); outcomes[o]++; mu.Unlock() },
	})
	a := n.start(t)
	a.waitReady(t)
	for i := range 12 {
		if _, err := a.Add(context.Background(), key(i), pod(i)); err != nil {
			t.Fatalf("add %d without a controller: %v", i, err)
		}
	}
	a.settle(t, func(st ipam.Stats) bool { return st.Assigned == 12 })
	mu.Lock()
	defer mu.Unlock()
	if outcomes[budgetapi.Alone] == 0 || outcomes[budgetapi.Granted] != 0 {
		t.Errorf("outcomes %v; want every ask to go alone", outcomes)
	}
	// The operator sees why in /v1/status.
	st := a.statusView(context.Background()).(statusView)
	if b := st.Budget; b == nil || b.AloneUntil == nil || !strings.Contains(b.AloneBecause, "vpcnet-budget not found") {
		t.Errorf("/v1/status budget %+v; want the agent going alone because the Lease is not found", b)
	}
}

// Found by the simulation's I11: start-up read an instance type missing
// from the table (DescribeInstanceTypes), and start-up, resyncs and
// attaches described subnets, with no grant, while a controller
// answered. Every EC2 call is granted first.
func TestStartUpAndAttachesAskTheBudgetForTheirReadsToo(t *testing.T) {
	w := newWorld(t)
	ctl := newController(t)
	n := w.node("i-x9", map[string]string{"WARM_ENI_TARGET": "0", "WARM_IP_TARGET": "1", "VPCNET_ADD_WAIT": "20s"})
	n.budget = budgetapi.NewClient(budgetapi.ClientOptions{Node: "i-x9",
		Endpoint: func(context.Context) (string, error) { return ctl.url, nil }})
	a := n.start(t)
	a.waitReady(t)
	// An x9.sim holds 3 pods on its primary ENI: the fourth needs a
	// second ENI, in a subnet the attach describes.
	for i := range 4 {
		if _, err := a.Add(context.Background(), key(i), pod(i)); err != nil {
			t.Fatalf("add %d: %v", i, err)
		}
	}
	for _, action := range []string{"DescribeInstanceTypes", "DescribeSubnets", "CreateNetworkInterface"} {
		calls, granted := w.callCount(action), ctl.count(ctl.granted, action)
		if calls == 0 {
			t.Errorf("no %s call; the test meant to make one", action)
		}
		if calls > granted {
			t.Errorf("%s: %d calls made, %d granted by the controller", action, calls, granted)
		}
	}
}

// needBudget grants every job at once and records what each action was
// wanted for when its job asked.
type needBudget struct {
	mu    sync.Mutex
	needs map[string][]budgetapi.Need
}

func (b *needBudget) Acquire(_ context.Context, actions []string, need func() budgetapi.Need) error {
	nd := need()
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, a := range actions {
		b.needs[a] = append(b.needs[a], nd)
	}
	return nil
}

func (b *needBudget) Pressure(context.Context, []string, []string) []string { return nil }
func (b *needBudget) Status() budgetapi.ClientStatus                        { return budgetapi.ClientStatus{} }
func (b *needBudget) HoldChanges() <-chan struct{}                          { return nil }

// A job pods wait for tells the budget since when the longest-waiting of
// them has waited: a controller that takes over books the requests held
// through its takeover by it, so the ENI asked after a held assign keeps
// its pods' place (budget.Term.Gather). Without it a thousand-node
// failover left pods waiting up to 25.7 s, past the takeover and an
// attach (BENCHMARKS.md, a controller failover). The test is the owner:
// nothing runs until it runs it, so the Add waits for the pool's first
// fill when the fill's job asks.
func TestAJobPodsWaitForTellsTheBudgetSinceWhenTheyWait(t *testing.T) {
	n := newWorld(t).node("i-node1", map[string]string{"WARM_IP_TARGET": "2"})
	b := &needBudget{needs: map[string][]budgetapi.Need{}}
	a, fx, _ := startHeldAs(t, n, func(o *Options) { o.Budget = b })
	ctx := context.Background()
	before := time.Now()
	a.Submit(ctx, func(id uint64) nodestate.Event {
		return nodestate.AddRequest{ID: id, Key: key(1), Pod: pod(1)}
	})
	after := time.Now()
	ran := false
	for wk, ok := fx.next(false); ok; wk, ok = fx.next(false) {
		if wk.Job != nil && wk.Job.Kind == nodestate.JobAction && wk.Job.Action.Kind == ipam.AssignBlocks {
			wk.Run(ctx, func(nodestate.Event) bool { return true })
			ran = true
			break
		}
	}
	if !ran {
		t.Fatal("no assign job was handed out; the test meant the pool's first fill to be one")
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	needs := b.needs["AssignPrivateIpAddresses"]
	if len(needs) != 1 || !needs[0].Urgent {
		t.Fatalf("the assign asked with needs %+v; want one ask, urgent", needs)
	}
	if since := needs[0].Since; since.Before(before) || since.After(after) {
		t.Errorf("the assign the Add waits for said pods wait since %v; want the Add's arrival (between %v and %v)",
			since.Format(time.StampMicro), before.Format(time.StampMicro), after.Format(time.StampMicro))
	}
}
