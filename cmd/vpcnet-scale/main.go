// Command vpcnet-scale runs one of package scale's scenarios: many real
// node agents against one EC2 emulator with the account's request
// buckets, in simulated time, and prints the figures as Markdown.
//
//	vpcnet-scale --scenario join --nodes 1000
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"strings"
	"time"

	"github.com/vpcnet/vpcnet/scale"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "vpcnet-scale:", err)
		os.Exit(1)
	}
}

func run() error {
	var names []string
	for _, s := range scale.Scenarios {
		names = append(names, s.Name)
	}
	var o scale.Options
	var settings string
	flag.StringVar(&o.Scenario, "scenario", "join", "scenario: "+strings.Join(names, ", "))
	flag.IntVar(&o.Nodes, "nodes", 0, "nodes (0: the scenario's default)")
	flag.IntVar(&o.PodsPerNode, "pods", 0, "pods per node (0: the scenario's default)")
	flag.IntVar(&o.TotalPods, "total-pods", 0, "scale-up: pods over all nodes (0: 23000)")
	flag.Uint64Var(&o.Seed, "seed", 1, "seed of the run's random choices")
	flag.DurationVar(&o.Steady, "steady", 0, "steady: how long the idle cluster is watched (0: 1h)")
	flag.DurationVar(&o.Churn, "churn", 0, "churn: how long pods are replaced (0: 10m)")
	flag.BoolVar(&o.Budget, "budget", true, "run the budget controller, as the chart installs it: every node asks it before calling EC2; --budget=false: each node spends on its own")
	flag.Float64Var(&o.OtherShare, "other-share", 0, "the share (0 to 1) of every mutating bucket's refill another client of the account spends, unknown to the budget controller (0: none; the shared scenario's default 0.3)")
	flag.Float64Var(&o.Margin, "margin", 0, "the share (above 0, at most 1) of every bucket the budget controller grants, as its VPCNET_BUDGET_MARGIN sets it (0: its default, 0.9)")
	flag.StringVar(&settings, "set", "", "agent settings as NAME=VALUE,... (e.g. WARM_IP_TARGET=5, ENABLE_SUBNET_DISCOVERY=false); the rest are production's defaults")
	preflight := flag.Bool("preflight", true, "run the agents' IAM preflight, as vpcnetd does at every start (DryRun probes, or the record of a passed one); --preflight=false leaves it out")
	flag.DurationVar(&o.FailoverAt, "failover-at", 0, "failover: when the budget controller's leader dies, from the start (0: half the join's lower bound)")
	baseline := flag.Bool("baseline", true, "failover: run the same join without a failover first (same seed), to measure each pod's extra wait")
	hold := flag.Bool("hold", true, "failover: the agents' budget client holds jobs while the controller fails over (DefaultFailoverHold); --hold=false: it goes alone at the first failure, as it did before")
	horizon := flag.Bool("horizon", true, "the budget controller grants no further ahead than its Lease timings allow; --horizon=false: any distance ahead, as it did before")
	gather := flag.Bool("gather", true, "failover: a new leader gathers the requests held through its takeover and books them in the order they were first asked; --gather=false: as they come back, as it did before")
	cpuprofile := flag.String("cpuprofile", "", "write a CPU profile here")
	flag.Parse()
	o.NoPreflight = !*preflight
	o.NoBaseline = !*baseline
	o.NoHold = !*hold
	o.NoHorizon = !*horizon
	o.NoGather = !*gather
	if *cpuprofile != "" {
		f, err := os.Create(*cpuprofile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	if settings != "" {
		o.Settings = map[string]string{}
		for _, kv := range strings.Split(settings, ",") {
			k, v, ok := strings.Cut(kv, "=")
			if !ok {
				return fmt.Errorf("--set %q: want NAME=VALUE", kv)
			}
			o.Settings[k] = v
		}
	}
	// The SDK must not pick up this machine's AWS configuration: every
	// client talks to the emulator in process.
	dir, err := os.MkdirTemp("", "vpcnet-scale")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	for k, v := range map[string]string{"AWS_CONFIG_FILE": filepath.Join(dir, "config"), "AWS_SHARED_CREDENTIALS_FILE": filepath.Join(dir, "credentials"),
		"AWS_CA_BUNDLE": "", "AWS_REGION": "", "AWS_PROFILE": "", "AWS_ENDPOINT_URL": "", "AWS_ENDPOINT_URL_EC2": "", "AWS_MAX_ATTEMPTS": "", "AWS_RETRY_MODE": ""} {
		os.Setenv(k, v)
	}
	// A thousand agents allocate briskly; the box has memory to spare,
	// so the collector runs less often.
	debug.SetGCPercent(400)
	start := time.Now()
	rep, err := scale.Run(context.Background(), o)
	if err != nil {
		return err
	}
	rep.Wall = time.Since(start)
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	rep.Write(os.Stdout)
	fmt.Printf("Command: `vpcnet-scale %s` (wall %s, heap peak %.0f MiB).\n\n", strings.Join(os.Args[1:], " "), time.Since(start).Round(time.Second), float64(m.Sys)/(1<<20))
	return nil
}
