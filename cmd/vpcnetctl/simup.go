package main

import (
	"context"
	_ "embed"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"

	"github.com/vpcnet/vpcnet/fabric"
	"github.com/vpcnet/vpcnet/sim"
	"github.com/vpcnet/vpcnet/simcluster"
)

//go:embed demo-topology.yaml
var demoTopology []byte

// defaultStateDir is where `sim up` keeps the cluster's state so that
// later commands find it.
const defaultStateDir = "/run/vpcnet-sim"

// clusterFlags are the flags that say which cluster to build.
type clusterFlags struct {
	topology, bin, state *string
}

func addClusterFlags(fs *flag.FlagSet) clusterFlags {
	return clusterFlags{
		topology: fs.String("topology", "", "topology file (see sim/README.md); empty means the demo's two m5.large nodes"),
		bin:      fs.String("bin", "", "directory holding vpcnetd, vpcnet and portmap; empty means this program's directory"),
		state:    fs.String("state", defaultStateDir, "directory for the cluster's state"),
	}
}

func (f clusterFlags) options(log *slog.Logger) (simcluster.Options, error) {
	data := demoTopology
	if *f.topology != "" {
		var err error
		if data, err = os.ReadFile(*f.topology); err != nil {
			return simcluster.Options{}, err
		}
	}
	topo, err := sim.ParseTopology(data)
	if err != nil {
		return simcluster.Options{}, err
	}
	bin := *f.bin
	if bin == "" {
		exe, err := os.Executable()
		if err != nil {
			return simcluster.Options{}, err
		}
		bin = filepath.Dir(exe)
	}
	if bin, err = filepath.Abs(bin); err != nil {
		return simcluster.Options{}, err
	}
	state, err := filepath.Abs(*f.state)
	if err != nil {
		return simcluster.Options{}, err
	}
	return simcluster.Options{Topology: topo, BinDir: bin, StateDir: state, Logger: log}, nil
}

// simUp starts the cluster in a background process (`sim run`) and returns
// once every agent is ready.
func simUp(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("vpcnetctl sim up", flag.ContinueOnError)
	fs.SetOutput(stderr)
	cf := addClusterFlags(fs)
	if pos, err := parseInterspersed(fs, args); err != nil || len(pos) > 0 {
		return fmt.Errorf("%w: want \"vpcnetctl sim up [--topology FILE] [--bin DIR] [--state DIR]\"", errUsage)
	}
	if _, err := simcluster.Attach(*cf.state); err == nil {
		return fmt.Errorf("a local cloud is already running with state in %s; stop it with `vpcnetctl sim down`", *cf.state)
	}
	if err := os.MkdirAll(*cf.state, 0o700); err != nil {
		return err
	}
	logPath := filepath.Join(*cf.state, "sim.log")
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	defer logf.Close()
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	cmd := exec.Command(exe, append([]string{"sim", "run"}, args...)...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true} // outlives this shell
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start the local cloud: %w", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()

	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	var c *simcluster.Cluster
	for c == nil {
		select {
		case err := <-exited:
			return fmt.Errorf("the local cloud stopped (%v); its log is %s", err, logPath)
		case <-ctx.Done():
			return fmt.Errorf("the local cloud did not come up: %w; its log is %s", ctx.Err(), logPath)
		case <-time.After(100 * time.Millisecond):
			c, _ = simcluster.Attach(*cf.state)
		}
	}
	if err := c.WaitReady(ctx); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "local cloud up (pid %d, log %s)\n", cmd.Process.Pid, logPath)
	for _, n := range c.Nodes {
		fmt.Fprintf(stdout, "  %-10s %-10s %-12s netns %s\n", n.ID, n.Type, n.PrimaryIP, n.NetNS)
	}
	fmt.Fprintf(stdout, "next: vpcnetctl sim pod add %s web-1; vpcnetctl sim status; vpcnetctl sim down\n", c.Nodes[0].ID)
	return nil
}

// simRun is the background half of `sim up`: it holds the emulator and
// the agents until SIGTERM (`sim down`), then removes everything.
func simRun(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("vpcnetctl sim run", flag.ContinueOnError)
	fs.SetOutput(stderr)
	cf := addClusterFlags(fs)
	if err := fs.Parse(args); err != nil {
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	log := slog.New(slog.NewTextHandler(stderr, nil))
	opts, err := cf.options(log)
	if err != nil {
		return err
	}
	c, err := simcluster.Start(ctx, opts)
	if err != nil {
		return err
	}
	defer func() {
		if err := c.Close(); err != nil {
			log.Error("teardown", "err", err)
		}
		removePodRecords(opts.StateDir)
	}()
	<-ctx.Done()
	log.Info("stopping the local cloud")
	return nil
}

// simDown stops the cluster `sim up` started and removes any namespace a
// crashed run left behind.
func simDown(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("vpcnetctl sim down", flag.ContinueOnError)
	fs.SetOutput(stderr)
	state := fs.String("state", defaultStateDir, "directory of the cluster's state")
	if pos, err := parseInterspersed(fs, args); err != nil || len(pos) > 0 {
		return fmt.Errorf("%w: want \"vpcnetctl sim down [--state DIR]\"", errUsage)
	}
	prefix := simcluster.DefaultPrefix
	if c, err := simcluster.Attach(*state); err == nil {
		st := c.State()
		prefix = st.Prefix
		if err := stopProcess(ctx, st.PID, 30*time.Second); err != nil {
			fmt.Fprintf(stderr, "vpcnetctl sim down: %v\n", err)
		} else {
			fmt.Fprintf(stdout, "stopped the local cloud (pid %d)\n", st.PID)
		}
		os.Remove(filepath.Join(*state, "cluster.json"))
	}
	removePodRecords(*state)
	removed, err := fabric.Sweep(prefix)
	for _, n := range removed {
		fmt.Fprintf(stdout, "removed leftover namespace %s\n", n)
	}
	if err != nil {
		return err
	}
	fmt.Fprintln(stdout, "nothing of the local cloud is left")
	return nil
}

// stopProcess sends SIGTERM and waits; after grace it sends SIGKILL.
func stopProcess(ctx context.Context, pid int, grace time.Duration) error {
	if pid <= 0 {
		return errors.New("no process recorded")
	}
	p, _ := os.FindProcess(pid)
	if err := p.Signal(syscall.SIGTERM); err != nil {
		return fmt.Errorf("process %d is gone already (%v); removing leftovers", pid, err)
	}
	deadline := time.Now().Add(grace)
	for time.Now().Before(deadline) {
		if p.Signal(syscall.Signal(0)) != nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
	_ = p.Signal(syscall.SIGKILL)
	return fmt.Errorf("process %d did not stop within %s; killed it", pid, grace)
}

func removePodRecords(state string) {
	os.RemoveAll(filepath.Join(state, "pods"))
}
