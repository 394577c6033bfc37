package main

import (
	"context"
	"flag"
	"fmt"
	"io"

	"github.com/vpcnet/vpcnet/simcluster"
)

// simStatus prints the nodes, the pods and each agent's pool.
func simStatus(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("vpcnetctl sim status", flag.ContinueOnError)
	fs.SetOutput(stderr)
	state := fs.String("state", defaultStateDir, "directory of the cluster's state")
	if pos, err := parseInterspersed(fs, args); err != nil || len(pos) > 0 {
		return fmt.Errorf("%w: want \"vpcnetctl sim status [--state DIR]\"", errUsage)
	}
	c, err := simcluster.Attach(*state)
	if err != nil {
		return err
	}
	if err := printPods(c, stdout); err != nil {
		return err
	}
	for _, n := range c.Nodes {
		fmt.Fprintln(stdout)
		if err := printENIs(ctx, stdout, n); err != nil {
			fmt.Fprintf(stdout, "%s: %v\n", n.ID, err)
		}
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
