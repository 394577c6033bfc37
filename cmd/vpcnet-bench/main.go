// Command vpcnet-bench runs vpcnet's benchmark scenarios on the local
// cloud (the EC2 emulator, its network fabric and the real vpcnetd and
// vpcnet binaries), prints a table per scenario and a JSON record, and can
// rewrite the generated sections of BENCHMARKS.md from the record.
//
//	vpcnet-bench --bin ./bin [--markdown BENCHMARKS.md] [scenario...]
//
// Scenarios: warm, warm6, burst, churn, idle, footprint, micro, concurrent,
// policy; all by default. policy needs --kube-apiserver. awsnode runs only
// when named (make bench-awsnode): a cluster of real kubelets with the
// Amazon VPC CNI and vpcnet side by side, needing --kube-bin and
// --aws-node.
// It needs root (it makes network namespaces) and removes every namespace
// and process it made when it ends, also on Ctrl-C.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/vpcnet/vpcnet/fabric"
)

type options struct {
	bin       string // vpcnetd, vpcnet, portmap
	refBin    string // the reference plugins
	n         int    // warm cycles per arm
	burst     int    // pods in the cold burst
	burstRuns int
	churn     int // churn cycles
	churnRate float64
	module    string // module root, for the Go benchmarks
	jsonOut   string
	markdown  string
	command   string // how BENCHMARKS.md says the run was made
	verbose   bool
	keep      bool   // keep the scratch directory: agent and plugin logs
	profile   string // write CPU profiles (perf, as pprof) here
	// baseline holds vpcnetd and vpcnet of an older build that the
	// concurrent scenario runs side by side with this tree's.
	baseline      string
	baselineLabel string
	// apiserver is kube-apiserver: the cold burst then runs with an API
	// server the agent watches (kube.go).
	apiserver string
	// kubeBin holds the Kubernetes and containerd programs and awsNode
	// the Amazon VPC CNI's (make kube-bins, make aws-node-bins): the
	// awsnode scenario's cluster.
	kubeBin, awsNode string
}

// scenario is one benchmark; run fills res and returns what stopped it.
type scenario struct {
	name string
	run  func(*bench, context.Context, *Result) error
	// optIn scenarios run only when named: they need what a plain
	// `make bench` does not build.
	optIn bool
}

var scenarios = []scenario{
	{"warm", (*bench).warm, false},
	{"warm6", (*bench).warm6, false},
	{"burst", (*bench).burst, false},
	{"churn", (*bench).churn, false},
	{"idle", (*bench).idle, false},
	{"footprint", (*bench).footprint, false},
	{"micro", (*bench).micro, false},
	{"concurrent", (*bench).concurrent, false},
	{"policy", (*bench).policy, false},
	{"awsnode", (*bench).awsnode, true},
}

func main() {
	var o options
	flag.StringVar(&o.bin, "bin", "", "directory holding vpcnetd, vpcnet and portmap built from this tree (required)")
	flag.StringVar(&o.refBin, "ref-bin", "/usr/lib/cni", "directory of the reference ptp and host-local plugins")
	flag.IntVar(&o.n, "n", 200, "warm ADD+DEL cycles per plugin")
	flag.IntVar(&o.burst, "burst", 100, "pods in the cold burst")
	flag.IntVar(&o.burstRuns, "burst-runs", 3, "times the cold burst is repeated, each on a fresh node")
	flag.IntVar(&o.churn, "churn", 1000, "pod create/delete cycles in steady churn")
	flag.Float64Var(&o.churnRate, "churn-rate", 5, "pods created per second in steady churn")
	flag.StringVar(&o.module, "module", ".", "root of the vpcnet module, where the Go benchmarks run")
	flag.StringVar(&o.jsonOut, "json", "", "write the JSON record to this file instead of standard output")
	flag.StringVar(&o.markdown, "markdown", "", "rewrite the generated sections of this Markdown file (BENCHMARKS.md)")
	flag.StringVar(&o.command, "command", "", "the command to show in the Markdown as having produced it (default: this command line)")
	flag.StringVar(&o.profile, "profile", "", "write CPU profiles of every process, taken with Linux perf during the measured part of warm, burst, footprint and policy (its ADDs and its policy changes), as pprof files in this directory")
	flag.StringVar(&o.baseline, "baseline-bin", "", "directory holding vpcnetd and vpcnet of an older build, compared side by side in the concurrent scenario")
	flag.StringVar(&o.baselineLabel, "baseline-label", "baseline", "what the concurrent scenario's table calls the --baseline-bin build (e.g. its commit)")
	flag.StringVar(&o.apiserver, "kube-apiserver", os.Getenv("VPCNET_KUBE_APISERVER"), "kube-apiserver binary (hack/kube-apiserver.sh builds it): the cold burst's pods are then bound to the node in an API server the agent watches, as in a cluster; without it the agent has no API server, and the policy scenario cannot run (default $VPCNET_KUBE_APISERVER)")
	flag.StringVar(&o.kubeBin, "kube-bin", "", "directory of the Kubernetes and containerd programs (make kube-bins): the awsnode scenario's cluster")
	flag.StringVar(&o.awsNode, "aws-node", "", "directory of the Amazon VPC CNI's programs and manifest (make aws-node-bins): the awsnode scenario")
	flag.BoolVar(&o.keep, "keep", false, "keep the scratch directory with the agents' and plugin's logs, and print where it is")
	flag.BoolVar(&o.verbose, "v", false, "log progress of the local cloud to standard error")
	flag.Usage = func() {
		fmt.Fprintf(flag.CommandLine.Output(), "usage: vpcnet-bench --bin DIR [flags] [%s]\n", strings.Join(names(), " | "))
		flag.PrintDefaults()
	}
	flag.Parse()
	if o.command == "" {
		o.command = strings.Join(append([]string{filepath.Base(os.Args[0])}, os.Args[1:]...), " ")
	}
	todo, err := pick(flag.Args())
	if err == nil {
		err = o.check(todo)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "vpcnet-bench:", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, o, todo); err != nil {
		fmt.Fprintln(os.Stderr, "vpcnet-bench:", err)
		stop()
		os.Exit(1)
	}
}

func names() []string {
	var out []string
	for _, s := range scenarios {
		out = append(out, s.name)
	}
	return out
}

// defaultScenarios are those a run naming none plays.
func defaultScenarios() []scenario {
	var out []scenario
	for _, s := range scenarios {
		if !s.optIn {
			out = append(out, s)
		}
	}
	return out
}

// pick returns the scenarios named in args, in the canonical order; all
// when args is empty.
func pick(args []string) ([]scenario, error) {
	if len(args) == 0 {
		return defaultScenarios(), nil
	}
	want := map[string]bool{}
	for _, a := range args {
		want[a] = true
	}
	var out []scenario
	for _, s := range scenarios {
		if want[s.name] {
			out = append(out, s)
			delete(want, s.name)
		}
	}
	if len(want) > 0 {
		return nil, fmt.Errorf("unknown scenario %v; scenarios are %s", sortedKeys(want), strings.Join(names(), ", "))
	}
	return out, nil
}

func (o options) check(todo []scenario) error {
	if o.bin == "" {
		return errors.New("--bin is required: a directory with vpcnetd, vpcnet and portmap (make bench builds them)")
	}
	for _, b := range []string{"vpcnetd", "vpcnet", "portmap"} {
		if _, err := os.Stat(filepath.Join(o.bin, b)); err != nil {
			return fmt.Errorf("--bin %s: %w", o.bin, err)
		}
	}
	if o.baseline != "" {
		for _, b := range []string{"vpcnetd", "vpcnet"} {
			if _, err := os.Stat(filepath.Join(o.baseline, b)); err != nil {
				return fmt.Errorf("--baseline-bin %s: %w", o.baseline, err)
			}
		}
	}
	if o.n < 1 || o.burst < 1 || o.burstRuns < 1 || o.churn < 1 || o.churnRate <= 0 {
		return errors.New("--n, --burst, --churn and --churn-rate must be positive")
	}
	if os.Geteuid() != 0 {
		return errors.New("needs root: the local cloud is made of network namespaces")
	}
	for _, s := range todo {
		if s.name == "policy" && o.apiserver == "" {
			return errors.New("the policy scenario needs an API server: pass --kube-apiserver PATH (hack/kube-apiserver.sh builds it), or name the other scenarios")
		}
		if s.name == "awsnode" {
			if err := o.checkAWSNode(); err != nil {
				return err
			}
		}
		if s.name != "warm" && s.name != "warm6" {
			continue
		}
		if s.name == "warm6" {
			for _, b := range []string{"vpcnet-egress-v4", "host-local"} {
				if _, err := os.Stat(filepath.Join(o.bin, b)); err != nil {
					return fmt.Errorf("the warm6 scenario's IPv6 node chains vpcnet-egress-v4, which runs host-local: %s not found in --bin %s (make bench puts both there)", b, o.bin)
				}
			}
		}
		for _, b := range []string{"ptp", "host-local"} {
			if _, err := os.Stat(filepath.Join(o.refBin, b)); err != nil {
				return fmt.Errorf("the %s scenario compares with the reference %s plugin, not found in %s: install Debian's containernetworking-plugins (apt-get install containernetworking-plugins) or pass --ref-bin DIR", s.name, b, o.refBin)
			}
		}
	}
	return nil
}

func run(ctx context.Context, o options, todo []scenario) (err error) {
	logOut := io.Discard
	if o.verbose {
		logOut = os.Stderr
	}
	b := &bench{opts: o, prefix: fmt.Sprintf("vpcbench-%04x-", rand.IntN(1<<16)), log: slog.New(slog.NewTextHandler(logOut, nil))}
	if b.scratch, err = os.MkdirTemp("", scratchPattern); err != nil {
		return err
	}
	unrecord, err := recordRun(runsDir, b.prefix, b.scratch)
	if err != nil {
		os.RemoveAll(b.scratch)
		return err
	}
	defer unrecord()
	defer func() {
		// Every scenario closes its own cluster; this catches what an
		// interrupted one could not.
		if left, serr := fabric.Sweep(b.prefix); serr != nil || len(left) > 0 {
			fmt.Fprintf(os.Stderr, "vpcnet-bench: removed %d leftover namespaces (%v)\n", len(left), serr)
		}
		if o.keep {
			fmt.Fprintln(os.Stderr, "vpcnet-bench: logs kept in", b.scratch)
		} else {
			os.RemoveAll(b.scratch)
		}
	}()
	rec := &Record{Command: o.command, Machine: readMachine(), Started: time.Now().UTC()}
	var failed []string
	for _, s := range todo {
		if ctx.Err() != nil {
			break
		}
		fmt.Fprintf(os.Stderr, "vpcnet-bench: %s...\n", s.name)
		res := &Result{Scenario: s.name}
		start := time.Now()
		if err := s.run(b, ctx, res); err != nil {
			res.Err = err.Error()
			failed = append(failed, s.name)
			fmt.Fprintf(os.Stderr, "vpcnet-bench: %s failed: %v\n", s.name, err)
		}
		res.Seconds = time.Since(start).Seconds()
		rec.Results = append(rec.Results, res)
		rec.Goals = append(rec.Goals, res.Goals...)
		for i := range res.Tables {
			res.Tables[i].Text(os.Stdout)
		}
	}
	rec.Seconds = time.Since(rec.Started).Seconds()
	if err := writeJSON(o.jsonOut, rec); err != nil {
		return err
	}
	if ctx.Err() != nil {
		return fmt.Errorf("interrupted: %w", ctx.Err())
	}
	if o.markdown != "" {
		if err := rewriteMarkdown(o.markdown, rec); err != nil {
			return err
		}
	}
	if len(failed) > 0 {
		return fmt.Errorf("scenarios failed: %s", strings.Join(failed, ", "))
	}
	return nil
}

func writeJSON(path string, rec *Record) error {
	data, err := json.MarshalIndent(rec, "", "  ")
	if err != nil {
		return err
	}
	data = append(data, '\n')
	if path == "" {
		_, err = os.Stdout.Write(data)
		return err
	}
	return os.WriteFile(path, data, 0o644)
}
