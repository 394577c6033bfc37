package dataplane

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/vishvananda/netlink"

	"github.com/vpcnet/vpcnet/dataplane/netnstest"
)

// The test node: eth0 (the primary ENI) is a veth to a "world" namespace
// that plays the VPC router (10.0.0.1) and an internet host
// (198.51.100.1); eth1, the secondary ENI, is a veth to an empty "sink"
// namespace and appears when a test attaches it.
const (
	primaryMAC = "02:00:00:00:00:10"
	eni1MAC    = "02:00:00:00:00:11"
	primaryIP  = "10.0.0.10"
	routerIP   = "10.0.0.1"
	internetIP = "198.51.100.1"
	vpcCIDR    = "10.0.0.0/16"
	eni1IP     = "10.0.1.20"
	eni1Subnet = "10.0.1.0/24"
)

type testNode struct {
	node, world, sink ns.NetNS
	dp                *Dataplane
}

func newTestNode(t *testing.T) *testNode {
	t.Helper()
	n := &testNode{node: netnstest.NewNS(t), world: netnstest.NewNS(t), sink: netnstest.NewNS(t)}
	netnstest.Do(t, n.node, func() error {
		veth := &netlink.Veth{
			LinkAttrs:     netlink.LinkAttrs{Name: "eth0", HardwareAddr: mustMAC(primaryMAC), MTU: 1500},
			PeerName:      "wan0",
			PeerNamespace: netlink.NsFd(int(n.world.Fd())),
		}
		if err := netlink.LinkAdd(veth); err != nil {
			return fmt.Errorf("create eth0: %w", err)
		}
		if err := upWithAddrs("eth0", primaryIP+"/24"); err != nil {
			return err
		}
		eth0, _ := netlink.LinkByName("eth0")
		return netlink.RouteAdd(&netlink.Route{
			LinkIndex: eth0.Attrs().Index, Gw: net.ParseIP(routerIP),
			Dst: ipNet(netip.MustParsePrefix("0.0.0.0/0")),
		})
	})
	netnstest.Do(t, n.world, func() error {
		return upWithAddrs("wan0", routerIP+"/24", internetIP+"/32")
	})
	dp, err := New(Options{NetNS: n.node.Path(), PollInterval: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	n.dp = dp
	return n
}

func (n *testNode) hostConfig() HostConfig {
	return HostConfig{
		PrimaryMAC: mustMAC(primaryMAC),
		PrimaryIP:  netip.MustParseAddr(primaryIP),
		VPCCIDRs:   []netip.Prefix{netip.MustParsePrefix(vpcCIDR)},
		MTU:        9001,
	}
}

func (n *testNode) eni1() ENIConfig {
	return ENIConfig{
		MAC: mustMAC(eni1MAC), DeviceIndex: 1,
		PrimaryIP: netip.MustParseAddr(eni1IP), SubnetCIDR: netip.MustParsePrefix(eni1Subnet),
	}
}

// attachENI1 makes eth1 appear, as the kernel does some time after EC2
// attaches an ENI. Its peer sits alone in the sink namespace, which
// receives and drops whatever leaves through eth1.
func (n *testNode) attachENI1(t *testing.T) {
	t.Helper()
	netnstest.Do(t, n.node, func() error {
		return netlink.LinkAdd(&netlink.Veth{
			LinkAttrs:     netlink.LinkAttrs{Name: "eth1", HardwareAddr: mustMAC(eni1MAC), MTU: 1500},
			PeerName:      "sink0",
			PeerNamespace: netlink.NsFd(int(n.sink.Fd())),
		})
	})
	netnstest.Do(t, n.sink, func() error { return upWithAddrs("sink0") })
}

func upWithAddrs(name string, addrs ...string) error {
	for _, ifname := range []string{"lo", name} {
		l, err := netlink.LinkByName(ifname)
		if err != nil {
			return fmt.Errorf("find %s: %w", ifname, err)
		}
		if err := netlink.LinkSetUp(l); err != nil {
			return err
		}
	}
	l, _ := netlink.LinkByName(name)
	for _, a := range addrs {
		if err := netlink.AddrAdd(l, &netlink.Addr{IPNet: ipNet(netip.MustParsePrefix(a))}); err != nil {
			return fmt.Errorf("add %s to %s: %w", a, name, err)
		}
	}
	return nil
}

func mustMAC(s string) net.HardwareAddr {
	m, err := net.ParseMAC(s)
	if err != nil {
		panic(err)
	}
	return m
}

// rulesIn renders the IPv4 policy rules of n other than the kernel's
// defaults (0 local, 32766 main, 32767 default), like `ip rule`.
func rulesIn(t *testing.T, n ns.NetNS) []string {
	t.Helper()
	var out []string
	netnstest.Do(t, n, func() error {
		rules, err := netlink.RuleList(netlink.FAMILY_V4)
		if err != nil {
			return err
		}
		for _, r := range rules {
			if r.Priority == 0 || r.Priority == 32766 || r.Priority == 32767 {
				continue
			}
			s := fmt.Sprintf("%d: from %s", r.Priority, orAll(r.Src))
			if r.Dst != nil {
				s += " to " + r.Dst.String()
			}
			if r.Mask != nil {
				s += fmt.Sprintf(" fwmark %#x/%#x", r.Mark, *r.Mask)
			}
			table := fmt.Sprint(r.Table)
			if r.Table == 254 {
				table = "main"
			}
			out = append(out, s+" lookup "+table)
		}
		return nil
	})
	slices.Sort(out)
	return out
}

func orAll(n *net.IPNet) string {
	if n == nil {
		return "all"
	}
	return n.String()
}

// routesIn renders the IPv4 routes of one table of n, like `ip route show
// table T`, sorted.
func routesIn(t *testing.T, n ns.NetNS, table int) []string {
	t.Helper()
	var out []string
	netnstest.Do(t, n, func() error {
		routes, err := netlink.RouteListFiltered(netlink.FAMILY_V4, &netlink.Route{Table: table}, netlink.RT_FILTER_TABLE)
		if err != nil {
			return err
		}
		for _, r := range routes {
			dst := "default"
			if r.Dst != nil && r.Dst.String() != "0.0.0.0/0" {
				dst = strings.TrimSuffix(r.Dst.String(), "/32")
			}
			s := dst
			if r.Gw != nil {
				s += " via " + r.Gw.String()
			}
			l, err := netlink.LinkByIndex(r.LinkIndex)
			if err != nil {
				return err
			}
			s += " dev " + l.Attrs().Name
			if r.Scope == netlink.SCOPE_LINK {
				s += " scope link"
			}
			if r.Src != nil {
				s += " src " + r.Src.String()
			}
			out = append(out, s)
		}
		return nil
	})
	slices.Sort(out)
	return out
}

// nftList returns `nft list table ip vpcnet` run inside n, or skips when
// the nft CLI is not installed (apt-get install nftables).
func nftList(t *testing.T, n ns.NetNS) string {
	t.Helper()
	return nftListFamily(t, n, "ip")
}

// nftListFamily is nftList for table vpcnet of family ("ip", "ip6"); ""
// when it does not exist.
func nftListFamily(t *testing.T, n ns.NetNS, family string) string {
	t.Helper()
	if _, err := exec.LookPath("nft"); err != nil {
		t.Skip("nft CLI not installed (apt-get install nftables): cannot read the rule set as text")
	}
	var out []byte
	netnstest.Do(t, n, func() error {
		var err error
		// A child process starts in the namespace of the thread forking it.
		out, err = exec.Command("nft", "list", "table", family, TableName).CombinedOutput()
		if err != nil && strings.Contains(string(out), "No such file or directory") {
			out, err = nil, nil
		}
		if err != nil {
			return fmt.Errorf("nft list: %v: %s", err, out)
		}
		return nil
	})
	return strings.TrimSpace(string(out))
}

func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func diffLines(t *testing.T, what string, got, want []string) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Errorf("%s:\ngot:\n  %s\nwant:\n  %s", what, strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}
}
