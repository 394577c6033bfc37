package main

import (
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/vishvananda/netlink"

	"github.com/vpcnet/vpcnet/dataplane/netnstest"
)

// envAWSNode names the directory of aws-node's programs (make
// aws-node-bins makes bin/aws-node), as the cluster tests read it.
const envAWSNode = "VPCNET_AWS_NODE_DIR"

// awsNodeEgress is aws-node's egress-cni entry for the world's node, the
// binary in a directory of the world's CNI path.
func (w *world) awsNodeEgress(t *testing.T) map[string]any {
	t.Helper()
	dir := os.Getenv(envAWSNode)
	if dir == "" {
		t.Skipf("needs aws-node's egress-cni: run make aws-node-bins and set %s=bin/aws-node", envAWSNode)
	}
	bin := filepath.Join(dir, "egress-cni")
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("%s=%s: %v", envAWSNode, dir, err)
	}
	if err := os.Symlink(bin, filepath.Join(binDir, "egress-cni")); err != nil && !os.IsExist(err) {
		t.Fatal(err)
	}
	e := w.entry(map[string]any{"type": "egress-cni", "pluginLogFile": filepath.Join(t.TempDir(), "egress-v4-plugin.log"), "pluginLogLevel": "DEBUG"})
	return e
}

// A node switching from aws-node keeps its pods: a pod aws-node's
// egress-cni wired has the same interface, address and routes as one
// vpcnet-egress-v4 wires, both reach the internet as the node side by
// side (aws-node's SNAT in iptables, vpcnet's in its nftables table), and
// vpcnet's DEL of the aws-node pod removes its interface and releases its
// address in the host-local directory both share, as aws-node's DEL of
// vpcnet's pod does.
func TestSwitchOverFromAWSNodesEgressCNI(t *testing.T) {
	w := newWorld(t)
	awsEntry := w.awsNodeEgress(t)
	seen := serveTCP(t, w.internet)
	old, ours := w.newPod(), w.newPod()
	if _, err := w.add(w.conf("0.4.0", awsEntry, old), old); err != nil {
		t.Fatalf("aws-node's ADD: %v", err)
	}
	if _, err := w.add(w.conf("1.1.0", w.entry(nil), ours), ours); err != nil {
		t.Fatalf("vpcnet's ADD: %v", err)
	}
	a, b := podShape(t, old), podShape(t, ours)
	t.Logf("pod v4if0 (aws-node and vpcnet alike):\n  %s\nnode:\n  %s", strings.Join(a, "\n  "), strings.Join(w.hostShape(ours), "\n  "))
	if !slices.Equal(a, b) {
		t.Errorf("pod wired by aws-node:\n  %s\nby vpcnet:\n  %s", strings.Join(a, "\n  "), strings.Join(b, "\n  "))
	}
	if a, b := w.hostShape(old), w.hostShape(ours); !slices.Equal(a, b) {
		t.Errorf("node side of aws-node's pod:\n  %s\nof vpcnet's:\n  %s", strings.Join(a, "\n  "), strings.Join(b, "\n  "))
	}
	for _, p := range []pod{old, ours} {
		if err := talkTCP(p.ns, internetIP+":80"); err != nil {
			t.Fatalf("pod %s to %s: %v", p.rt.ContainerID, internetIP, err)
		}
		if got := <-seen; got != netip.MustParseAddr(nodeIP) {
			t.Errorf("internet host saw pod %s as %s, want the node's %s", p.rt.ContainerID, got, nodeIP)
		}
	}
	oldAddr := podEgressAddr(t, old).Addr()
	if err := w.del(w.conf("0.4.0", w.entry(nil), old), old); err != nil {
		t.Fatalf("vpcnet's DEL of aws-node's pod: %v", err)
	}
	if got := podEgressAddr(t, old); got.IsValid() {
		t.Errorf("aws-node's pod still has %s after vpcnet's DEL", got)
	}
	if got := w.allocated(); slices.Contains(got, oldAddr.String()) || len(got) != 1 {
		t.Errorf("host-local holds %v after vpcnet's DEL of aws-node's pod at %s, want only vpcnet's pod", got, oldAddr)
	}
	// Switching back: aws-node's DEL of vpcnet's pod releases its address
	// (the pod's namespace, and v4if0 with it, goes with the sandbox).
	if err := w.del(w.conf("1.1.0", awsEntry, ours), ours); err != nil {
		t.Fatalf("aws-node's DEL of vpcnet's pod: %v", err)
	}
	if got := w.allocated(); len(got) != 0 {
		t.Errorf("host-local holds %v after aws-node's DEL of vpcnet's pod", got)
	}
}

// podShape is the pod's v4if0: its addresses and routes, with the pod's
// own address written POD.
func podShape(t *testing.T, p pod) []string {
	t.Helper()
	addr := podEgressAddr(t, p).Addr().String()
	var out []string
	netnstest.Do(t, p.ns, func() error {
		l, err := netlink.LinkByName("v4if0")
		if err != nil {
			return err
		}
		addrs, err := netlink.AddrList(l, netlink.FAMILY_V4)
		if err != nil {
			return err
		}
		for _, a := range addrs {
			out = append(out, "addr "+a.IPNet.String())
		}
		routes, err := netlink.RouteList(l, netlink.FAMILY_V4)
		if err != nil {
			return err
		}
		for _, r := range routes {
			out = append(out, fmt.Sprintf("route %v via %v src %v scope %v mtu %d", r.Dst, r.Gw, r.Src, r.Scope, l.Attrs().MTU))
		}
		return nil
	})
	for i := range out {
		out[i] = strings.ReplaceAll(out[i], addr, "POD")
	}
	slices.Sort(out)
	return out
}

// hostShape is the node's side of p's egress: the route to the pod and
// the addresses of the link it goes over, with the pod's address written
// POD.
func (w *world) hostShape(p pod) []string {
	w.t.Helper()
	addr := podEgressAddr(w.t, p).Addr().String()
	var out []string
	netnstest.Do(w.t, w.node, func() error {
		routes, err := netlink.RouteListFiltered(netlink.FAMILY_V4, &netlink.Route{Dst: ipnet(addr + "/32")}, netlink.RT_FILTER_DST)
		if err != nil || len(routes) != 1 {
			return fmt.Errorf("routes to %s: %v %w", addr, routes, err)
		}
		l, err := netlink.LinkByIndex(routes[0].LinkIndex)
		if err != nil {
			return err
		}
		out = append(out, fmt.Sprintf("route %v scope %v dev %s up %v mtu %d", routes[0].Dst, routes[0].Scope, l.Type(), l.Attrs().OperState == netlink.OperUp, l.Attrs().MTU))
		addrs, err := netlink.AddrList(l, netlink.FAMILY_V4)
		if err != nil {
			return err
		}
		for _, a := range addrs {
			out = append(out, fmt.Sprintf("addr %v scope %v", a.IPNet, a.Scope))
		}
		return nil
	})
	for i := range out {
		out[i] = strings.ReplaceAll(out[i], addr, "POD")
	}
	slices.Sort(out)
	return out
}
