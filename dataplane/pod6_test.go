package dataplane

import (
	"bufio"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/containernetworking/plugins/pkg/utils/sysctl"
	"github.com/vishvananda/netlink"

	"github.com/vpcnet/vpcnet/dataplane/netnstest"
)

// nodeIPv6 is the node's own IPv6 address on its primary ENI's /64.
const nodeIPv6 = "2600:1f14:abc:de01::10"

// newIPv6Node is a ready node whose primary interface has an IPv6
// address and which forwards IPv6, as an IPv6 node's host set-up makes it
// (SetupHost with HostConfig.IPv6, host6.go).
func newIPv6Node(t *testing.T) *testNode {
	t.Helper()
	n := newReadyNode(t, nil)
	netnstest.Do(t, n.node, func() error {
		if _, err := sysctl.Sysctl("net.ipv6.conf.all.forwarding", "1"); err != nil {
			return err
		}
		eth0, err := netlink.LinkByName("eth0")
		if err != nil {
			return err
		}
		return netlink.AddrAdd(eth0, &netlink.Addr{IPNet: ipNet(netip.MustParsePrefix(nodeIPv6 + "/64")), Flags: 0x02 /* IFA_F_NODAD */})
	})
	return n
}

// addPod6 wires IPv6 pod default/name at addr on the primary ENI.
func (n *testNode) addPod6(t *testing.T, name, addr string) testPod {
	t.Helper()
	p := testPod{ns: netnstest.NewNS(t)}
	p.cfg = PodConfig{NetNS: p.ns.Path(), IfName: "eth0", HostVethName: HostVethName("eni", "default", name),
		Addr: netip.MustParseAddr(addr), IPv6: true}
	if _, err := n.dp.AddPod(testContext(t), p.cfg); err != nil {
		t.Fatalf("AddPod %s: %v", name, err)
	}
	return p
}

// routes6In renders n's IPv6 main-table routes other than the kernel's
// link-local and multicast ones, like `ip -6 route`.
func routes6In(t *testing.T, n ns.NetNS) []string {
	t.Helper()
	var out []string
	netnstest.Do(t, n, func() error {
		routes, err := netlink.RouteListFiltered(netlink.FAMILY_V6, &netlink.Route{Table: mainTable}, netlink.RT_FILTER_TABLE)
		if err != nil {
			return err
		}
		for _, r := range routes {
			dst := "default"
			if r.Dst != nil && r.Dst.String() != "::/0" {
				dst = r.Dst.String()
			}
			if strings.HasPrefix(dst, "fe80::/64") || strings.HasPrefix(dst, "ff00::") {
				continue
			}
			l, err := netlink.LinkByIndex(r.LinkIndex)
			if err != nil {
				return err
			}
			s := dst
			if r.Gw != nil {
				s += " via " + r.Gw.String()
			}
			// IPv6 routes have no scope: the kernel reports universe.
			out = append(out, s+" dev "+l.Attrs().Name)
		}
		return nil
	})
	slices.Sort(out)
	return out
}

// rules6In renders n's IPv6 rules other than the kernel's defaults.
func rules6In(t *testing.T, n ns.NetNS) []string {
	t.Helper()
	var out []string
	netnstest.Do(t, n, func() error {
		rules, err := netlink.RuleList(netlink.FAMILY_V6)
		if err != nil {
			return err
		}
		for _, r := range rules {
			if r.Priority == 0 || r.Priority == 32766 {
				continue
			}
			out = append(out, fmt.Sprintf("%d: to %s lookup %d", r.Priority, orAll(r.Dst), r.Table))
		}
		return nil
	})
	slices.Sort(out)
	return out
}

// An IPv6 pod is wired as aws-node's IPv6 mode wires it: eth0 with the
// /128, a link route and the default route through fe80::1, a permanent
// neighbour entry for fe80::1 with the host veth's MAC and no IPv4 route;
// on the host a /128 route over the veth and rule 512; and the pods reach
// each other and the node.
func TestIPv6PodIsWiredAsAWSNodeWiresItAndReachable(t *testing.T) {
	n := newIPv6Node(t)
	a := n.addPod6(t, "pod-a", "2600:1f14:abc:de01:12::")
	b := n.addPod6(t, "pod-b", "2600:1f14:abc:de01:12::1")

	var hostMAC string
	netnstest.Do(t, n.node, func() error {
		l, err := netlink.LinkByName(a.cfg.HostVethName)
		if err != nil {
			return err
		}
		hostMAC = l.Attrs().HardwareAddr.String()
		for k, want := range map[string]string{"accept_ra": "0", "accept_redirects": "1", "forwarding": "0", "accept_dad": "0"} {
			if got, err := sysctl.Sysctl(fmt.Sprintf("net.ipv6.conf.%s.%s", a.cfg.HostVethName, k)); err != nil || got != want {
				t.Errorf("host veth %s = %q (%v), want %s", k, got, err, want)
			}
		}
		return nil
	})
	// The kernel adds the address's own /128 route.
	diffLines(t, "pod IPv6 routes", routes6In(t, a.ns), []string{"2600:1f14:abc:de01:12::/128 dev eth0", "default via fe80::1 dev eth0", "fe80::1/128 dev eth0"})
	netnstest.Do(t, a.ns, func() error {
		eth0, err := netlink.LinkByName("eth0")
		if err != nil {
			return err
		}
		addrs, err := netlink.AddrList(eth0, netlink.FAMILY_V6)
		if err != nil {
			return err
		}
		var global []string
		for _, ad := range addrs {
			if !ad.IP.IsLinkLocalUnicast() {
				global = append(global, ad.IPNet.String())
			}
		}
		diffLines(t, "pod IPv6 addresses", global, []string{"2600:1f14:abc:de01:12::/128"})
		if v4, err := netlink.RouteList(eth0, netlink.FAMILY_V4); err != nil || len(v4) != 0 {
			t.Errorf("IPv4 routes in an IPv6 pod: %v (%v)", v4, err)
		}
		neighs, err := netlink.NeighList(eth0.Attrs().Index, netlink.FAMILY_V6)
		if err != nil {
			return err
		}
		found := slices.ContainsFunc(neighs, func(nb netlink.Neigh) bool {
			return nb.IP.String() == "fe80::1" && nb.State == netlink.NUD_PERMANENT && nb.HardwareAddr.String() == hostMAC
		})
		if !found {
			t.Errorf("pod neighbours %v, want fe80::1 permanent at the host veth's %s", neighs, hostMAC)
		}
		return nil
	})
	host := routes6In(t, n.node)
	for _, p := range []testPod{a, b} {
		want := p.cfg.Addr.String() + "/128 dev " + p.cfg.HostVethName
		if !slices.Contains(host, want) {
			t.Errorf("node IPv6 routes %v lack %q", host, want)
		}
	}
	diffLines(t, "node IPv6 rules", rules6In(t, n.node), []string{
		"512: to 2600:1f14:abc:de01:12::/128 lookup 254", "512: to 2600:1f14:abc:de01:12::1/128 lookup 254"})

	for _, c := range []struct {
		from, toNS ns.NetNS
		to         netip.Addr
	}{{a.ns, b.ns, b.cfg.Addr}, {b.ns, a.ns, a.cfg.Addr}, {n.node, a.ns, a.cfg.Addr}, {a.ns, n.node, netip.MustParseAddr(nodeIPv6)}} {
		if err := talkTCP6(t, c.from, c.toNS, c.to); err != nil {
			t.Errorf("TCP to [%s]: %v", c.to, err)
		}
	}
}

// DEL of an IPv6 pod removes its veth, host route and rule 512, also when
// the plugin does not know the address (it is read from the pod), and is
// idempotent.
func TestIPv6PodDelRemovesEverythingItMade(t *testing.T) {
	n := newIPv6Node(t)
	a := n.addPod6(t, "pod-a", "2600:1f14:abc:de01:12::")
	b := n.addPod6(t, "pod-b", "2600:1f14:abc:de01:12::1")
	noAddr := b.cfg
	noAddr.Addr = netip.Addr{}
	for _, cfg := range []PodConfig{a.cfg, noAddr, a.cfg} {
		if err := n.dp.DelPod(testContext(t), cfg); err != nil {
			t.Fatalf("DelPod %s: %v", cfg.HostVethName, err)
		}
	}
	if r := rules6In(t, n.node); len(r) != 0 {
		t.Errorf("IPv6 rules left after DEL: %v", r)
	}
	for _, r := range routes6In(t, n.node) {
		if strings.Contains(r, "2600:1f14:abc:de01:12::") {
			t.Errorf("route left after DEL: %s", r)
		}
	}
	netnstest.Do(t, n.node, func() error {
		for _, p := range []testPod{a, b} {
			if _, err := netlink.LinkByName(p.cfg.HostVethName); err == nil {
				t.Errorf("host veth %s left after DEL", p.cfg.HostVethName)
			}
		}
		return nil
	})
}

func TestIPv6PodConfigRefusesAnAddressOfTheOtherFamily(t *testing.T) {
	base := PodConfig{NetNS: "/run/netns/x", IfName: "eth0", HostVethName: "eni0123456789a"}
	for _, c := range []struct {
		ipv6 bool
		addr string
		want string
	}{
		{true, "10.0.0.5", `address "10.0.0.5" is not a usable IPv6 address`},
		{true, "fe80::5", `address "fe80::5" is not a usable IPv6 address`},
		{true, "::ffff:10.0.0.5", `address "::ffff:10.0.0.5" is not a usable IPv6 address`},
		{false, "2600:1f14::5", `address "2600:1f14::5" is not a usable IPv4 address`},
	} {
		cfg := base
		cfg.IPv6, cfg.Addr = c.ipv6, netip.MustParseAddr(c.addr)
		if err := cfg.validate(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("validate(IPv6=%v, %s) = %v, want %q", c.ipv6, c.addr, err, c.want)
		}
	}
}

// talkTCP6 serves TCP at [to]:8080 in toNS and connects from inside from.
func talkTCP6(t *testing.T, from, toNS ns.NetNS, to netip.Addr) error {
	t.Helper()
	var ln net.Listener
	netnstest.Do(t, toNS, func() error {
		var err error
		ln, err = net.Listen("tcp6", netip.AddrPortFrom(to, 8080).String())
		return err
	})
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		line, _ := bufio.NewReader(c).ReadString('\n')
		fmt.Fprintf(c, "echo %s", line)
	}()
	var c net.Conn
	if err := from.Do(func(ns.NetNS) error {
		var err error
		c, err = net.DialTimeout("tcp6", netip.AddrPortFrom(to, 8080).String(), 3*time.Second)
		return err
	}); err != nil {
		return err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(3 * time.Second))
	if _, err := fmt.Fprintln(c, "hello"); err != nil {
		return err
	}
	reply, err := bufio.NewReader(c).ReadString('\n')
	if err != nil || reply != "echo hello\n" {
		return fmt.Errorf("reply %q: %v", reply, err)
	}
	return nil
}

// The host's pod routes, the agent's proof that a pod still uses its
// address whatever its checkpoint says, include IPv6 pods': without them
// an IPv6 node would count every pod unrouted and reclaim its address.
func TestPodAddrsListsIPv6PodsBesideIPv4Ones(t *testing.T) {
	n := newIPv6Node(t)
	v4 := n.addPod(t, "pod-4", "10.0.0.50", 0)
	v6 := n.addPod6(t, "pod-6", "2600:1f14:abc:de01:12::5")
	got, err := n.dp.PodAddrs(testContext(t))
	if err != nil {
		t.Fatal(err)
	}
	want := []PodRoute{{Addr: v4.cfg.Addr, HostVeth: v4.cfg.HostVethName}, {Addr: v6.cfg.Addr, HostVeth: v6.cfg.HostVethName}}
	if !slices.Equal(got, want) {
		t.Errorf("PodAddrs = %+v, want %+v", got, want)
	}
}

// CHECK of an IPv6 pod verifies what ADD made, and names what is gone.
func TestCheckPodOfAnIPv6PodNamesWhatIsMissing(t *testing.T) {
	n := newIPv6Node(t)
	a := n.addPod6(t, "pod-a", "2600:1f14:abc:de01:12::")
	if err := n.dp.CheckPod(testContext(t), a.cfg); err != nil {
		t.Fatalf("CheckPod of a freshly wired IPv6 pod: %v", err)
	}
	netnstest.Do(t, a.ns, func() error {
		eth0, err := netlink.LinkByName("eth0")
		if err != nil {
			return err
		}
		return netlink.NeighDel(&netlink.Neigh{LinkIndex: eth0.Attrs().Index, Family: netlink.FAMILY_V6, IP: net.ParseIP("fe80::1")})
	})
	err := n.dp.CheckPod(testContext(t), a.cfg)
	if err == nil || !strings.Contains(err.Error(), "pod lacks permanent neighbour fe80::1") {
		t.Errorf("CheckPod without the gateway's neighbour entry = %v", err)
	}
}
