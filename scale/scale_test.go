package scale

import (
	"context"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/tools/leaderelection"

	budgetctl "github.com/vpcnet/vpcnet/budget/controller"
	"github.com/vpcnet/vpcnet/sim/simtest"
)

// TestScenariosSmall plays every scenario with 20 nodes: each must finish
// with every pod addressed and spend only the EC2 calls the scenario
// calls for.
func TestScenariosSmall(t *testing.T) {
	simtest.IsolateAWSEnv(t)
	t.Setenv("AWS_CA_BUNDLE", "") // the in-process client has no TLS
	const nodes = 20
	tests := []struct {
		scenario string
		nodes    int
		pods     int // measured pods that must get an address; -1: any
		check    func(t *testing.T, rep *Report)
	}{
		{"join", nodes, nodes * 30, func(t *testing.T, rep *Report) {
			// Every ENI created is used: none fails to attach and is
			// deleted again (creates at the same instant once shared a
			// ClientToken).
			if d := rep.Calls["DeleteNetworkInterface"]; d != 0 {
				t.Errorf("%d ENIs deleted during a join; want none", d)
			}
			if c, a := rep.Calls["CreateNetworkInterface"], rep.Calls["AttachNetworkInterface"]; c != a {
				t.Errorf("%d creates but %d attaches; every created ENI should attach once", c, a)
			}
			if rep.LowerBound <= 0 {
				t.Errorf("no lower bound for a join that needs ENIs")
			}
			// New nodes probe their permissions once each.
			if d := rep.DryRuns["AttachNetworkInterface"+dryRun]; d != nodes {
				t.Errorf("%d Attach DryRuns for %d new nodes; want one each", d, nodes)
			}
		}},
		{"scale-up", nodes, nodes * 46, nil},
		{"shared", nodes, nodes * 30, func(t *testing.T, rep *Report) {
			// The other client spent 30% of every mutating refill for
			// the whole join, and the bound gives this cluster the rest.
			if rep.OtherShare != 0.3 || rep.OtherCalls < int(rep.Window.Seconds()*4*5*0.3)-4 {
				t.Errorf("the other client made %d calls at share %v in %s; want 30%% of 4 actions' refill of 5/s", rep.OtherCalls, rep.OtherShare, rep.Window)
			}
			joinBound := time.Duration(float64(rep.Needed["CreateNetworkInterface"]-100) / 5 * float64(time.Second))
			if rep.Needed["CreateNetworkInterface"] > 100 && rep.LowerBound <= joinBound {
				t.Errorf("lower bound %s; want more than the whole refill's %s", rep.LowerBound, joinBound)
			}
		}},
		{"restart", nodes, nodes, func(t *testing.T, rep *Report) {
			// A restart with the pods in place and room for one more
			// each changes nothing in EC2.
			for a, k := range rep.Calls {
				if mutating[a] && k > 0 {
					t.Errorf("restart made %d %s calls; want no EC2 change", k, a)
				}
			}
			// Issue 26: with production's IAM preflight, every agent
			// restarting at once spends at most one token on probes
			// (the record of the first start's pass vouches).
			if !rep.Preflight || !rep.SubnetDiscovery {
				t.Errorf("preflight %v, subnet discovery %v: the scenario must run production's settings", rep.Preflight, rep.SubnetDiscovery)
			}
			if rep.ProbeCallsMax > 1 {
				t.Errorf("a node's preflight made %d EC2 calls during the restart (%d DryRuns: %v); want at most one token per node", rep.ProbeCallsMax, total(rep.DryRuns), rep.DryRuns)
			}
		}},
		// 25 nodes on a /22: about 41 addresses each, fewer than two
		// pods' ENIs and a warm one (45).
		{"churn", 25, -1, nil},
		{"bursts", nodes, -1, func(t *testing.T, rep *Report) {
			// The pool keeps its ENIs between bursts: the only ENIs
			// created are those the first burst needed.
			if d := rep.Calls["DeleteNetworkInterface"]; d != 0 {
				t.Errorf("%d ENIs deleted between bursts a minute and a half apart", d)
			}
			if c := rep.Calls["CreateNetworkInterface"]; c > 2*nodes {
				t.Errorf("%d ENIs created for %d nodes; the first burst needs 2 each and later ones none", c, nodes)
			}
		}},
		{"steady", nodes, 0, func(t *testing.T, rep *Report) {
			// Ten idle minutes: IMDS shows no change, so EC2 is read
			// at most once per node (every ten reconcile intervals).
			if d := rep.Calls["DescribeNetworkInterfaces"]; d > nodes {
				t.Errorf("%d DescribeNetworkInterfaces calls from %d idle nodes in 10 minutes; want at most one each", d, nodes)
			}
			for a, k := range rep.Calls {
				if mutating[a] && k > 0 {
					t.Errorf("an idle cluster made %d %s calls", k, a)
				}
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.scenario, func(t *testing.T) {
			o := Options{Scenario: tt.scenario, Nodes: tt.nodes, Seed: 1, Steady: 10 * time.Minute, Churn: time.Minute}
			if tt.scenario == "bursts" {
				o.Churn = 6 * time.Minute
			}
			if tt.scenario == "scale-up" {
				o.TotalPods = nodes * 46
			}
			rep, err := Run(context.Background(), o)
			if err != nil {
				t.Fatal(err)
			}
			var b strings.Builder
			rep.Write(&b)
			t.Log("\n" + b.String())
			if tt.pods >= 0 && rep.Unaddressed != 0 {
				t.Errorf("%d pods without an address at the end", rep.Unaddressed)
			}
			if tt.pods >= 0 && rep.Pods != tt.pods {
				t.Errorf("%d pods got an address; want %d", rep.Pods, tt.pods)
			}
			if tt.check != nil {
				tt.check(t, rep)
			}
		})
	}
}

// TestTheBudgetControllerKeepsAJoinInsideTheAccountsLimits: 60 nodes
// join at once, more than the account's burst of creates. On their own
// the agents are refused and their pods wait while they are; with the
// budget controller no call is refused, no pod waits on a refusal, and
// the last pod has its address sooner.
func TestTheBudgetControllerKeepsAJoinInsideTheAccountsLimits(t *testing.T) {
	simtest.IsolateAWSEnv(t)
	t.Setenv("AWS_CA_BUNDLE", "")
	run := func(withBudget bool) *Report {
		rep, err := Run(context.Background(), Options{Scenario: "join", Nodes: 60, Seed: 1, Budget: withBudget})
		if err != nil {
			t.Fatal(err)
		}
		if rep.Unaddressed != 0 {
			t.Fatalf("budget %v: %d pods without an address", withBudget, rep.Unaddressed)
		}
		return rep
	}
	alone, shared := run(false), run(true)
	if total(alone.Throttled) == 0 {
		t.Fatalf("without the controller no call was refused; the test needs a join that overruns the account")
	}
	if total(shared.Throttled) != 0 || shared.ThrottledPods != 0 {
		t.Errorf("with the controller: refusals %v, %d pods waited on one; want none", shared.Throttled, shared.ThrottledPods)
	}
	if shared.LastAddress >= alone.LastAddress {
		t.Errorf("last pod addressed after %v with the controller, %v without; want sooner", shared.LastAddress, alone.LastAddress)
	}
	if c := shared.Calls["CreateNetworkInterface"]; c > 3*60 {
		t.Errorf("%d creates for 60 nodes with the controller; each needs 2 for its pods and 1 warm", c)
	}
}

// TestSubnetPressureGivesAFullSubnetsAddressesToWaitingPods: 25 nodes
// on a subnet too small for every warm pool, with pod churn. On their
// own, nodes that cannot grow leave pods without an address while other
// nodes hold idle ones; with the controller's subnet-pressure mode every
// pod gets one.
func TestSubnetPressureGivesAFullSubnetsAddressesToWaitingPods(t *testing.T) {
	simtest.IsolateAWSEnv(t)
	t.Setenv("AWS_CA_BUNDLE", "")
	run := func(withBudget bool) *Report {
		rep, err := Run(context.Background(), Options{Scenario: "churn", Nodes: 25, Seed: 1, Churn: time.Minute, Budget: withBudget})
		if err != nil {
			t.Fatal(err)
		}
		return rep
	}
	alone, shared := run(false), run(true)
	if alone.Unaddressed == 0 {
		t.Fatalf("without the controller every pod got an address; the test needs a subnet the warm pools overrun")
	}
	if shared.Unaddressed != 0 {
		t.Errorf("with the controller %d pods have no address at the end; want none", shared.Unaddressed)
	}
	if shared.IdleAddresses >= alone.IdleAddresses {
		t.Errorf("idle addresses at the end: %d with the controller, %d without; want fewer", shared.IdleAddresses, alone.IdleAddresses)
	}
}

func total(m map[string]int) int {
	k := 0
	for _, v := range m {
		k += v
	}
	return k
}

func TestUnknownScenario(t *testing.T) {
	_, err := Run(context.Background(), Options{Scenario: "nope"})
	if err == nil || !strings.Contains(err.Error(), "join") {
		t.Fatalf("err = %v; want one naming the scenarios", err)
	}
}

// kubelet syncs a pod whose sandbox failed again after 10 to 15 s
// (wait.Jitter(10s, 0.5)), not sooner: the driver's retries must cost a
// failed ADD what a cluster pays for it.
func TestAFailedADDIsRetriedAfterKubeletsPodWorkerBackoff(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	lo, hi := time.Hour, time.Duration(0)
	for range 1000 {
		d := kubeletBackoff(rng)
		lo, hi = min(lo, d), max(hi, d)
	}
	if lo < 10*time.Second || hi >= 15*time.Second || lo > 10500*time.Millisecond || hi < 14500*time.Millisecond {
		t.Errorf("retries came after %s to %s; want spread over 10 s to 15 s", lo, hi)
	}
}

// The failover scenario's election runs on the controller's default
// timings.
func TestTheElectionModelHasTheControllersTimings(t *testing.T) {
	s, err := budgetctl.Load([]string{"POD_NAME=p", "POD_NAMESPACE=kube-system", "POD_IP=10.0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	if s.LeaseDuration != leaseDuration || s.RenewDeadline != renewDeadline || s.RetryPeriod != retryPeriod {
		t.Errorf("controller's Lease %v, renew deadline %v, retry %v; the model's %v, %v, %v", s.LeaseDuration, s.RenewDeadline, s.RetryPeriod, leaseDuration, renewDeadline, retryPeriod)
	}
	if h, _, c := s.Horizon(); h != grantHorizon || h != DefaultAccount().budgetConfig().Horizon || c != termCredit {
		t.Errorf("controller's horizon %v, credit %v; the model's %v, %v", h, c, grantHorizon, termCredit)
	}
	if leaderelection.JitterFactor != retryJitter {
		t.Errorf("client-go's jitter %v; the model's %v", leaderelection.JitterFactor, retryJitter)
	}
}

// The budget controller's leader dies mid-join: the agents hold their
// jobs for the standby instead of going alone, which EC2 would refuse
// (360 refusals at 100 nodes before: --hold=false), the standby's term
// grants none of the last term's tokens again, and the join ends no
// later than the takeover time plus one attach after the same join
// without a failover, give or take kubelet's retry of a failed ADD.
func TestAFailoverMidJoinHoldsJobsForTheNextLeader(t *testing.T) {
	simtest.IsolateAWSEnv(t)
	t.Setenv("AWS_CA_BUNDLE", "")
	rep, err := Run(context.Background(), Options{Scenario: "failover", Nodes: 100, Seed: 1, Budget: true})
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	rep.Write(&b)
	t.Log("\n" + b.String())
	f := rep.Failover
	if rep.Unaddressed != 0 || rep.Pods != 100*30 {
		t.Errorf("%d pods addressed, %d not; want all 3000", rep.Pods, rep.Unaddressed)
	}
	if n := total(rep.Throttled); n != 0 {
		t.Errorf("%d RequestLimitExceeded (%v); want none", n, rep.Throttled)
	}
	if f.AloneJobs != 0 || f.Held == 0 {
		t.Errorf("%d jobs alone, %d asks held; want every job held for the next leader", f.AloneJobs, f.Held)
	}
	// client-go's candidate looks every 2 to 4.4 s and needs one look
	// to see the last renewal.
	if max := leaseDuration + 2*time.Duration((1+retryJitter)*float64(retryPeriod)); f.Takeover < leaseDuration-retryPeriod || f.Takeover > max {
		t.Errorf("takeover %v; want the Lease's duration, within %v", f.Takeover, max)
	}
	kubelet := 15 * time.Second
	if !f.Compared || rep.LastAddress > f.BaselineLast+f.Target+kubelet {
		t.Errorf("last pod at %v, %v without the failover; want at most the takeover plus one attach (%v) and kubelet's retry later", rep.LastAddress, f.BaselineLast, f.Target)
	}
}
