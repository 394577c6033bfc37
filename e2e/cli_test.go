package e2e

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/vpcnet/vpcnet/simcluster"
)

type ctlFunc func(args ...string) (string, error)

// simCLI runs vpcnetctl with a state directory of the test's own, and runs
// `sim down` when the test ends. prefix is the start of the namespace
// names that cluster gets: derived from the state directory, so the test
// looks only at its own namespaces while other clusters run.
func simCLI(t *testing.T) (state, prefix string, ctl ctlFunc, mustCtl func(args ...string) string) {
	// A directory that does not exist yet, as /run/vpcnet-sim on a fresh
	// machine: sim up makes it.
	state = filepath.Join(stateDir(t), "state")
	prefix, err := simcluster.PrefixFor(state)
	if err != nil {
		t.Fatal(err)
	}
	ctl = func(args ...string) (string, error) {
		cmd := exec.Command(filepath.Join(binDir, "vpcnetctl"), append(args, "--state", state)...)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	mustCtl = func(args ...string) string {
		t.Helper()
		out, err := ctl(args...)
		if err != nil {
			t.Fatalf("vpcnetctl %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return out
	}
	t.Cleanup(func() {
		if out, err := ctl("sim", "down"); err != nil {
			t.Errorf("sim down: %v\n%s", err, out)
		}
		if t.Failed() {
			data, _ := os.ReadFile(filepath.Join(state, "sim.log"))
			t.Logf("sim.log:\n%s", tail(string(data), 30))
		}
	})
	return state, prefix, ctl, mustCtl
}

// The by-hand workflow: `sim up` keeps a cluster running in the
// background, pods come and go from other commands, `sim down` removes
// everything.
func TestSimUpPodAddDelDownLeavesNothing(t *testing.T) {
	state, prefix, ctl, mustCtl := simCLI(t)
	out := mustCtl("sim", "up")
	if !strings.Contains(out, "i-node1") || !strings.Contains(out, "i-node2") {
		t.Fatalf("sim up does not list the nodes:\n%s", out)
	}
	wantHints(t, out, state)
	if out, err := ctl("sim", "up"); err == nil || !strings.Contains(out, "already running") || !strings.Contains(out, "sim down --state "+state) {
		t.Errorf("a second sim up = %v, %q; want a refusal naming the running cloud and how to stop it", err, out)
	}
	out = mustCtl("sim", "pod", "add", "i-node1", "web-1")
	if !strings.Contains(out, "web-1 on i-node1: 10.0.0.") || !strings.Contains(out, prefix+"pod-web-1") {
		t.Errorf("pod add output %q does not show the pod's VPC address and namespace", out)
	}
	wantHints(t, out, state)
	if out := mustCtl("sim", "status"); !strings.Contains(out, "web-1") || !strings.Contains(out, "GET /v1/enis") {
		t.Errorf("status does not show the pod and the pools:\n%s", out)
	}
	if out, err := ctl("sim", "pod", "add", "i-node9", "web-2"); err == nil || !strings.Contains(out, "no node i-node9") {
		t.Errorf("pod add on a missing node = %v, %q", err, out)
	}
	mustCtl("sim", "pod", "del", "web-1")
	if out := mustCtl("sim", "pod", "list"); strings.Contains(out, "web-1") {
		t.Errorf("web-1 still listed after pod del:\n%s", out)
	}
	out = mustCtl("sim", "down")
	if !strings.Contains(out, "nothing of the local cloud with state in "+state+" is left") {
		t.Errorf("sim down output:\n%s", out)
	}
	wantHints(t, out, state)
	if left := namespaces(t, prefix); len(left) > 0 {
		t.Errorf("namespaces left after sim down: %v", left)
	}
}

// wantHints checks that every "next:" line repeats the state directory,
// so pasting it acts on the same cluster.
func wantHints(t *testing.T, out, state string) {
	t.Helper()
	n := 0
	for l := range strings.Lines(out) {
		if !strings.HasPrefix(l, "next:") {
			continue
		}
		n++
		for cmd := range strings.SplitSeq(strings.TrimPrefix(l, "next:"), ";") {
			if !strings.Contains(cmd, "--state "+state) {
				t.Errorf("hint %q does not repeat --state %s", strings.TrimSpace(cmd), state)
			}
		}
	}
	if n == 0 {
		t.Errorf("no next: hint in\n%s", out)
	}
}

// When the process holding the cloud is killed outright, its agents die
// with it and `sim down` removes the namespaces it recorded.
func TestSimDownCleansUpAfterAKilledCloud(t *testing.T) {
	state, prefix, _, mustCtl := simCLI(t)
	mustCtl("sim", "up")
	mustCtl("sim", "pod", "add", "i-node2", "orphan")
	pid := ownerPID(t, state)
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	// Wait until it is gone (a zombie no one reaps still counts as gone
	// for the namespaces: its descriptors are closed).
	for deadline := time.Now().Add(10 * time.Second); syscall.Kill(pid, 0) == nil && time.Now().Before(deadline); {
		time.Sleep(50 * time.Millisecond)
	}
	if len(namespaces(t, prefix)) == 0 {
		t.Fatal("the killed cloud left no namespaces; the test would prove nothing")
	}
	out := mustCtl("sim", "down")
	if !strings.Contains(out, "removed leftover namespace "+prefix+"pod-orphan") {
		t.Errorf("sim down does not say what it removed:\n%s", out)
	}
	if left := namespaces(t, prefix); len(left) > 0 {
		t.Errorf("namespaces left after sim down: %v", left)
	}
}

func ownerPID(t *testing.T, state string) int {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(state, "cluster.json"))
	if err != nil {
		t.Fatal(err)
	}
	var st struct{ PID int }
	if err := json.Unmarshal(data, &st); err != nil {
		t.Fatal(err)
	}
	return st.PID
}

// Two clusters with different state directories run at once, one with
// the prefix derived from its directory and one with an explicit
// --prefix, and each `sim down` removes its own cluster and leaves the
// other running. `sim down --state B` used to delete cluster A's
// namespaces, as both were named vpcsim-*.
func TestSimClustersSideBySideEachDownLeavesTheOther(t *testing.T) {
	stateA, prefixA, _, ctlA := simCLI(t)
	stateB, _, _, ctlB := simCLI(t)
	prefixB := fmt.Sprintf("vpct%04x-", rand.IntN(1<<16))

	var wg sync.WaitGroup
	outs := make([]string, 2)
	errs := make([]error, 2)
	for i, up := range []func() (string, error){
		func() (string, error) { return runCtl(stateA, "sim", "up") },
		func() (string, error) { return runCtl(stateB, "sim", "up", "--prefix", prefixB) },
	} {
		wg.Go(func() { outs[i], errs[i] = up() })
	}
	wg.Wait()
	for i := range outs {
		if errs[i] != nil {
			t.Fatalf("sim up %c: %v\n%s", 'A'+i, errs[i], outs[i])
		}
	}
	ctlA("sim", "pod", "add", "i-node1", "a-1")
	ctlB("sim", "pod", "add", "i-node1", "b-1")
	nsA, nsB := namespaces(t, prefixA), namespaces(t, prefixB)
	if len(nsA) != 5 || len(nsB) != 5 { // router, internet, two nodes, one pod
		t.Fatalf("namespaces: A %v, B %v; want 5 each", nsA, nsB)
	}

	ctlA("sim", "down")
	if left := namespaces(t, prefixA); len(left) > 0 {
		t.Errorf("A's namespaces left after its down: %v", left)
	}
	if got := namespaces(t, prefixB); !equal(got, nsB) {
		t.Fatalf("A's down changed B's namespaces: %v, was %v", got, nsB)
	}
	if out := ctlB("sim", "status"); !strings.Contains(out, "b-1") || strings.Contains(out, " down ") {
		t.Errorf("B after A's down:\n%s", out)
	}
	ctlB("sim", "pod", "add", "i-node2", "b-2")

	// And the other way round, with A up again.
	ctlA("sim", "up")
	nsA = namespaces(t, prefixA)
	ctlB("sim", "down")
	if left := namespaces(t, prefixB); len(left) > 0 {
		t.Errorf("B's namespaces left after its down: %v", left)
	}
	if got := namespaces(t, prefixA); !equal(got, nsA) {
		t.Errorf("B's down changed A's namespaces: %v, was %v", got, nsA)
	}
	ctlA("sim", "status")
}

func runCtl(state string, args ...string) (string, error) {
	out, err := exec.Command(filepath.Join(binDir, "vpcnetctl"), append(args, "--state", state)...).CombinedOutput()
	return string(out), err
}

func equal(a, b []string) bool {
	return strings.Join(a, "\n") == strings.Join(b, "\n")
}

// `sim agent` stops, kills and starts one node's vpcnetd through the
// running cluster; `sim status` shows which agent is down and exits
// non-zero until it is back and answering.
func TestSimAgentStopKillStartAndStatus(t *testing.T) {
	state, _, ctl, mustCtl := simCLI(t)
	mustCtl("sim", "up")
	out := mustCtl("sim", "status")
	if !strings.Contains(out, "READY") || strings.Count(out, " up     yes ") != 2 {
		t.Errorf("status of a healthy cluster:\n%s", out)
	}

	for _, action := range []string{"stop", "kill"} {
		out = mustCtl("sim", "agent", action, "i-node1")
		if !strings.Contains(out, "the agent on i-node1") || !strings.Contains(out, "sim agent start i-node1 --state "+state) {
			t.Errorf("agent %s output:\n%s", action, out)
		}
		if out, err := ctl("sim", "agent", action, "i-node1"); err == nil || !strings.Contains(out, "not running") {
			t.Errorf("agent %s of a stopped agent = %v, %q; want a refusal", action, err, out)
		}
		out, err := ctl("sim", "status")
		if err == nil || !strings.Contains(out, "i-node1") || !strings.Contains(out, "no answer") {
			t.Errorf("status with i-node1's agent %sed = %v:\n%s", action, err, out)
		}
		wantHints(t, out, state)

		out = mustCtl("sim", "agent", "start", "i-node1")
		if !strings.Contains(out, "started") {
			t.Errorf("agent start output:\n%s", out)
		}
		// Poll on the real condition: the restarted agent answers ready.
		deadline := time.Now().Add(60 * time.Second)
		for {
			out, err := ctl("sim", "status")
			if err == nil && strings.Count(out, " up     yes ") == 2 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("i-node1's agent not ready 60s after start (%v):\n%s", err, out)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	if out, err := ctl("sim", "agent", "start", "i-node1"); err == nil || !strings.Contains(out, "running already") {
		t.Errorf("start of a running agent = %v, %q", err, out)
	}
	if out, err := ctl("sim", "agent", "stop", "i-node9"); err == nil || !strings.Contains(out, "no node i-node9") {
		t.Errorf("stop on a missing node = %v, %q", err, out)
	}
	mustCtl("sim", "pod", "add", "i-node1", "after-restart")
}

// `sim up` on the state directory of a killed run first removes what that
// run recorded (nobody owns it any more), then starts afresh.
func TestSimUpAfterAKilledCloudRemovesItsLeftoversFirst(t *testing.T) {
	state, prefix, _, mustCtl := simCLI(t)
	mustCtl("sim", "up")
	mustCtl("sim", "pod", "add", "i-node1", "stale")
	pid := ownerPID(t, state)
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); syscall.Kill(pid, 0) == nil && time.Now().Before(deadline); {
		time.Sleep(50 * time.Millisecond)
	}
	out := mustCtl("sim", "up")
	if !strings.Contains(out, "removed leftover namespace "+prefix+"pod-stale") || !strings.Contains(out, "local cloud up") {
		t.Errorf("sim up after a killed run:\n%s", out)
	}
	if out := mustCtl("sim", "pod", "list"); strings.Contains(out, "stale") {
		t.Errorf("the killed run's pod is still listed:\n%s", out)
	}
	mustCtl("sim", "pod", "add", "i-node1", "fresh")
}
