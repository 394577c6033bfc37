package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/vpcnet/vpcnet/simcluster"
)

// errAgentDown makes `sim status` exit non-zero once it has printed
// everything, so scripts can wait on it.
var errAgentDown = errors.New("agent down")

// simStatus prints each agent's readiness and last error (from its
// /v1/status), the pods, and each answering agent's pool. It fails when
// an agent does not answer.
func simStatus(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := simFlags("status", "[--state DIR]\n\nEach node's agent: up or down, ready or not with the failing readiness conditions, the last EC2 error;\nthen the pods and each agent's pool. Exits 1 when an agent does not answer.", stderr)
	state := fs.String("state", defaultStateDir, "directory of the cluster's state")
	pos, err := parseSimFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return fmt.Errorf("%w: unexpected %q (see `vpcnetctl sim status --help`)", errUsage, pos[0])
	}
	dir, err := absState(*state)
	if err != nil {
		return err
	}
	c, err := attach(dir)
	if err != nil {
		return err
	}
	var down []string
	up := map[string]bool{}
	fmt.Fprintf(stdout, "%-10s %-10s %-12s %-6s %-6s %s\n", "NODE", "TYPE", "PRIMARY", "AGENT", "READY", "LAST EC2 ERROR")
	for _, n := range c.Nodes {
		st, err := n.Status(ctx)
		if err != nil {
			down = append(down, n.ID)
			fmt.Fprintf(stdout, "%-10s %-10s %-12s %-6s %-6s %s\n", n.ID, n.Type, n.PrimaryIP, "down", "-", "-")
			fmt.Fprintf(stdout, "  %v\n  its log: %s\n", err, n.AgentLog())
			continue
		}
		up[n.ID] = true
		ready, last := "no", st.LastEC2Error
		if st.Ready {
			ready = "yes"
		}
		if last == "" {
			last = "-"
		}
		fmt.Fprintf(stdout, "%-10s %-10s %-12s %-6s %-6s %s\n", n.ID, n.Type, n.PrimaryIP, "up", ready, last)
		for _, cond := range st.Conditions {
			if !cond.OK {
				fmt.Fprintf(stdout, "  not %s: %s\n", cond.Name, cond.Message)
			}
		}
	}
	fmt.Fprintln(stdout)
	if err := printPods(c, stdout); err != nil {
		return err
	}
	for _, n := range c.Nodes {
		if !up[n.ID] {
			continue
		}
		fmt.Fprintln(stdout)
		if err := printENIs(ctx, stdout, n); err != nil {
			fmt.Fprintf(stdout, "%s: %v\n", n.ID, err)
		}
	}
	if len(down) > 0 {
		var hints []string
		for _, id := range down {
			hints = append(hints, simCmd(dir, "agent", "start", id))
		}
		fmt.Fprintf(stdout, "\nnext: %s\n", strings.Join(hints, "; "))
		return fmt.Errorf("%w: %s not answering", errAgentDown, strings.Join(down, ", "))
	}
	return nil
}

// printENIs shows a node's pool as its agent reports it on /v1/enis.
func printENIs(ctx context.Context, w io.Writer, n *simcluster.Node) error {
	enis, err := n.ENIs(ctx)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "%s (%s, %s) GET /v1/enis:\n", n.ID, n.Type, n.PrimaryIP)
	fmt.Fprintf(w, "  %-22s %6s %5s %8s %7s %4s\n", "ENI", "DEVICE", "TOTAL", "ASSIGNED", "COOLING", "FREE")
	for _, e := range enis {
		fmt.Fprintf(w, "  %-22s %6d %5d %8d %7d %4d\n", e.ID, e.DeviceIndex, e.Total, e.Assigned, e.Cooling, e.Free)
	}
	return nil
}
