package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"k8s.io/client-go/kubernetes"

	"github.com/vpcnet/vpcnet/sim"
	"github.com/vpcnet/vpcnet/simcluster"
	"github.com/vpcnet/vpcnet/simcluster/kubecluster"
)

// bench is one run of the driver: where the binaries are, the namespace
// prefix every scenario's names start with, and a scratch directory.
type bench struct {
	opts    options
	prefix  string // e.g. "vpcbench-3fa2-"; Sweep(prefix) removes all we made
	scratch string
	log     *slog.Logger
}

// topology is a VPC of one node, or of a few alike (instanceLine each);
// the instance type and the EC2 timings vary by scenario.
const topology = `
region: us-west-2
vpc: {id: vpc-bench, cidrs: [10.0.0.0/16]}
subnets:
  - {id: subnet-a, az: us-west-2a, cidr: 10.0.0.0/18}
securityGroups: [sg-bench]
instances:
%sattachDelay: %s
detachDelay: 1s
imdsLag: %s
seed: 1
`

// topology6 is topology on a dual-stack VPC: the subnet has an IPv6 /64
// and gives each new ENI an IPv6 address, as an EKS IPv6 cluster's
// subnets do.
const topology6 = `
region: us-west-2
vpc: {id: vpc-bench, cidrs: [10.0.0.0/16], ipv6Cidr: '2600:1f14:abc:de00::/56'}
subnets:
  - {id: subnet-a, az: us-west-2a, cidr: 10.0.0.0/18, ipv6Cidr: '2600:1f14:abc:de01::/64', assignIpv6AddressOnCreation: true}
securityGroups: [sg-bench]
instances:
%sattachDelay: %s
detachDelay: 1s
imdsLag: %s
seed: 1
`

const instanceLine = "  - {id: %s, type: %s, subnet: subnet-a}\n"

// instanceID names a scenario's i-th node: i-bench, then i-bench-2 and
// on, so one-node scenarios keep the name they always had.
func instanceID(i int) string {
	if i == 0 {
		return "i-bench"
	}
	return fmt.Sprintf("i-bench-%d", i+1)
}

// clusterSpec is what a scenario asks of its node.
type clusterSpec struct {
	name         string // scenario name, part of the namespace prefix
	instanceType string
	attachDelay  time.Duration
	imdsLag      time.Duration
	env          []string // agent settings, KEY=VALUE
	bin          string   // where vpcnetd and vpcnet are; empty: --bin
	// nodes is how many nodes of instanceType the VPC has; zero is one.
	// nodeEnv adds settings to one node's agent, by instanceID, after
	// env: the scenarios that compare two settings side by side.
	nodes   int
	nodeEnv map[string][]string
	// dualStack puts the nodes on a dual-stack VPC (topology6).
	dualStack bool
}

// node is one node of a started cluster, usually its only one.
type node struct {
	c       *simcluster.Cluster
	n       *simcluster.Node
	prefix  string
	dir     string
	started time.Time // when the agent process was started
	// kube is the API server the agent uses, when there is one
	// (startKubeNode); kubeClient reaches it and nodeName is the Node
	// registered for the agent.
	kube       *kubecluster.Cluster
	kubeClient kubernetes.Interface
	nodeName   string
}

// simOptions is the local cloud a scenario's node runs on.
func (b *bench) simOptions(spec clusterSpec) (opts simcluster.Options, dir, prefix string, err error) {
	var instances strings.Builder
	for i := range max(spec.nodes, 1) {
		fmt.Fprintf(&instances, instanceLine, instanceID(i), spec.instanceType)
	}
	format := topology
	if spec.dualStack {
		format = topology6
	}
	topo, err := sim.ParseTopology(fmt.Appendf(nil, format, instances.String(), spec.attachDelay, spec.imdsLag))
	if err != nil {
		return opts, "", "", fmt.Errorf("topology: %w", err)
	}
	dir = filepath.Join(b.scratch, spec.name)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return opts, "", "", err
	}
	prefix = b.prefix + spec.name + "-"
	bin := spec.bin
	if bin == "" {
		bin = b.opts.bin
	}
	return simcluster.Options{
		Topology: topo, BinDir: bin, StateDir: dir, Prefix: prefix,
		AgentEnv: spec.env, NodeEnv: spec.nodeEnv, Logger: b.log.With("scenario", spec.name),
	}, dir, prefix, nil
}

// startNode starts the local cloud with one node and its agent, without
// waiting for it to be ready. close removes everything it made.
func (b *bench) startNode(ctx context.Context, spec clusterSpec) (*node, error) {
	opts, dir, prefix, err := b.simOptions(spec)
	if err != nil {
		return nil, err
	}
	started := time.Now()
	c, err := simcluster.Start(ctx, opts)
	if err != nil {
		return nil, fmt.Errorf("start the local cloud: %w", err)
	}
	if err := c.Fabric.Err(); err != nil {
		c.Close()
		return nil, err
	}
	return &node{c: c, n: c.Nodes[0], prefix: prefix, dir: dir, started: started}, nil
}

func (nd *node) close() error {
	if nd.kube != nil {
		return nd.kube.Close()
	}
	return nd.c.Close()
}

// settle waits until the agent has made no EC2 call for quiet: the pool
// is at its target and the reconcile loop has nothing to do.
func (nd *node) settle(ctx context.Context, quiet, limit time.Duration) (Metrics, error) {
	deadline := time.Now().Add(limit)
	var last float64 = -1
	lastChange := time.Now()
	for {
		m, err := scrape(ctx, nd.n.NetNS)
		if err != nil {
			return nil, err
		}
		calls := m.Sum("vpcnet_ec2_requests_total")
		if calls != last {
			last, lastChange = calls, time.Now()
		} else if time.Since(lastChange) >= quiet {
			return m, nil
		}
		if time.Now().After(deadline) {
			return m, fmt.Errorf("the agent still calls EC2 after %s (%v calls so far); its pool does not settle", limit, calls)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}
}
