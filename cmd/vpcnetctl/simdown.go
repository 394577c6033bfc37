package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/vpcnet/vpcnet/simcluster"
	"github.com/vpcnet/vpcnet/simcluster/kubecluster"
)

// simDown stops the cluster whose state is in --state and removes what
// that directory recorded: the background process, agents a killed run
// left, namespaces. Nothing else: other clusters on the machine, and
// namespaces that merely look like ours, are not touched.
func simDown(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := simFlags("down", "[--state DIR]", stderr)
	state := fs.String("state", defaultStateDir, "directory of the cluster's state")
	pos, err := parseSimFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return fmt.Errorf("%w: unexpected %q (see `vpcnetctl sim down --help`)", errUsage, pos[0])
	}
	dir, err := absState(*state)
	if err != nil {
		return err
	}
	// Read the prefix before the state goes, for the closing hint.
	var prefix string
	if c, err := simcluster.Attach(dir); err == nil {
		prefix = c.State().Prefix
	}
	pid, held, err := simcluster.LockHolder(dir)
	if err != nil {
		return err
	}
	if held {
		if err := stopOwner(ctx, dir, pid, 60*time.Second); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "stopped the local cloud (pid %d)\n", pid)
	}
	if err := reportLeftovers(stdout, dir); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "nothing of the local cloud with state in %s is left\n", dir)
	again := []string{"up"}
	if derived, _ := simcluster.PrefixFor(dir); prefix != "" && prefix != derived {
		again = append(again, "--prefix", shellQuote(prefix))
	}
	fmt.Fprintf(stdout, "next: %s\n", simCmd(dir, again...))
	return nil
}

// stopOwner sends SIGTERM to the process owning the state directory and
// waits until it has let go of the directory's lock, which it does last,
// after its own teardown. After grace it sends SIGKILL; RemoveRecorded
// then removes what the teardown did not get to.
func stopOwner(ctx context.Context, dir string, pid int, grace time.Duration) error {
	if err := syscall.Kill(pid, syscall.SIGTERM); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("stop the local cloud (pid %d): %w", pid, err)
	}
	released := func() bool { _, held, _ := simcluster.LockHolder(dir); return !held }
	if waitFor(ctx, grace, released) {
		return nil
	}
	_ = syscall.Kill(pid, syscall.SIGKILL)
	if waitFor(ctx, 10*time.Second, released) {
		return nil
	}
	return fmt.Errorf("the local cloud (pid %d) still holds %s after SIGKILL; see `ps -p %d`", pid, filepath.Join(dir, "run.lock"), pid)
}

// waitFor polls cond until it holds (true) or the time is up (false).
func waitFor(ctx context.Context, limit time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		select {
		case <-ctx.Done():
			return false
		case <-time.After(100 * time.Millisecond):
		}
	}
	return true
}

// reportLeftovers removes what the state directory recorded and is still
// there, saying what, and the files that describe a running cluster. The
// caller has made sure no process owns the directory.
func reportLeftovers(w io.Writer, dir string) error {
	kube, err := kubecluster.RemoveLeftovers(dir)
	if kube.Killed > 0 || len(kube.Cgroups) > 0 {
		fmt.Fprintf(w, "killed %d leftover Kubernetes processes, removed cgroups %v\n", kube.Killed, kube.Cgroups)
	}
	if err != nil {
		return fmt.Errorf("remove the Kubernetes processes and cgroups the local cloud with state in %s left: %w", dir, err)
	}
	left, err := simcluster.RemoveRecorded(dir)
	for _, pid := range left.Agents {
		fmt.Fprintf(w, "killed leftover agent (pid %d)\n", pid)
	}
	for _, n := range left.Namespaces {
		fmt.Fprintf(w, "removed leftover namespace %s\n", n)
	}
	if err != nil {
		return fmt.Errorf("remove what the local cloud with state in %s left: %w", dir, err)
	}
	removeStateFiles(dir)
	return nil
}

// removeStateFiles deletes the files that say a cluster runs in dir; the
// agents' logs and checkpoints stay for a look afterwards.
func removeStateFiles(dir string) {
	os.Remove(filepath.Join(dir, "cluster.json"))
	os.Remove(filepath.Join(dir, controlSocket))
	os.RemoveAll(filepath.Join(dir, "pods"))
}
