package e2e

import (
	"context"
	"fmt"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/vpcnet/vpcnet/simcluster"
)

// addWithRetry creates a pod the way the kubelet does: a failed sandbox is
// torn down and tried again, until ctx ends.
func addWithRetry(ctx context.Context, n *simcluster.Node, name string) (*simcluster.Pod, []error) {
	var errs []error
	for {
		p, err := n.AddPod(ctx, name)
		if err == nil {
			return p, errs
		}
		errs = append(errs, err)
		select {
		case <-ctx.Done():
			return nil, errs
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// An m5.xlarge whose pool holds a single spare address gets 30 pods at
// once: the agent must grow by two ENIs while the ADDs wait, and every pod
// must end up with its own address.
func TestBurstOnANearlyEmptyPoolGivesEveryPodItsOwnAddress(t *testing.T) {
	c := startCluster(t, `
  - {id: i-burst, type: m5.xlarge, subnet: subnet-a}`, map[string][]string{"i-burst": {"WARM_IP_TARGET=1"}})
	n := c.Nodes[0]
	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	defer cancel()
	before, err := n.ENIs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(before) != 1 {
		t.Fatalf("the node starts with %d ENIs, want only its primary", len(before))
	}

	const pods = 30
	var wg sync.WaitGroup
	got := make([]*simcluster.Pod, pods)
	failures := make([][]error, pods)
	for i := range pods {
		wg.Go(func() { got[i], failures[i] = addWithRetry(ctx, n, fmt.Sprintf("burst-%d", i)) })
	}
	wg.Wait()

	owner := map[netip.Addr]string{}
	retried := 0
	for i, p := range got {
		if p == nil {
			t.Fatalf("burst-%d never got an address: %v", i, failures[i])
		}
		if len(failures[i]) > 0 {
			retried++
		}
		if prev, dup := owner[p.Addr]; dup {
			t.Errorf("%s and %s both got %s", prev, p.Name, p.Addr)
		}
		owner[p.Addr] = p.Name
		if _, _, ok := c.ENIOf(n.ID, p.Addr); !ok {
			t.Errorf("%s got %s, which EC2 has on no ENI of the node", p.Name, p.Addr)
		}
	}
	after, err := n.ENIs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("30 pods placed on %d ENIs; %d ADDs were retried by the runtime", len(after), retried)
	holders, err := n.Holders(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(holders) != pods {
		t.Errorf("the agent records %d holders, want %d", len(holders), pods)
	}
	for _, h := range holders {
		if owner[h.Address] == "" {
			t.Errorf("the agent says %s holds %s, which no pod has", h.ContainerID, h.Address)
		}
	}
}
