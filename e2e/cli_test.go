package e2e

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

type ctlFunc func(args ...string) (string, error)

// simCLI runs vpcnetctl with a state directory of the test's own, and runs
// `sim down` when the test ends.
func simCLI(t *testing.T) (state string, ctl ctlFunc, mustCtl func(args ...string) string) {
	state = t.TempDir()
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
	return state, ctl, mustCtl
}

// The by-hand workflow: `sim up` keeps a cluster running in the
// background, pods come and go from other commands, `sim down` removes
// everything.
func TestSimUpPodAddDelDownLeavesNothing(t *testing.T) {
	_, ctl, mustCtl := simCLI(t)
	out := mustCtl("sim", "up")
	if !strings.Contains(out, "i-node1") || !strings.Contains(out, "i-node2") {
		t.Fatalf("sim up does not list the nodes:\n%s", out)
	}
	if out, err := ctl("sim", "up"); err == nil || !strings.Contains(out, "already running") {
		t.Errorf("a second sim up = %v, %q; want a refusal naming the running cloud", err, out)
	}
	out = mustCtl("sim", "pod", "add", "i-node1", "web-1")
	if !strings.Contains(out, "web-1 on i-node1: 10.0.0.") {
		t.Errorf("pod add output %q does not show the pod's VPC address", out)
	}
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
	if !strings.Contains(out, "nothing of the local cloud is left") {
		t.Errorf("sim down output:\n%s", out)
	}
	if left := namespaces(t, "vpcsim-"); len(left) > 0 {
		t.Errorf("namespaces left after sim down: %v", left)
	}
}

// When the process holding the cloud is killed outright, its agents die
// with it and `sim down` removes the namespaces it left.
func TestSimDownCleansUpAfterAKilledCloud(t *testing.T) {
	state, _, mustCtl := simCLI(t)
	mustCtl("sim", "up")
	mustCtl("sim", "pod", "add", "i-node2", "orphan")
	data, err := os.ReadFile(filepath.Join(state, "cluster.json"))
	if err != nil {
		t.Fatal(err)
	}
	var st struct{ PID int }
	if err := json.Unmarshal(data, &st); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(st.PID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	// Wait until it is gone (a zombie no one reaps still counts as gone
	// for the namespaces: its descriptors are closed).
	for deadline := time.Now().Add(10 * time.Second); syscall.Kill(st.PID, 0) == nil && time.Now().Before(deadline); {
		time.Sleep(50 * time.Millisecond)
	}
	if len(namespaces(t, "vpcsim-")) == 0 {
		t.Fatal("the killed cloud left no namespaces; the test would prove nothing")
	}
	out := mustCtl("sim", "down")
	if !strings.Contains(out, "removed leftover namespace") {
		t.Errorf("sim down does not say what it removed:\n%s", out)
	}
	if left := namespaces(t, "vpcsim-"); len(left) > 0 {
		t.Errorf("namespaces left after sim down: %v", left)
	}
}
