package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/vpcnet/vpcnet/simcluster"
)

// Issue 12, point 7 (seed 000: a pod started before its credential agent
// took the node's IAM role from IMDS). VPCNET_POD_IMDS=deny on i-a: its
// pods cannot reach IMDS, the node itself (hostNetwork pods, the agent)
// still can; i-b keeps the default, allow, and its pods reach it.
func TestPodIMDSDenyKeepsPodsFromTheNodesCredentials(t *testing.T) {
	c := startCluster(t, twoNodes, map[string][]string{"i-a": {"VPCNET_POD_IMDS=deny"}})
	denied, allowed := c.Nodes[0], c.Nodes[1]
	if denied.ID != "i-a" {
		denied, allowed = allowed, denied
	}
	ctx := t.Context()
	p, err := denied.AddPod(ctx, "no-imds")
	if err != nil {
		t.Fatal(err)
	}
	short, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	if id, err := imdsGet(short, p.NetNS, "instance-id"); err == nil {
		t.Errorf("a pod on the node with VPCNET_POD_IMDS=deny read IMDS: instance %q", id)
	}
	if id, err := imdsGet(ctx, denied.NetNS, "instance-id"); err != nil || strings.TrimSpace(id) != denied.ID {
		t.Errorf("the node itself (hostNetwork) reads IMDS as %q, %v; want %s", id, err, denied.ID)
	}
	q, err := allowed.AddPod(ctx, "imds-ok")
	if err != nil {
		t.Fatal(err)
	}
	if id, err := imdsGet(ctx, q.NetNS, "instance-id"); err != nil || strings.TrimSpace(id) != allowed.ID {
		t.Errorf("a pod on the node with VPCNET_POD_IMDS=allow reads IMDS as %q, %v; want %s", id, err, allowed.ID)
	}
	// Pod traffic elsewhere is untouched: the two pods still talk.
	if seen, err := simcluster.Probe(ctx, p.Endpoint(), q.Endpoint()); err != nil || seen != p.Addr {
		t.Errorf("pod on the denying node -> pod on the other: seen as %s, %v", seen, err)
	}
}
