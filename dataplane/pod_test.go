package dataplane

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/vpcnet/vpcnet/dataplane/netnstest"
)

type testPod struct {
	ns  ns.NetNS
	cfg PodConfig
}

// newReadyNode is a node after SetupHost and SetupENI of eth1 (table 2).
func newReadyNode(t *testing.T, mutate func(*HostConfig)) *testNode {
	t.Helper()
	n := newTestNode(t)
	cfg := n.hostConfig()
	if mutate != nil {
		mutate(&cfg)
	}
	if err := n.dp.SetupHost(testContext(t), cfg); err != nil {
		t.Fatal(err)
	}
	n.attachENI1(t)
	if err := n.dp.SetupENI(testContext(t), n.eni1()); err != nil {
		t.Fatal(err)
	}
	return n
}

// addPod wires pod default/name at addr on the ENI with table (0: primary).
func (n *testNode) addPod(t *testing.T, name, addr string, table int) testPod {
	t.Helper()
	p := testPod{ns: netnstest.NewNS(t)}
	p.cfg = PodConfig{
		NetNS: p.ns.Path(), IfName: "eth0",
		HostVethName: HostVethName("eni", "default", name),
		Addr:         netip.MustParseAddr(addr), RouteTable: table,
	}
	netnstest.Do(t, p.ns, func() error { return upWithAddrs("lo") })
	links, err := n.dp.AddPod(testContext(t), p.cfg)
	if err != nil {
		t.Fatalf("AddPod %s: %v", name, err)
	}
	if links.Host.Name != p.cfg.HostVethName || links.Pod.Name != "eth0" || len(links.Host.MAC) != 6 || len(links.Pod.MAC) != 6 {
		t.Errorf("AddPod %s returned links %+v", name, links)
	}
	return p
}

func TestAddPodWiresBothSides(t *testing.T) {
	n := newReadyNode(t, nil)
	a := n.addPod(t, "pod-a", "10.0.0.50", 0)
	b := n.addPod(t, "pod-b", "10.0.1.60", 2)
	vethA, vethB := a.cfg.HostVethName, b.cfg.HostVethName

	for _, p := range []testPod{a, b} {
		netnstest.Do(t, p.ns, func() error {
			diffLines(t, "pod links", linkNames(t), []string{"eth0", "lo"})
			eth0, err := netlink.LinkByName("eth0")
			if err != nil {
				return err
			}
			addrs, err := netlink.AddrList(eth0, netlink.FAMILY_V4)
			if err != nil {
				return err
			}
			if len(addrs) != 1 || addrs[0].IPNet.String() != p.cfg.Addr.String()+"/32" {
				t.Errorf("pod eth0 addresses = %v, want %s/32", addrs, p.cfg.Addr)
			}
			if eth0.Attrs().MTU != 9001 {
				t.Errorf("pod eth0 MTU = %d, want 9001", eth0.Attrs().MTU)
			}
			neighs, err := netlink.NeighList(eth0.Attrs().Index, netlink.FAMILY_V4)
			if err != nil {
				return err
			}
			want := hostMAC(t, n, p.cfg.HostVethName)
			if !slices.ContainsFunc(neighs, func(nb netlink.Neigh) bool {
				return nb.IP.String() == "169.254.1.1" && nb.State == netlink.NUD_PERMANENT && nb.HardwareAddr.String() == want
			}) {
				t.Errorf("pod neighbours %v lack 169.254.1.1 lladdr %s PERMANENT", neighs, want)
			}
			return nil
		})
		diffLines(t, "pod main table", routesIn(t, p.ns, 254), []string{
			"169.254.1.1 dev eth0 scope link",
			"default via 169.254.1.1 dev eth0",
		})
		if err := n.dp.CheckPod(testContext(t), p.cfg); err != nil {
			t.Errorf("CheckPod: %v", err)
		}
	}

	diffLines(t, "node main table", routesIn(t, n.node, 254), []string{
		"10.0.0.0/24 dev eth0 scope link src 10.0.0.10",
		"10.0.0.50 dev " + vethA + " scope link",
		"10.0.1.60 dev " + vethB + " scope link",
		"default via 10.0.0.1 dev eth0",
	})
	diffLines(t, "node rules", rulesIn(t, n.node), []string{
		"1024: from all fwmark 0x80/0x80 lookup main",
		"1536: from 10.0.1.60/32 lookup 2",
		"32765: from 10.0.1.20/32 lookup 2",
		"512: from all to 10.0.0.50/32 lookup main",
		"512: from all to 10.0.1.60/32 lookup main",
	})
	got, err := n.dp.PodAddrs(testContext(t))
	if err != nil {
		t.Fatal(err)
	}
	want := []PodRoute{{netip.MustParseAddr("10.0.0.50"), vethA}, {netip.MustParseAddr("10.0.1.60"), vethB}}
	if !slices.Equal(got, want) {
		t.Errorf("PodAddrs = %v, want %v", got, want)
	}
}

func TestDelPodRemovesEverythingAndCanRepeat(t *testing.T) {
	n := newReadyNode(t, nil)
	a := n.addPod(t, "pod-a", "10.0.0.50", 0)
	b := n.addPod(t, "pod-b", "10.0.1.60", 2)
	for _, p := range []testPod{a, b} {
		for range 2 {
			if err := n.dp.DelPod(testContext(t), p.cfg); err != nil {
				t.Fatalf("DelPod: %v", err)
			}
		}
		netnstest.Do(t, p.ns, func() error {
			diffLines(t, "pod links after DelPod", linkNames(t), []string{"lo"})
			return nil
		})
	}
	assertNoPodState(t, n)
}

func TestDelPodSucceedsWhenTheNamespaceIsGone(t *testing.T) {
	n := newReadyNode(t, nil)
	b := n.addPod(t, "pod-b", "10.0.1.60", 2)
	netnstest.Remove(t, b.ns)
	for range 2 {
		if err := n.dp.DelPod(testContext(t), b.cfg); err != nil {
			t.Fatalf("DelPod: %v", err)
		}
	}
	assertNoPodState(t, n)
}

func TestDelPodWithoutAddressFindsItOnThePodInterface(t *testing.T) {
	n := newReadyNode(t, nil)
	b := n.addPod(t, "pod-b", "10.0.1.60", 2)
	cfg := b.cfg
	cfg.Addr = netip.Addr{}
	if err := n.dp.DelPod(testContext(t), cfg); err != nil {
		t.Fatal(err)
	}
	assertNoPodState(t, n)
}

// kubelet recreated the pod's sandbox (same veth name, new address) before
// the old sandbox's DEL arrived.
func TestLateDelOfAnOldSandboxSparesTheNewOne(t *testing.T) {
	n := newReadyNode(t, nil)
	old := n.addPod(t, "pod-a", "10.0.1.60", 2)
	current := n.addPod(t, "pod-a", "10.0.1.61", 2)
	if err := n.dp.DelPod(testContext(t), old.cfg); err != nil {
		t.Fatal(err)
	}
	if err := n.dp.CheckPod(testContext(t), current.cfg); err != nil {
		t.Errorf("new sandbox damaged by the old one's DEL: %v", err)
	}
	diffLines(t, "rules", rulesIn(t, n.node), []string{
		"1024: from all fwmark 0x80/0x80 lookup main",
		"1536: from 10.0.1.61/32 lookup 2",
		"32765: from 10.0.1.20/32 lookup 2",
		"512: from all to 10.0.1.61/32 lookup main",
	})
}

// The address went to another pod (after its cooldown) before the first
// pod's DEL arrived.
func TestLateDelKeepsTheRulesOfAReassignedAddress(t *testing.T) {
	n := newReadyNode(t, nil)
	first := n.addPod(t, "pod-a", "10.0.1.60", 2)
	netnstest.Remove(t, first.ns)
	deleteLink(t, n.node, first.cfg.HostVethName) // the kernel does this once the namespace is freed
	second := n.addPod(t, "pod-b", "10.0.1.60", 2)
	if err := n.dp.DelPod(testContext(t), first.cfg); err != nil {
		t.Fatal(err)
	}
	if err := n.dp.CheckPod(testContext(t), second.cfg); err != nil {
		t.Errorf("the address's new owner lost its wiring: %v", err)
	}
}

func TestAddPodMovesAnAddressToItsNewENITable(t *testing.T) {
	n := newReadyNode(t, nil)
	// A rule 1536 from an earlier life of the address on table 3.
	netnstest.Do(t, n.node, func() error {
		r := netlink.NewRule()
		r.Priority, r.Table, r.Src = FromPodPriority, 3, ipNet(netip.MustParsePrefix("10.0.0.50/32"))
		return netlink.RuleAdd(r)
	})
	n.addPod(t, "pod-a", "10.0.0.50", 0)
	diffLines(t, "rules", rulesIn(t, n.node), []string{
		"1024: from all fwmark 0x80/0x80 lookup main",
		"32765: from 10.0.1.20/32 lookup 2",
		"512: from all to 10.0.0.50/32 lookup main",
	})
}

func TestCheckPodNamesEachMissingPiece(t *testing.T) {
	n := newReadyNode(t, nil)
	b := n.addPod(t, "pod-b", "10.0.1.60", 2)
	netnstest.Do(t, n.node, func() error {
		r := netlink.NewRule()
		r.Priority, r.Table, r.Src = FromPodPriority, 2, ipNet(netip.MustParsePrefix("10.0.1.60/32"))
		return netlink.RuleDel(r)
	})
	netnstest.Do(t, b.ns, func() error {
		eth0, err := netlink.LinkByName("eth0")
		if err != nil {
			return err
		}
		return netlink.NeighDel(&netlink.Neigh{LinkIndex: eth0.Attrs().Index, IP: net.ParseIP("169.254.1.1")})
	})
	err := n.dp.CheckPod(testContext(t), b.cfg)
	for _, want := range []string{`rule "1536: from 10.0.1.60/32 lookup 2" is missing`, "lacks permanent neighbour 169.254.1.1"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("CheckPod error = %v, want it to mention %q", err, want)
		}
	}
}

func TestAddPodRefusesATakenInterfaceName(t *testing.T) {
	n := newReadyNode(t, nil)
	podNS := netnstest.NewNS(t)
	netnstest.Do(t, podNS, func() error {
		return netlink.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "eth0"}, PeerName: "other"})
	})
	cfg := PodConfig{NetNS: podNS.Path(), IfName: "eth0", HostVethName: HostVethName("eni", "default", "pod-a"), Addr: netip.MustParseAddr("10.0.0.50")}
	_, err := n.dp.AddPod(testContext(t), cfg)
	if err == nil || !strings.Contains(err.Error(), "already has an interface eth0") {
		t.Fatalf("AddPod error = %v, want one saying eth0 exists", err)
	}
	assertNoPodState(t, n)
}

func TestAddPodReplacesAStaleHostVeth(t *testing.T) {
	n := newReadyNode(t, nil)
	stale := HostVethName("eni", "default", "pod-a")
	netnstest.Do(t, n.node, func() error {
		return netlink.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: stale}, PeerName: "stalepeer"})
	})
	a := n.addPod(t, "pod-a", "10.0.0.50", 0)
	if err := n.dp.CheckPod(testContext(t), a.cfg); err != nil {
		t.Error(err)
	}
}

// assertNoPodState checks that only node and ENI state is left.
func assertNoPodState(t *testing.T, n *testNode) {
	t.Helper()
	netnstest.Do(t, n.node, func() error {
		for _, name := range linkNames(t) {
			if strings.HasPrefix(name, "eni") {
				t.Errorf("host veth %s left behind", name)
			}
		}
		return nil
	})
	diffLines(t, "node main table", routesIn(t, n.node, 254), []string{
		"10.0.0.0/24 dev eth0 scope link src 10.0.0.10",
		"default via 10.0.0.1 dev eth0",
	})
	diffLines(t, "node rules", rulesIn(t, n.node), []string{
		"1024: from all fwmark 0x80/0x80 lookup main",
		"32765: from 10.0.1.20/32 lookup 2",
	})
}

func linkNames(t *testing.T) []string {
	t.Helper()
	links, err := netlink.LinkList()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, l := range links {
		out = append(out, l.Attrs().Name)
	}
	slices.Sort(out)
	return out
}

func hostMAC(t *testing.T, n *testNode, veth string) string {
	t.Helper()
	var mac string
	netnstest.Do(t, n.node, func() error {
		l, err := netlink.LinkByName(veth)
		if err != nil {
			return fmt.Errorf("host veth %s: %w", veth, err)
		}
		mac = l.Attrs().HardwareAddr.String()
		return nil
	})
	return mac
}

func deleteLink(t *testing.T, n ns.NetNS, name string) {
	t.Helper()
	netnstest.Do(t, n, func() error {
		l, err := netlink.LinkByName(name)
		if err != nil {
			return nil // already gone
		}
		// The kernel may delete it between the two calls, as it frees
		// the pod's namespace.
		if err := netlink.LinkDel(l); err != nil && !errors.Is(err, unix.ENODEV) {
			return err
		}
		return nil
	})
}
