package simcluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/vpcnet/vpcnet/fabric"
	"github.com/vpcnet/vpcnet/sim"
)

// Options describe a cluster to start.
type Options struct {
	Topology *sim.Topology
	// BinDir holds vpcnetd and the vpcnet plugin (and portmap, which the
	// agent's CNI configuration chains).
	BinDir string
	// StateDir receives one directory per node (checkpoint, socket, CNI
	// configuration, agent log) and the cluster's state file. Required.
	StateDir string
	// Prefix starts every namespace name; empty means PrefixFor(StateDir),
	// so clusters with different state directories never share a name.
	Prefix string
	// AgentEnv adds settings (KEY=VALUE) to every agent's environment;
	// NodeEnv to one node's, by instance ID, after AgentEnv. Start
	// checks them (CheckAgentEnv) before it starts anything.
	AgentEnv []string
	NodeEnv  map[string][]string
	// NoAgents leaves the nodes without a vpcnetd process: the agents
	// run elsewhere, as the vpcnet DaemonSet's pods on a real kubelet
	// (simcluster/kubecluster).
	NoAgents bool
	// Logger receives progress; nil discards.
	Logger *slog.Logger
	// CloudOptions tune the emulator (clock, seed).
	CloudOptions sim.Options
}

// Cluster is a running local cloud with its nodes.
type Cluster struct {
	Cloud  *sim.Cloud // nil in a cluster opened with Attach
	Fabric *fabric.Fabric
	Nodes  []*Node

	state State
	log   *slog.Logger
}

// State is what another process needs to use a running cluster; it is
// written to StateDir/cluster.json.
type State struct {
	Prefix   string      `json:"prefix"`
	BinDir   string      `json:"binDir"`
	StateDir string      `json:"stateDir"`
	Internet string      `json:"internetNetns"`
	Nodes    []NodeState `json:"nodes"`
	// PID is the process serving the emulator, for `sim down`.
	PID int `json:"pid"`
}

// NodeState names one node's namespace and directories.
type NodeState struct {
	ID        string     `json:"instanceId"`
	Type      string     `json:"instanceType"`
	NetNS     string     `json:"netns"`
	Dir       string     `json:"dir"`
	PrimaryIP netip.Addr `json:"primaryIP"`
}

// Start builds the cloud and fabric and starts an agent on every node,
// without waiting for them to be ready (see WaitReady).
func Start(ctx context.Context, opts Options) (_ *Cluster, err error) {
	if opts.StateDir == "" || opts.BinDir == "" || opts.Topology == nil {
		return nil, errors.New("simcluster: Topology, BinDir and StateDir are required")
	}
	if opts.Prefix == "" {
		if opts.Prefix, err = PrefixFor(opts.StateDir); err != nil {
			return nil, err
		}
	}
	if err := CheckPrefix(opts.Prefix); err != nil {
		return nil, fmt.Errorf("simcluster: %w", err)
	}
	if err := os.MkdirAll(opts.StateDir, 0o700); err != nil {
		return nil, fmt.Errorf("simcluster: state directory: %w", err)
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	for _, bin := range []string{"vpcnetd", "vpcnet", "portmap"} {
		if _, err := os.Stat(filepath.Join(opts.BinDir, bin)); err != nil {
			return nil, fmt.Errorf("simcluster: %s is not built in %s (run make build-sim): %w", bin, opts.BinDir, err)
		}
	}
	if !opts.NoAgents {
		// A bad setting would stop every agent at start, each in its own
		// log; said once here, nothing has been started yet.
		if err := CheckAgentEnv(opts.AgentEnv); err != nil {
			return nil, fmt.Errorf("simcluster: %w", err)
		}
		for id, env := range opts.NodeEnv {
			if err := CheckAgentEnv(append(slices.Clone(opts.AgentEnv), env...)); err != nil {
				return nil, fmt.Errorf("simcluster: node %s: %w", id, err)
			}
		}
	}
	c := &Cluster{log: opts.Logger, state: State{Prefix: opts.Prefix, StateDir: opts.StateDir}}
	defer func() {
		if err != nil {
			c.Close()
		}
	}()
	if c.Cloud, err = sim.NewCloud(opts.Topology, opts.CloudOptions); err != nil {
		return nil, err
	}
	if c.Fabric, err = fabric.Start(ctx, c.Cloud, fabric.Options{
		Prefix: opts.Prefix, Logger: opts.Logger.With("part", "fabric"),
		Created: func(name string) error { return recordNamespace(opts.StateDir, name) },
	}); err != nil {
		return nil, err
	}
	c.state = State{Prefix: opts.Prefix, BinDir: opts.BinDir, StateDir: opts.StateDir, Internet: c.Fabric.InternetNS(), PID: os.Getpid()}
	for _, in := range c.Cloud.Instances() {
		path, ok := c.Fabric.NodeNS(in.ID)
		if !ok {
			continue
		}
		ns := NodeState{ID: in.ID, Type: in.Type, NetNS: path, Dir: filepath.Join(opts.StateDir, in.ID), PrimaryIP: in.PrivateIP}
		c.state.Nodes = append(c.state.Nodes, ns)
		c.Nodes = append(c.Nodes, &Node{NodeState: ns, cluster: c, env: append(slices.Clone(opts.AgentEnv), opts.NodeEnv[in.ID]...)})
	}
	if err := c.writeState(); err != nil {
		return nil, err
	}
	for _, n := range c.Nodes {
		if err := n.resetAgentState(); err != nil {
			return nil, err
		}
		if opts.NoAgents {
			continue
		}
		if err := n.StartAgent(); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// ErrNotRunning says a state directory holds no running cluster.
var ErrNotRunning = errors.New("no cluster state (cluster.json) there")

// Attach opens the cluster another process started in stateDir, to add and
// delete pods and read the agents' endpoints.
func Attach(stateDir string) (*Cluster, error) {
	data, err := os.ReadFile(filepath.Join(stateDir, "cluster.json"))
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("no local cloud is running with state in %s: %w", stateDir, ErrNotRunning)
	}
	if err != nil {
		return nil, err
	}
	c := &Cluster{log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	if err := json.Unmarshal(data, &c.state); err != nil {
		return nil, fmt.Errorf("read %s: %w", filepath.Join(stateDir, "cluster.json"), err)
	}
	for _, ns := range c.state.Nodes {
		c.Nodes = append(c.Nodes, &Node{NodeState: ns, cluster: c})
	}
	return c, nil
}

// State describes the cluster for other processes.
func (c *Cluster) State() State { return c.state }

// Node finds a node by instance ID.
func (c *Cluster) Node(id string) (*Node, error) {
	for _, n := range c.Nodes {
		if n.ID == id {
			return n, nil
		}
	}
	return nil, fmt.Errorf("no node %s in the local cloud", id)
}

// WaitReady waits until every agent reports ready.
func (c *Cluster) WaitReady(ctx context.Context) error {
	for _, n := range c.Nodes {
		if err := n.WaitReady(ctx); err != nil {
			return err
		}
	}
	return nil
}

func (c *Cluster) writeState() error {
	if err := os.MkdirAll(c.state.StateDir, 0o700); err != nil {
		return err
	}
	data, err := json.MarshalIndent(c.state, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(c.state.StateDir, "cluster.json"), append(data, '\n'), 0o600)
}

// Close stops the agents, deletes every pod namespace, the fabric and the
// state file. It is safe to call on a partly started cluster.
func (c *Cluster) Close() error {
	var errs []error
	for _, n := range c.Nodes {
		if err := n.StopAgent(10 * time.Second); err != nil {
			errs = append(errs, err)
		}
	}
	if c.Fabric != nil {
		errs = append(errs, c.Fabric.Close())
	}
	if c.Cloud != nil {
		c.Cloud.Close()
	}
	if c.state.StateDir != "" {
		// Pods' namespaces, and anything the fabric could not delete:
		// exactly what this cluster recorded, never a sweep by prefix,
		// which would take another cluster's namespaces with it.
		if _, err := RemoveRecorded(c.state.StateDir); err != nil {
			errs = append(errs, err)
		}
	}
	if c.state.StateDir != "" {
		if err := os.Remove(filepath.Join(c.state.StateDir, "cluster.json")); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
