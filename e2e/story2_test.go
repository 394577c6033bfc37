package e2e

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/vpcnet/vpcnet/doctor"
	"github.com/vpcnet/vpcnet/simcluster"
)

// Story 2: after a restart the agent counted live pods' addresses unused
// and released them. Here an older checkpoint is swapped in while the
// agent is stopped, so two live pods are missing from it. The restarted
// agent must hold their addresses (quarantine) and give them to no new
// pod; doctor reports them with the fix.
func TestStory2CheckpointOlderThanThePods(t *testing.T) {
	c := startCluster(t, twoNodes, nil)
	n := c.Nodes[0]
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	add := func(name string) *simcluster.Pod {
		t.Helper()
		p, err := n.AddPod(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	add("old-0")
	add("old-1")
	cpPath := filepath.Join(n.Dir, "lib", "checkpoint.json")
	older, err := os.ReadFile(cpPath)
	if err != nil {
		t.Fatal(err)
	}
	live := []*simcluster.Pod{add("new-0"), add("new-1")}

	if err := n.StopAgent(10 * time.Second); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(cpPath, older, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := n.StartAgent(); err != nil {
		t.Fatal(err)
	}
	if err := n.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}

	// Before any new pod: the host routes both pods the checkpoint on
	// disk does not name, whatever the agent made of it.
	first := runDoctor(t, n, "--skip", "kubernetes")
	for _, l := range live {
		first.wantFinding(t, "checkpoint-behind-host", doctor.Error, l.Addr.String()+" via eni", "restore the newest checkpoint")
	}

	// What a pod would see if the agent trusted the old checkpoint: a new
	// pod given the address of one that still lives.
	for i := range 6 {
		p, err := n.AddPod(ctx, "after-"+string(rune('a'+i)))
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range live {
			if p.Addr == l.Addr {
				t.Errorf("pod %s got %s, the address of live pod %s missing from the older checkpoint", p.Name, p.Addr, l.Name)
			}
		}
	}

	// The agent's own account: the addresses it holds for pods its
	// checkpoint did not name. (Fails until the agent quarantines them:
	// the known defect after a restart with an older checkpoint.)
	res := runDoctor(t, n, "--skip", "kubernetes")
	for _, l := range live {
		res.wantFinding(t, "addresses-quarantined", doctor.Warning, l.Addr.String(), "never detach the ENI")
	}
}
