package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"path/filepath"

	"github.com/vpcnet/vpcnet/simcluster"
)

// simPod adds, deletes and lists pods of the cluster `sim up` started, by
// running the CNI plugin through libcni as the runtime would.
func simPod(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	const want = "want \"vpcnetctl sim pod add NODE NAME\", \"sim pod del NAME\" or \"sim pod list\" (see `vpcnetctl sim pod --help`)"
	fs := simFlags("pod", "add NODE NAME | del NAME | list [--state DIR]\n\n"+
		"  add   create the pod's namespace and run CNI ADD through libcni in NODE's namespace, as containerd would\n"+
		"  del   run CNI DEL and remove the pod's namespace, as the kubelet does when a pod is deleted\n"+
		"  list  the pods, their nodes and addresses", stderr)
	state := fs.String("state", defaultStateDir, "directory of the cluster's state")
	if wantHelp(args) {
		fs.Usage()
		return flag.ErrHelp
	}
	if len(args) == 0 {
		return fmt.Errorf("%w: %s", errUsage, want)
	}
	verb := args[0]
	pos, err := parseSimFlags(fs, args[1:])
	if err != nil {
		return err
	}
	dir, err := absState(*state)
	if err != nil {
		return err
	}
	c, err := attach(dir)
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
		fmt.Fprintf(stdout, "next: %s; %s\n", simCmd(dir, "status"), simCmd(dir, "pod", "del", p.Name))
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
		fmt.Fprintf(stdout, "next: %s\n", simCmd(dir, "status"))
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

// attach opens the running cluster whose state is in dir; when there is
// none, the error says how to start one there.
func attach(dir string) (*simcluster.Cluster, error) {
	c, err := simcluster.Attach(dir)
	if errors.Is(err, simcluster.ErrNotRunning) {
		return nil, fmt.Errorf("no local cloud is running with state in %s: start one with `%s`", dir, simCmd(dir, "up"))
	}
	return c, err
}
