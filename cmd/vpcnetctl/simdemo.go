package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"time"

	"github.com/vpcnet/vpcnet/doctor"
	"github.com/vpcnet/vpcnet/fabric"
	"github.com/vpcnet/vpcnet/simcluster"
)

// simDemo runs the README's demo: two nodes, ten pods, connectivity
// proven every way, the agents' pools shown, everything removed.
func simDemo(ctx context.Context, args []string, stdout, stderr io.Writer) (err error) {
	const synopsis = "[--bin DIR] [--topology FILE] [--pods N] [--prefix PREFIX] [--state DIR] [--agent-env NAME=VALUE]..."
	fs := simFlags("demo", synopsis, stderr)
	cf := addCloudFlags(fs, "", "`DIR` for the demo's state, kept afterwards with each agent's log and checkpoint (DIR/NODE/vpcnetd.log); "+
		"empty means a temporary directory, removed at the end")
	pods := fs.Int("pods", 10, "pods to create, spread over the nodes")
	pos, err := parseSimFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 || *pods < 1 {
		return fmt.Errorf("%w: want \"vpcnetctl sim demo %s\" (see `vpcnetctl sim demo --help`)", errUsage, synopsis)
	}
	start := time.Now()
	step := func(format string, a ...any) {
		fmt.Fprintf(stdout, "[%5.1fs] %s\n", time.Since(start).Seconds(), fmt.Sprintf(format, a...))
	}
	keep := *cf.state != ""
	if !keep {
		// A fresh state directory gives this demo namespace names of its
		// own, so demos and clusters that other people run at the same
		// time are never touched.
		if *cf.state, err = os.MkdirTemp("", "vpcnet-demo-"); err != nil {
			return err
		}
		defer os.RemoveAll(*cf.state)
	}
	opts, err := cf.options(slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		return err
	}
	shellSettingsIgnored(stderr, opts.AgentEnv, os.Environ())
	if keep {
		// The directory is the demo's while it runs, as it would be a
		// `sim up` cluster's: refused if one runs there, and what a
		// killed run there left is removed first.
		release, err := simcluster.LockState(opts.StateDir)
		if err != nil {
			return fmt.Errorf("%w; give the demo another --state", err)
		}
		defer release()
		if err := reportLeftovers(stdout, opts.StateDir); err != nil {
			return err
		}
		defer func() {
			removeStateFiles(opts.StateDir) // the pods' records; the logs stay
			if err == nil {
				fmt.Fprintf(stdout, "the agents' logs and checkpoints stay in %s (%s)\n", opts.StateDir, filepath.Join(opts.StateDir, "NODE", "vpcnetd.log"))
			}
		}()
	}

	step("starting the local cloud: EC2 API and IMDS emulator, VPC fabric, vpcnetd on every node")
	c, err := simcluster.Start(ctx, opts)
	if err != nil {
		return err
	}
	defer func() {
		step("tearing down: agents stopped, namespaces deleted")
		cerr := c.Close()
		if left, _ := fabric.Names(opts.Prefix); len(left) > 0 {
			cerr = errors.Join(cerr, fmt.Errorf("namespaces left after teardown: %v", left))
		}
		if cerr == nil && err == nil {
			step("done: nothing left behind")
		}
		err = errors.Join(err, cerr)
	}()
	if err := c.WaitReady(ctx); err != nil {
		return err
	}
	for _, n := range c.Nodes {
		step("  %s %s primary %s: vpcnetd ready", n.ID, n.Type, n.PrimaryIP)
	}

	step("creating %d pods through libcni, as containerd would", *pods)
	created, err := createPods(ctx, c, *pods)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "         %-8s %-8s %-10s %s\n", "POD", "NODE", "ADDRESS", "ENI (device)")
	for _, p := range created {
		eni, dev, _ := c.ENIOf(p.Node, p.Addr)
		fmt.Fprintf(stdout, "         %-8s %-8s %-10s %s (%d)\n", p.Name, p.Node, p.Addr, eni, dev)
	}

	n, errs := c.CheckInsideVPC(ctx, created)
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	step("connectivity: %d TCP connections pod→pod and pod→node, every one seen from the pod's own address", n)
	for _, p := range created {
		node, _ := c.Node(p.Node)
		seen, err := simcluster.Probe(ctx, p.Endpoint(), c.Internet())
		if err != nil {
			return err
		}
		if seen != node.PrimaryIP {
			return fmt.Errorf("the internet saw %s as %s, want its node's primary address %s (SNAT)", p.Name, seen, node.PrimaryIP)
		}
	}
	step("internet (%s): all %d pods arrive as their node's primary address (SNAT)", fabric.InternetAddr, len(created))

	settle, cancel := context.WithTimeout(ctx, 30*time.Second)
	err = c.WaitSettled(settle)
	cancel()
	if err != nil {
		return err
	}
	step("pools at their warm target (each agent's /v1/status plans no change)")
	for _, node := range c.Nodes {
		if err := printENIs(ctx, stdout, node); err != nil {
			return err
		}
	}

	for _, node := range c.Nodes {
		summary, err := doctorNode(ctx, node)
		if err != nil {
			return err
		}
		step("vpcnetctl doctor on %s: %s", node.ID, summary)
	}

	step("deleting the pods")
	for _, p := range created {
		node, _ := c.Node(p.Node)
		if err := node.DelPod(ctx, p); err != nil {
			return err
		}
	}
	return nil
}

func createPods(ctx context.Context, c *simcluster.Cluster, count int) ([]*simcluster.Pod, error) {
	out := make([]*simcluster.Pod, count)
	errs := make([]error, count)
	var wg sync.WaitGroup
	for i := range count {
		wg.Go(func() {
			out[i], errs[i] = c.Nodes[i%len(c.Nodes)].AddPod(ctx, fmt.Sprintf("web-%d", i))
		})
	}
	wg.Wait()
	return out, errors.Join(errs...)
}

// doctorNode runs `vpcnetctl doctor` inside a node's namespace, as an
// operator on that node would, and fails when it finds an error. Doctor
// learns where the node's agent keeps its files and endpoints from the
// agent; it is given only the credentials the instance's role would give
// it (the instance ID as access key: the local cloud applies that
// instance's role), and no kubelet log, as the machine's own is not the
// node's. The Kubernetes API is not read: there are no credentials for it,
// as the local cloud's agents run without one.
func doctorNode(ctx context.Context, n *simcluster.Node) (string, error) {
	self, err := os.Executable()
	if err != nil {
		return "", fmt.Errorf("doctor %s: %w", n.ID, err)
	}
	cmd := exec.CommandContext(ctx, self, "doctor", "-o", "json", "--timeout", "45s", "--kubelet-log", "")
	cmd.Env = []string{"AWS_ACCESS_KEY_ID=" + n.ID, "AWS_SECRET_ACCESS_KEY=sim", "HOME=/nonexistent"}
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := fabric.Do(n.NetNS, cmd.Start); err != nil {
		return "", fmt.Errorf("doctor %s: %w", n.ID, err)
	}
	werr := cmd.Wait()
	var rep doctor.Report
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		return "", fmt.Errorf("doctor %s printed no report (%v): %v\n%s", n.ID, werr, err, errOut.String())
	}
	if rep.HasError() || werr != nil {
		return "", fmt.Errorf("doctor on demo node %s found errors (%v):\n%s", n.ID, werr, out.String())
	}
	if len(rep.Findings) == 0 {
		return fmt.Sprintf("no findings (%d sources read)", len(rep.Sources)), nil
	}
	return fmt.Sprintf("%d findings, none an error", len(rep.Findings)), nil
}
