package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"path/filepath"

	"github.com/vpcnet/vpcnet/simcluster"
)

// simPod adds, deletes and lists pods of the cluster `sim up` started, by
// running the CNI plugin through libcni as the runtime would.
func simPod(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	const want = "want \"vpcnetctl sim pod add NODE NAME\", \"sim pod del NAME\" or \"sim pod list\""
	fs := flag.NewFlagSet("vpcnetctl sim pod", flag.ContinueOnError)
	fs.SetOutput(stderr)
	state := fs.String("state", defaultStateDir, "directory of the cluster's state")
	if len(args) == 0 {
		return fmt.Errorf("%w: %s", errUsage, want)
	}
	verb := args[0]
	pos, err := parseInterspersed(fs, args[1:])
	if err != nil {
		return fmt.Errorf("%w: %s", errUsage, want)
	}
	c, err := simcluster.Attach(*state)
	if err != nil {
		return err
	}
	switch {
	case verb == "add" && len(pos) == 2:
		n, err := c.Node(pos[0])
		if err != nil {
			return err
		}
		p, err := n.AddPod(ctx, pos[1])
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "%s on %s: %s (netns %s)\n", p.Name, p.Node, p.Addr, p.NetNS)
		fmt.Fprintf(stdout, "inside it: ip netns exec %s COMMAND (e.g. ping -c1 %s)\n", filepath.Base(p.NetNS), n.PrimaryIP)
		return nil
	case verb == "del" && len(pos) == 1:
		p, err := c.Pod(pos[0])
		if err != nil {
			return err
		}
		n, err := c.Node(p.Node)
		if err != nil {
			return err
		}
		if err := n.DelPod(ctx, p); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "deleted %s; %s returns to %s's pool after the cooldown\n", p.Name, p.Addr, p.Node)
		return nil
	case verb == "list" && len(pos) == 0:
		return printPods(c, stdout)
	}
	return fmt.Errorf("%w: %s", errUsage, want)
}

func printPods(c *simcluster.Cluster, w io.Writer) error {
	pods, err := c.Pods()
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "%-12s %-10s %-12s\n", "POD", "NODE", "ADDRESS")
	for _, p := range pods {
		fmt.Fprintf(w, "%-12s %-10s %-12s\n", p.Name, p.Node, p.Addr)
	}
	return nil
}
