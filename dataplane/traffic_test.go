package dataplane

import (
	"bufio"
	"fmt"
	"net"
	"net/netip"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/vishvananda/netlink"

	"github.com/vpcnet/vpcnet/dataplane/netnstest"
)

// Traffic tests: packets only ever travel between the test's namespaces.

func TestPodsOnTheNodeReachEachOther(t *testing.T) {
	n := newReadyNode(t, nil)
	a := n.addPod(t, "pod-a", "10.0.0.50", 0)
	b := n.addPod(t, "pod-b", "10.0.1.60", 2)
	for _, pair := range [][2]testPod{{a, b}, {b, a}} {
		from, to := pair[0], pair[1]
		if err := netnstest.Ping(from.ns, to.cfg.Addr, 2*time.Second); err != nil {
			t.Errorf("%s cannot ping %s: %v", from.cfg.Addr, to.cfg.Addr, err)
		}
		seen := serveTCP(t, to.ns, netip.AddrPortFrom(to.cfg.Addr, 8080))
		if err := talkTCP(from.ns, netip.AddrPortFrom(to.cfg.Addr, 8080)); err != nil {
			t.Errorf("TCP %s -> %s: %v", from.cfg.Addr, to.cfg.Addr, err)
		} else if got := <-seen; got != from.cfg.Addr {
			t.Errorf("%s saw the connection come from %s, want %s (no SNAT inside the VPC)", to.cfg.Addr, got, from.cfg.Addr)
		}
	}
}

func TestPodTrafficLeavingTheVPCIsSNATedToThePrimaryIP(t *testing.T) {
	n := newReadyNode(t, nil)
	pods := []testPod{n.addPod(t, "pod-a", "10.0.0.50", 0), n.addPod(t, "pod-b", "10.0.1.60", 2)}
	server := netip.AddrPortFrom(netip.MustParseAddr(internetIP), 443)
	seen := serveTCP(t, n.world, server)
	for _, p := range pods {
		// For the pod on eth1 this works only if the connmark routes the
		// SNATed connection out of eth0, whose address it now carries.
		if err := talkTCP(p.ns, server); err != nil {
			t.Errorf("pod %s -> %s: %v", p.cfg.Addr, server, err)
			continue
		}
		if got := <-seen; got.String() != primaryIP {
			t.Errorf("internet host saw pod %s as %s, want the node's primary IP %s", p.cfg.Addr, got, primaryIP)
		}
	}
}

func TestWithExternalSNATPodsLeaveByTheirOwnENIWithTheirOwnAddress(t *testing.T) {
	n := newReadyNode(t, func(c *HostConfig) { c.ExternalSNAT = true })
	a := n.addPod(t, "pod-a", "10.0.0.50", 0)
	b := n.addPod(t, "pod-b", "10.0.1.60", 2)
	server := netip.AddrPortFrom(netip.MustParseAddr(internetIP), 443)
	seen := serveTCP(t, n.world, server)
	// The VPC fabric knows which ENI holds each secondary address.
	netnstest.Do(t, n.world, func() error {
		wan, err := netlink.LinkByName("wan0")
		if err != nil {
			return err
		}
		return netlink.NeighSet(&netlink.Neigh{
			LinkIndex: wan.Attrs().Index, Family: netlink.FAMILY_V4, State: netlink.NUD_PERMANENT,
			IP: a.cfg.Addr.AsSlice(), HardwareAddr: mustMAC(primaryMAC),
		})
	})
	if err := talkTCP(a.ns, server); err != nil {
		t.Fatalf("pod on the primary ENI: %v", err)
	}
	if got := <-seen; got != a.cfg.Addr {
		t.Errorf("internet host saw %s, want the pod's own %s", got, a.cfg.Addr)
	}
	before := rxPackets(t, n.sink, "sink0")
	if err := talkTCP(b.ns, server); err == nil {
		t.Errorf("pod on eth1 reached the internet host through eth0; it should leave by eth1")
	}
	if after := rxPackets(t, n.sink, "sink0"); after <= before {
		t.Errorf("nothing left through eth1 (sink saw %d packets, before %d)", after, before)
	}
}

// NodePort: a connection enters on eth0 for the node's address and is
// DNATed to a pod on eth1. Its replies must leave by eth0, which only the
// connmark and rule 1024 achieve (rule 1536 would send them out of eth1).
func TestRepliesToConnectionsFromThePrimaryInterfaceLeaveByIt(t *testing.T) {
	n := newReadyNode(t, nil)
	b := n.addPod(t, "pod-b", "10.0.1.60", 2)
	nft(t, n.node, `table ip kube-proxy {
		chain prerouting {
			type nat hook prerouting priority dstnat; policy accept;
			ip daddr 10.0.0.10 tcp dport 30080 dnat to 10.0.1.60:8080
		}
	}`)
	seen := serveTCP(t, b.ns, netip.MustParseAddrPort("10.0.1.60:8080"))
	if err := talkTCP(n.world, netip.MustParseAddrPort(primaryIP+":30080")); err != nil {
		t.Fatalf("NodePort connection from the router's side: %v", err)
	}
	if got := <-seen; got.String() != routerIP {
		t.Errorf("pod saw the client as %s, want %s", got, routerIP)
	}
}

// serveTCP accepts connections on addr inside n, answers one line each,
// and reports each client's address.
func serveTCP(t *testing.T, n ns.NetNS, addr netip.AddrPort) <-chan netip.Addr {
	t.Helper()
	var ln net.Listener
	netnstest.Do(t, n, func() error {
		var err error
		ln, err = net.Listen("tcp", addr.String())
		return err
	})
	t.Cleanup(func() { ln.Close() })
	seen := make(chan netip.Addr, 8)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			line, _ := bufio.NewReader(c).ReadString('\n')
			fmt.Fprintf(c, "echo %s", line)
			c.Close()
			seen <- netip.MustParseAddrPort(c.RemoteAddr().String()).Addr()
		}
	}()
	return seen
}

// talkTCP connects from inside n to addr and checks the echo.
func talkTCP(n ns.NetNS, addr netip.AddrPort) error {
	var c net.Conn
	if err := n.Do(func(ns.NetNS) error {
		var err error
		c, err = net.DialTimeout("tcp", addr.String(), 2*time.Second)
		return err
	}); err != nil {
		return err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := fmt.Fprintln(c, "hello"); err != nil {
		return err
	}
	reply, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return fmt.Errorf("read reply: %w", err)
	}
	if reply != "echo hello\n" {
		return fmt.Errorf("reply %q", reply)
	}
	return nil
}

func rxPackets(t *testing.T, n ns.NetNS, name string) uint64 {
	t.Helper()
	var rx uint64
	netnstest.Do(t, n, func() error {
		l, err := netlink.LinkByName(name)
		if err != nil {
			return err
		}
		rx = l.Attrs().Statistics.RxPackets
		return nil
	})
	return rx
}

// nft loads a rule set into n with the nft CLI, standing in for another
// component (kube-proxy) that owns its own table.
func nft(t *testing.T, n ns.NetNS, ruleset string) {
	t.Helper()
	if _, err := exec.LookPath("nft"); err != nil {
		t.Skip("nft CLI not installed (apt-get install nftables)")
	}
	netnstest.Do(t, n, func() error {
		cmd := exec.Command("nft", "-f", "-")
		cmd.Stdin = strings.NewReader(ruleset)
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("nft -f: %v: %s", err, out)
		}
		return nil
	})
}

// VPCNET_POD_IMDS=deny: a pod reaches IMDS neither where EC2 has it (a
// hop away, through the primary interface) nor where the local cloud's
// fabric serves it (on the node's loopback); the node's own processes, as
// hostNetwork pods, still do. allow leaves pods their way to it.
func TestDenyPodIMDSDropsPodPacketsToIMDSOnly(t *testing.T) {
	for _, where := range []string{"beyond eth0", "on the node"} {
		t.Run(where, func(t *testing.T) {
			deny := true
			n := newReadyNode(t, func(c *HostConfig) { c.DenyPodIMDS = deny })
			p := n.addPod(t, "pod-a", "10.0.0.50", 0)
			at := n.world
			if where == "on the node" {
				at = n.node
			}
			netnstest.Do(t, at, func() error {
				lo, err := netlink.LinkByName("lo")
				if err != nil {
					return err
				}
				if err := netlink.LinkSetUp(lo); err != nil {
					return err
				}
				return netlink.AddrAdd(lo, &netlink.Addr{IPNet: ipNet(netip.MustParsePrefix("169.254.169.254/32"))})
			})
			imds := netip.MustParseAddrPort("169.254.169.254:80")
			serveTCP(t, at, imds)
			if err := talkTCP(p.ns, imds); err == nil {
				t.Error("with VPCNET_POD_IMDS=deny a pod reached IMDS")
			}
			if err := talkTCP(n.node, imds); err != nil {
				t.Errorf("with VPCNET_POD_IMDS=deny the node itself cannot reach IMDS: %v", err)
			}
			deny = false
			cfg := n.hostConfig()
			if err := n.dp.SetupHost(testContext(t), cfg); err != nil {
				t.Fatal(err)
			}
			if err := talkTCP(p.ns, imds); err != nil {
				t.Errorf("with VPCNET_POD_IMDS=allow the pod cannot reach IMDS: %v", err)
			}
		})
	}
}
