package dataplane

import (
	"strings"
	"testing"

	"github.com/vishvananda/netlink"

	"github.com/vpcnet/vpcnet/dataplane/netnstest"
)

// hostVethIndex is the index of the pod's host veth, or 0 when it is gone.
func (n *testNode) hostVethIndex(t *testing.T, name string) int {
	t.Helper()
	index := 0
	netnstest.Do(t, n.node, func() error {
		if l, err := netlink.LinkByName(name); err == nil {
			index = l.Attrs().Index
		}
		return nil
	})
	return index
}

func TestUnroutePodLeavesOnlyTheVethAndDeleteVethTakesIt(t *testing.T) {
	n := newReadyNode(t, nil)
	p := n.addPod(t, "pod-b", "10.0.1.60", 2)
	ctx := testContext(t)
	want := n.hostVethIndex(t, p.cfg.HostVethName)
	index, err := n.dp.UnroutePod(ctx, p.cfg)
	if err != nil || index != want {
		t.Fatalf("UnroutePod = %d, %v; want the host veth's index %d", index, err, want)
	}
	// Nothing routes to the pod; its veth pair is still there.
	netnstest.Do(t, n.node, func() error {
		routes, err := netlink.RouteGet(p.cfg.Addr.AsSlice())
		if err == nil && len(routes) > 0 && routes[0].LinkIndex == index {
			t.Errorf("the node still routes %s to the pod's veth", p.cfg.Addr)
		}
		return nil
	})
	for _, r := range rulesIn(t, n.node) {
		if strings.Contains(r, p.cfg.Addr.String()) {
			t.Errorf("rule of %s after UnroutePod: %s", p.cfg.Addr, r)
		}
	}
	if n.hostVethIndex(t, p.cfg.HostVethName) != index {
		t.Fatal("UnroutePod deleted the veth, which it leaves to DeleteVeth")
	}
	// A second UnroutePod finds nothing routed: DelPod's case.
	if again, err := n.dp.UnroutePod(ctx, p.cfg); err != nil || again != 0 {
		t.Errorf("UnroutePod again = %d, %v; want 0", again, err)
	}
	if err := n.dp.DeleteVeth(ctx, p.cfg.HostVethName, index); err != nil {
		t.Fatal(err)
	}
	if n.hostVethIndex(t, p.cfg.HostVethName) != 0 {
		t.Error("DeleteVeth left the veth")
	}
	if err := n.dp.DeleteVeth(ctx, p.cfg.HostVethName, index); err != nil {
		t.Errorf("DeleteVeth of a veth already gone = %v", err)
	}
	assertNoPodState(t, n)
}

// The agent deletes a veth after the DEL answered; a new sandbox of the
// same pod may have made one of the same name by then.
func TestDeleteVethSparesANewVethOfTheSameName(t *testing.T) {
	n := newReadyNode(t, nil)
	ctx := testContext(t)
	old := n.addPod(t, "pod-b", "10.0.1.60", 2)
	index, err := n.dp.UnroutePod(ctx, old.cfg)
	if err != nil || index == 0 {
		t.Fatalf("UnroutePod = %d, %v", index, err)
	}
	if err := n.dp.DelPod(ctx, old.cfg); err != nil {
		t.Fatal(err)
	}
	renewed := n.addPod(t, "pod-b", "10.0.1.60", 2)
	now := n.hostVethIndex(t, renewed.cfg.HostVethName)
	if now == index {
		t.Skip("the kernel gave the new veth the old index")
	}
	if err := n.dp.DeleteVeth(ctx, renewed.cfg.HostVethName, index); err != nil {
		t.Fatal(err)
	}
	if n.hostVethIndex(t, renewed.cfg.HostVethName) != now {
		t.Error("DeleteVeth of the old index deleted the new sandbox's veth")
	}
}
