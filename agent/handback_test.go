package agent

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/vpcnet/vpcnet/checkpoint"
)

// TestAStoppedAgentLeavesAWSNodeItsCheckpoint: a node switched back to
// the Amazon VPC CNI is restored by aws-node from its own ipam.json. The
// agent writes it when it stops, from its own checkpoint: the pods it
// wired are there under their attachment and pod names, and a pod deleted
// before the stop is not.
func TestAStoppedAgentLeavesAWSNodeItsCheckpoint(t *testing.T) {
	w := newWorld(t)
	n := w.node("i-node1", nil)
	a := n.start(t)
	a.waitReady(t)
	ctx := context.Background()
	kept, err := a.Add(ctx, key(1), pod(1))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Add(ctx, key(2), pod(2)); err != nil {
		t.Fatal(err)
	}
	if _, _, err := a.Del(ctx, key(2)); err != nil {
		t.Fatal(err)
	}
	path := n.env["VPCNET_AWS_VPC_CNI_CHECKPOINT"]
	if _, err := os.Stat(path); err == nil {
		t.Fatalf("%s written while the agent serves: aws-node's file is for after it stops", path)
	}
	if err := a.stop(); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("no checkpoint for aws-node after the agent stopped: %v (dir %s)", err, filepath.Dir(path))
	}
	st, err := checkpoint.Decode(data)
	if err != nil {
		t.Fatalf("aws-node's checkpoint does not decode: %v\n%s", err, data)
	}
	if len(st.Entries) != 1 || st.Entries[0].Key != key(1) || st.Entries[0].Addr != kept.Addr || st.Entries[0].Pod != pod(1) {
		t.Errorf("aws-node's checkpoint holds %+v, want only %s for %v", st.Entries, kept.Addr, pod(1))
	}
}
