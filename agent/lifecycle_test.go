package agent

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestCorruptCheckpointStopsTheAgentAndIsNeverOverwritten(t *testing.T) {
	w := newWorld(t)
	n := w.node("i-node1", nil)
	path := filepath.Join(n.env["VPCNET_STATE_DIR"], "checkpoint.json")
	garbage := []byte(`{"version":"vpcnet/1","assignments":[{"network":"aws-cni"`)
	if err := os.WriteFile(path, garbage, 0o600); err != nil {
		t.Fatal(err)
	}
	a := n.start(t)
	select {
	case err := <-a.done:
		if err == nil || !strings.Contains(err.Error(), path) {
			t.Fatalf("Run = %v, want an error naming %s", err, path)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("agent kept running on a corrupt checkpoint")
	}
	a.once.Do(func() {}) // already stopped
	got, _ := os.ReadFile(path)
	if string(got) != string(garbage) {
		t.Fatalf("corrupt checkpoint was rewritten: %q", got)
	}
	if _, err := os.Stat(filepath.Join(n.env["VPCNET_CNI_CONF_DIR"], "10-vpcnet.conflist")); err == nil {
		t.Fatal("CNI config written by an agent that never became ready")
	}
}

func TestShutdownIsCleanAndLeavesTheCNIConfigInPlace(t *testing.T) {
	w := newWorld(t)
	n := w.node("i-node1", nil)
	a := n.start(t)
	a.waitReady(t)
	// The conditions turn ready before the write of the configuration
	// starts (the socket's in Run, the write at the owner's next step):
	// a stop in between leaves none, as a node stopped before it was
	// ready would. What is tested is a stop after it.
	deadline := time.Now().Add(20 * time.Second)
	for a.confState.Load() != confWritten {
		if time.Now().After(deadline) {
			t.Fatal("CNI configuration not written 20 s after the agent was ready")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := a.stop(); err != nil {
		t.Fatalf("shutdown returned %v, want a clean exit", err)
	}
	if _, err := os.Stat(filepath.Join(n.env["VPCNET_CNI_CONF_DIR"], "10-vpcnet.conflist")); err != nil {
		t.Fatalf("CNI config gone after shutdown: %v", err)
	}
	if _, err := os.Stat(n.env["VPCNET_SOCKET"]); err == nil {
		t.Fatal("plugin socket still present after shutdown: the plugin would dial a dead agent")
	}
}
