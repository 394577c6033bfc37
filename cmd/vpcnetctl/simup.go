package main

import (
	"context"
	_ "embed"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/vpcnet/vpcnet/sim"
	"github.com/vpcnet/vpcnet/simcluster"
	"github.com/vpcnet/vpcnet/simcluster/kubecluster"
)

//go:embed demo-topology.yaml
var demoTopology []byte

// demoTopologyIPv6 is the demo's VPC made dual-stack, for --family ipv6.
//
//go:embed demo-topology-ipv6.yaml
var demoTopologyIPv6 []byte

// clusterFlags are the flags that say which cluster to build.
type clusterFlags struct {
	topology, bin, state, prefix *string
	// agentEnv are settings for every agent (--agent-env NAME=VALUE).
	agentEnv *stringList
	// Kubernetes mode: a control plane and, on every node, containerd,
	// a kubelet and kube-proxy, with vpcnet installed as a DaemonSet.
	kubernetes    *bool
	kubeBin, repo *string
	// family is the Kubernetes cluster's IP family (--family).
	family *string
}

// addClusterFlags registers the flags of `sim up` and `sim run`.
func addClusterFlags(fs *flag.FlagSet) clusterFlags {
	f := addCloudFlags(fs, defaultStateDir, "`DIR` for the cluster's state; one cluster per directory")
	f.kubernetes = fs.Bool("kubernetes", false, "run a real Kubernetes cluster on the local cloud: control plane, containerd + kubelet + kube-proxy on every node, vpcnet installed from deploy/vpcnet.yaml (see README, make cluster-demo)")
	f.kubeBin = fs.String("kube-bin", "", "with --kubernetes: `DIR` of the Kubernetes and containerd programs (make kube-bins links them there); empty means kube/ under --bin")
	f.repo = fs.String("repo", ".", "with --kubernetes: this repository's checkout `DIR` (deploy/vpcnet.yaml, the test images' sources)")
	f.family = fs.String("family", "ipv4", "with --kubernetes: the cluster's IP `FAMILY`, ipv4 or ipv6 (single-stack IPv6 on a dual-stack VPC, vpcnet in IPv6 mode; without --topology the demo's VPC made dual-stack)")
	return f
}

// addCloudFlags registers the flags every command that builds a cluster
// takes; the Kubernetes ones stay unset (and unaccepted) unless
// addClusterFlags adds them.
func addCloudFlags(fs *flag.FlagSet, stateDefault, stateUsage string) clusterFlags {
	f := clusterFlags{
		topology:   fs.String("topology", "", "topology `FILE` (see sim/README.md); empty means the demo's two m5.large nodes"),
		bin:        fs.String("bin", "", "`DIR` holding vpcnetd, vpcnet and portmap; empty means this program's directory"),
		state:      fs.String("state", stateDefault, stateUsage),
		prefix:     fs.String("prefix", "", "start of the cluster's namespace names; empty means vpcsim- and a hash of the --state path, so clusters with different state directories never share names"),
		agentEnv:   new(stringList),
		kubernetes: new(bool), kubeBin: new(string), repo: new(string), family: new(string),
	}
	fs.Var(f.agentEnv, "agent-env", "a setting for every node's vpcnetd, `NAME=VALUE` as in docs/settings.md (repeatable); checked with the agent's own parser before anything starts")
	return f
}

// kubeOptions are the Kubernetes parts of the cluster, checked before
// `sim up` forks.
func (f clusterFlags) kubeOptions(opts simcluster.Options) (kubecluster.Options, error) {
	dir := *f.kubeBin
	if dir == "" {
		dir = filepath.Join(opts.BinDir, "kube")
	}
	dir, err := filepath.Abs(dir)
	if err != nil {
		return kubecluster.Options{}, err
	}
	bins, err := kubecluster.BinariesIn(dir)
	if err != nil {
		return kubecluster.Options{}, err
	}
	repo, err := filepath.Abs(*f.repo)
	if err != nil {
		return kubecluster.Options{}, err
	}
	if _, err := os.Stat(filepath.Join(repo, "deploy", "vpcnet.yaml")); err != nil {
		return kubecluster.Options{}, fmt.Errorf("--repo %s is not a vpcnet checkout (no deploy/vpcnet.yaml): %w", repo, err)
	}
	for _, b := range []string{"vpcnet-install", "vpcnet-budget", "vpcnetctl"} {
		if _, err := os.Stat(filepath.Join(opts.BinDir, b)); err != nil {
			return kubecluster.Options{}, fmt.Errorf("%s is not in %s, and the vpcnet image needs it (run `make build-image-bins`): %w", b, opts.BinDir, err)
		}
	}
	family := kubecluster.Family(*f.family)
	if family != kubecluster.IPv4 && family != kubecluster.IPv6 && family != "" {
		return kubecluster.Options{}, fmt.Errorf("%w: --family %q: want ipv4 or ipv6", errUsage, *f.family)
	}
	return kubecluster.Options{Sim: opts, Bins: bins, RepoRoot: repo, Family: family, Logger: opts.Logger}, nil
}

// options reads and checks everything the flags name: the topology (its
// errors say FILE:LINE), the binaries, the state directory and the
// prefix. `sim up` calls it before it forks, so a mistake shows on the
// terminal instead of in a background process's log.
func (f clusterFlags) options(log *slog.Logger) (simcluster.Options, error) {
	var topo *sim.Topology
	var err error
	demo := demoTopology
	if *f.kubernetes && kubecluster.Family(*f.family) == kubecluster.IPv6 {
		demo = demoTopologyIPv6
	}
	if *f.topology != "" {
		topo, err = sim.LoadTopology(*f.topology)
	} else if topo, err = sim.ParseTopology(demo); err != nil {
		err = fmt.Errorf("the built-in demo topology: %w", err)
	}
	if err != nil {
		return simcluster.Options{}, err
	}
	bin := *f.bin
	if bin == "" {
		exe, err := os.Executable()
		if err != nil {
			return simcluster.Options{}, fmt.Errorf("find this program's directory for --bin: %w", err)
		}
		bin = filepath.Dir(exe)
	}
	if bin, err = filepath.Abs(bin); err != nil {
		return simcluster.Options{}, fmt.Errorf("--bin %s: %w", bin, err)
	}
	for _, b := range []string{"vpcnetd", "vpcnet", "portmap"} {
		if _, err := os.Stat(filepath.Join(bin, b)); err != nil {
			return simcluster.Options{}, fmt.Errorf("%s is not in %s (run `make build-sim`, or point --bin at the directory holding it): %w", b, bin, err)
		}
	}
	state, err := absState(*f.state)
	if err != nil {
		return simcluster.Options{}, err
	}
	prefix := *f.prefix
	if prefix == "" {
		if prefix, err = simcluster.PrefixFor(state); err != nil {
			return simcluster.Options{}, err
		}
	}
	if err := simcluster.CheckPrefix(prefix); err != nil {
		return simcluster.Options{}, fmt.Errorf("%w: --prefix: %v", errUsage, err)
	}
	env := []string(*f.agentEnv)
	if err := simcluster.CheckAgentEnv(env); err != nil {
		return simcluster.Options{}, fmt.Errorf("%w: --agent-env: %v", errUsage, err)
	}
	return simcluster.Options{Topology: topo, BinDir: bin, StateDir: state, Prefix: prefix, AgentEnv: env, Logger: log}, nil
}

// shellSettingsIgnored says, one line each, which of the agent's settings
// this shell sets without --agent-env: the agents run with an environment
// of the local cloud's making, so `WARM_IP_TARGET=5 vpcnetctl sim up`
// would otherwise start them with the default and say nothing. It does
// not refuse: CLUSTER_NAME and the like are common in shells for other
// reasons.
func shellSettingsIgnored(w io.Writer, given []string, environ []string) {
	for _, name := range simcluster.AgentSettingNames() {
		v, set := lookupEnv(environ, name)
		if !set || slices.ContainsFunc(given, func(kv string) bool { return strings.HasPrefix(kv, name+"=") }) {
			continue
		}
		fmt.Fprintf(w, "note: %s=%s in this shell does not reach the local cloud's agents; give it to them with --agent-env %s\n",
			name, v, shellQuote(name+"="+v))
	}
}

func lookupEnv(environ []string, name string) (string, bool) {
	for _, kv := range environ {
		if k, v, _ := strings.Cut(kv, "="); k == name {
			return v, true
		}
	}
	return "", false
}

// runArgs are the flags `sim up` gives its background `sim run`: every
// path absolute and the prefix spelt out, so the two cannot disagree.
func (f clusterFlags) runArgs(opts simcluster.Options) []string {
	args := []string{"sim", "run", "--state", opts.StateDir, "--bin", opts.BinDir, "--prefix", opts.Prefix}
	if *f.topology != "" {
		abs, err := filepath.Abs(*f.topology)
		if err != nil {
			abs = *f.topology // options read it by this name a moment ago
		}
		args = append(args, "--topology", abs)
	}
	for _, kv := range *f.agentEnv {
		args = append(args, "--agent-env", kv)
	}
	if *f.kubernetes {
		args = append(args, "--kubernetes", "--repo", *f.repo, "--family", *f.family)
		if *f.kubeBin != "" {
			args = append(args, "--kube-bin", *f.kubeBin)
		}
	}
	return args
}

// simUp starts the cluster in a background process (`sim run`) and returns
// once every agent is ready.
func simUp(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := simFlags("up", "[--topology FILE] [--bin DIR] [--state DIR] [--prefix PREFIX] [--agent-env NAME=VALUE]... [--kubernetes [--kube-bin DIR] [--repo DIR] [--family ipv4|ipv6]]", stderr)
	cf := addClusterFlags(fs)
	pos, err := parseSimFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return fmt.Errorf("%w: unexpected %q (see `vpcnetctl sim up --help`)", errUsage, pos[0])
	}
	opts, err := cf.options(nil)
	if err != nil {
		return err
	}
	shellSettingsIgnored(stderr, opts.AgentEnv, os.Environ())
	if *cf.kubernetes {
		if _, err := cf.kubeOptions(opts); err != nil {
			return err
		}
		abs, err := filepath.Abs(*cf.repo)
		if err != nil {
			return err
		}
		*cf.repo = abs
		if *cf.kubeBin != "" {
			if *cf.kubeBin, err = filepath.Abs(*cf.kubeBin); err != nil {
				return err
			}
		}
	}
	state := opts.StateDir
	if pid, held, _ := simcluster.LockHolder(state); held {
		return fmt.Errorf("a local cloud (pid %d) is already running with state in %s; stop it with `%s`, or start another with a different --state", pid, state, simCmd(state, "down"))
	}
	// Nobody owns the state directory: what it records is a killed
	// run's, and only this directory's.
	if err := reportLeftovers(stdout, state); err != nil {
		return err
	}
	if err := os.MkdirAll(state, 0o700); err != nil {
		return fmt.Errorf("state directory: %w", err)
	}
	logPath := filepath.Join(state, "sim.log")
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		return fmt.Errorf("open the local cloud's log: %w", err)
	}
	defer logf.Close()
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	cmd := exec.Command(exe, cf.runArgs(opts)...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true} // outlives this shell
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start the local cloud: %w", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()

	timeout := 2 * time.Minute
	if *cf.kubernetes {
		timeout = 6 * time.Minute
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var c *simcluster.Cluster
	for c == nil {
		select {
		case err := <-exited:
			return fmt.Errorf("the local cloud stopped (%v); the end of its log %s:\n%s", err, logPath, tailFile(logPath, 15))
		case <-ctx.Done():
			return fmt.Errorf("the local cloud did not come up: %w; its log is %s; remove what it made with `%s`", ctx.Err(), logPath, simCmd(state, "down"))
		case <-time.After(100 * time.Millisecond):
			c, _ = simcluster.Attach(state)
		}
	}
	if *cf.kubernetes {
		return kubeUp(ctx, c, state, exited, stdout)
	}
	if err := c.WaitReady(ctx); err != nil {
		return fmt.Errorf("%w\nthe local cloud keeps running; look with `%s`, remove it with `%s`", err, simCmd(state, "status"), simCmd(state, "down"))
	}
	fmt.Fprintf(stdout, "local cloud up (pid %d, state %s, namespaces %s*, log %s)\n", cmd.Process.Pid, state, opts.Prefix, logPath)
	for _, n := range c.Nodes {
		fmt.Fprintf(stdout, "  %-10s %-10s %-12s netns %s\n", n.ID, n.Type, n.PrimaryIP, n.NetNS)
	}
	fmt.Fprintf(stdout, "next: %s; %s; %s\n", simCmd(state, "pod", "add", c.Nodes[0].ID, "web-1"), simCmd(state, "status"), simCmd(state, "down"))
	return nil
}

// simRun is the background half of `sim up`: it holds the emulator and
// the agents until SIGTERM (`sim down`), then removes everything.
func simRun(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := simFlags("run", "[--topology FILE] [--bin DIR] [--state DIR] [--prefix PREFIX] [--agent-env NAME=VALUE]... (what `sim up` runs in the background)", stderr)
	cf := addClusterFlags(fs)
	if _, err := parseSimFlags(fs, args); err != nil {
		return err
	}
	log := slog.New(slog.NewTextHandler(stderr, nil))
	opts, err := cf.options(log)
	if err != nil {
		return err
	}
	// The lock says this process owns the state directory for as long
	// as it lives, however it ends; `sim down` and `sim up` ask it.
	release, err := simcluster.LockState(opts.StateDir)
	if err != nil {
		return err
	}
	defer release()
	var c *simcluster.Cluster
	if *cf.kubernetes {
		kopts, err := cf.kubeOptions(opts)
		if err != nil {
			return err
		}
		kc, err := kubecluster.Start(ctx, kopts)
		if err != nil {
			return err
		}
		defer func() {
			if err := kc.Close(); err != nil {
				log.Error("teardown", "err", err)
			}
			removeStateFiles(opts.StateDir)
		}()
		c = kc.Sim
		stopControl, err := serveControl(c, log)
		if err != nil {
			return err
		}
		defer stopControl()
		log.Info("kubernetes cluster up", "kubeconfig", kc.Kubeconfig)
		<-ctx.Done()
		log.Info("stopping the local cloud")
		return nil
	}
	c, err = simcluster.Start(ctx, opts)
	if err != nil {
		return err
	}
	defer func() {
		if err := c.Close(); err != nil {
			log.Error("teardown", "err", err)
		}
		removeStateFiles(opts.StateDir)
	}()
	stopControl, err := serveControl(c, log)
	if err != nil {
		return err
	}
	defer stopControl()
	<-ctx.Done()
	log.Info("stopping the local cloud")
	return nil
}

// tailFile is the last lines of a file, for an error message.
func tailFile(path string, lines int) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return "(" + err.Error() + ")"
	}
	all := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(all) > lines {
		all = all[len(all)-lines:]
	}
	return strings.Join(all, "\n")
}
