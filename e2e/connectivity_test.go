package e2e

import (
	"fmt"
	"testing"

	"github.com/vpcnet/vpcnet/simcluster"
)

const twoNodes = `
  - {id: i-a, type: m5.large, subnet: subnet-a}
  - {id: i-b, type: m5.large, subnet: subnet-a}`

// Twenty pods on two m5.large nodes: more than a primary ENI's nine
// addresses per node, so some pods sit on a secondary ENI.
func TestPodsReachEachOtherAcrossNodesThroughTheVPC(t *testing.T) {
	c := startCluster(t, twoNodes, nil)
	ctx := t.Context()
	var pods []*simcluster.Pod
	onSecondary := map[*simcluster.Pod]bool{}
	for i := range 20 {
		n := c.Nodes[i%2]
		p, err := n.AddPod(ctx, fmt.Sprintf("web-%d", i))
		if err != nil {
			t.Fatal(err)
		}
		_, dev, ok := c.ENIOf(n.ID, p.Addr)
		if !ok {
			t.Fatalf("%s got %s, which EC2 has on no ENI of %s", p.Name, p.Addr, n.ID)
		}
		onSecondary[p] = dev > 0
		pods = append(pods, p)
	}
	secondary := 0
	for _, on := range onSecondary {
		if on {
			secondary++
		}
	}
	if secondary == 0 {
		t.Fatal("no pod landed on a secondary ENI; the test would not exercise policy routing")
	}

	t.Run("every pod reaches every other pod and both nodes", func(t *testing.T) {
		_, errs := c.CheckInsideVPC(ctx, pods)
		for _, err := range errs {
			t.Error(err)
		}
	})

	t.Run("traffic to the internet leaves with the node's primary address", func(t *testing.T) {
		for _, p := range pods {
			n, _ := c.Node(p.Node)
			seen, err := simcluster.Probe(ctx, p.Endpoint(), c.Internet())
			if err != nil {
				t.Errorf("%s (secondary ENI %v): %v", p.Name, onSecondary[p], err)
			} else if seen != n.PrimaryIP {
				t.Errorf("internet saw %s as %s, want the node's primary address %s", p.Name, seen, n.PrimaryIP)
			}
		}
	})

	t.Run("the VPC drops a secondary-ENI pod's traffic without its policy rule", func(t *testing.T) {
		var p *simcluster.Pod
		for _, q := range pods {
			if onSecondary[q] {
				p = q
				break
			}
		}
		n, _ := c.Node(p.Node)
		other := c.Nodes[0]
		if other == n {
			other = c.Nodes[1]
		}
		removed := delFromRule(t, n, p.Addr)
		if len(removed) == 0 {
			t.Fatalf("%s on a secondary ENI has no rule 1536", p.Name)
		}
		if _, err := simcluster.Probe(ctx, p.Endpoint(), other.Endpoint()); err == nil {
			t.Errorf("%s reached %s leaving by the primary ENI: the fabric does not enforce the source/destination check", p.Name, other.ID)
		}
		addRules(t, n, removed)
		if _, err := simcluster.Probe(ctx, p.Endpoint(), other.Endpoint()); err != nil {
			t.Errorf("with its rule back: %v", err)
		}
	})

	t.Run("CHECK passes for every pod", func(t *testing.T) {
		for _, p := range pods {
			n, _ := c.Node(p.Node)
			if err := n.CheckPod(ctx, p); err != nil {
				t.Errorf("CHECK %s: %v", p.Name, err)
			}
		}
	})

	t.Run("deleting every pod leaves nothing of ours on the nodes", func(t *testing.T) {
		for _, p := range pods {
			n, _ := c.Node(p.Node)
			if err := n.DelPod(ctx, p); err != nil {
				t.Error(err)
			}
		}
		for _, n := range c.Nodes {
			if left := leftAfterDel(t, n); len(left) > 0 {
				t.Errorf("%s still has %v", n.ID, left)
			}
			holders, err := n.Holders(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if len(holders) > 0 {
				t.Errorf("%s's agent still assigns %v", n.ID, holders)
			}
		}
	})
}
