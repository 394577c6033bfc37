package dataplane

import (
	"context"
	"errors"
	"net/netip"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/vishvananda/netlink"

	"github.com/vpcnet/vpcnet/dataplane/netnstest"
)

// newPodNS is a pod's namespace with lo up, before any ADD.
func newPodNS(t *testing.T) ns.NetNS {
	t.Helper()
	p := netnstest.NewNS(t)
	netnstest.Do(t, p, func() error { return upWithAddrs("lo") })
	return p
}

// vethConfig is what the plugin knows before the agent answers.
func vethConfig(podNS ns.NetNS, name string) PodConfig {
	return PodConfig{NetNS: podNS.Path(), IfName: "eth0", HostVethName: HostVethName("eni", "default", name)}
}

// withAddr is cfg completed with what the agent answers.
func withAddr(cfg PodConfig, addr string, table, mtu int) PodConfig {
	cfg.Addr, cfg.RouteTable, cfg.MTU = netip.MustParseAddr(addr), table, mtu
	return cfg
}

func (n *testNode) prewire(t *testing.T, cfg PodConfig) *PrewiredPod {
	t.Helper()
	p, err := n.dp.PrewirePod(testContext(t), cfg)
	if err != nil {
		t.Fatalf("PrewirePod: %v", err)
	}
	t.Cleanup(func() { _ = p.Remove() })
	return p
}

// podEth0 is the pod interface's up flag, MTU and IPv4 addresses.
func podEth0(t *testing.T, podNS ns.NetNS) (up bool, mtu int, addrs []string) {
	t.Helper()
	netnstest.Do(t, podNS, func() error {
		l, err := netlink.LinkByName("eth0")
		if err != nil {
			return err
		}
		list, err := netlink.AddrList(l, netlink.FAMILY_V4)
		if err != nil {
			return err
		}
		for _, a := range list {
			addrs = append(addrs, a.IPNet.String())
		}
		up, mtu = l.Attrs().RawFlags&1 != 0, l.Attrs().MTU // IFF_UP
		return nil
	})
	return up, mtu, addrs
}

func linkIndex(t *testing.T, n ns.NetNS, name string) int {
	t.Helper()
	var idx int
	netnstest.Do(t, n, func() error {
		l, err := netlink.LinkByName(name)
		if err != nil {
			return err
		}
		idx = l.Attrs().Index
		return nil
	})
	return idx
}

func TestAPrewiredPodIsRoutedToItsGatewayButHasNoAddressYet(t *testing.T) {
	n := newReadyNode(t, nil)
	podNS := newPodNS(t)
	cfg := vethConfig(podNS, "pod-a")
	p := n.prewire(t, cfg)

	up, mtu, addrs := podEth0(t, podNS)
	if !up || mtu != DefaultMTU || len(addrs) != 0 {
		t.Errorf("prewired eth0: up %v, MTU %d, addresses %v; want up, %d, none", up, mtu, addrs, DefaultMTU)
	}
	diffLines(t, "pod main table", routesIn(t, podNS, 254), []string{
		"169.254.1.1 dev eth0 scope link",
		"default via 169.254.1.1 dev eth0",
	})
	netnstest.Do(t, podNS, func() error {
		neighs, err := netlink.NeighList(0, netlink.FAMILY_V4)
		if err != nil {
			return err
		}
		want := hostMAC(t, n, cfg.HostVethName)
		if !slices.ContainsFunc(neighs, func(nb netlink.Neigh) bool {
			return nb.IP.String() == "169.254.1.1" && nb.State == netlink.NUD_PERMANENT && nb.HardwareAddr.String() == want
		}) {
			t.Errorf("pod neighbours %v lack 169.254.1.1 lladdr %s PERMANENT", neighs, want)
		}
		return nil
	})
	// Nothing on the node points at an address the pod does not have yet.
	diffLines(t, "node main table", routesIn(t, n.node, 254), []string{
		"10.0.0.0/24 dev eth0 scope link src 10.0.0.10",
		"default via 10.0.0.1 dev eth0",
	})

	full := withAddr(cfg, "10.0.1.60", 2, 0)
	links, err := n.dp.WirePod(testContext(t), p, full)
	if err != nil {
		t.Fatalf("WirePod: %v", err)
	}
	if links.Host.Name != cfg.HostVethName || links.Pod.Name != "eth0" || links.Host.MAC.String() != hostMAC(t, n, cfg.HostVethName) {
		t.Errorf("WirePod returned links %+v", links)
	}
	if err := n.dp.CheckPod(testContext(t), full); err != nil {
		t.Errorf("CheckPod after PrewirePod and WirePod: %v", err)
	}
}

func TestWirePodChangesTheMTUOnlyWhenTheAgentsDiffers(t *testing.T) {
	for _, tt := range []struct {
		name         string
		prewire, pod int // PodConfig.MTU at each step
		want         int
	}{
		{"agent's MTU is the default", 0, 0, DefaultMTU},
		{"agent's MTU is the one the veth was made with", 1500, 1500, 1500},
		{"agent's MTU is lower", 0, 1500, 1500},
		{"agent's MTU is higher", 1500, 9001, 9001},
	} {
		t.Run(tt.name, func(t *testing.T) {
			n := newReadyNode(t, nil)
			podNS := newPodNS(t)
			cfg := vethConfig(podNS, "pod-a")
			cfg.MTU = tt.prewire
			p := n.prewire(t, cfg)
			full := withAddr(cfg, "10.0.0.50", 0, tt.pod)
			if _, err := n.dp.WirePod(testContext(t), p, full); err != nil {
				t.Fatalf("WirePod: %v", err)
			}
			if _, mtu, _ := podEth0(t, podNS); mtu != tt.want {
				t.Errorf("pod eth0 MTU %d, want %d", mtu, tt.want)
			}
			netnstest.Do(t, n.node, func() error {
				l, err := netlink.LinkByName(cfg.HostVethName)
				if err != nil {
					return err
				}
				if l.Attrs().MTU != tt.want {
					t.Errorf("host veth MTU %d, want %d", l.Attrs().MTU, tt.want)
				}
				return nil
			})
			if err := n.dp.CheckPod(testContext(t), full); err != nil {
				t.Errorf("CheckPod: %v", err)
			}
		})
	}
}

func TestAWirePodThatFailsRemovesTheVeth(t *testing.T) {
	for _, tt := range []struct {
		name   string
		cancel bool
		edit   func(podNS ns.NetNS, cfg *PodConfig)
		want   string
	}{
		{name: "context ended while the agent answered", cancel: true, want: context.Canceled.Error()},
		{name: "address not usable", edit: func(_ ns.NetNS, c *PodConfig) { c.Addr = netip.MustParseAddr("0.0.0.0") },
			want: `address "0.0.0.0" is not a usable IPv4 address`},
		{name: "route table reserved by the kernel", edit: func(_ ns.NetNS, c *PodConfig) { c.RouteTable = 255 },
			want: "route table 255 is reserved"},
		{name: "MTU out of range", edit: func(_ ns.NetNS, c *PodConfig) { c.MTU = 100 }, want: "MTU 100 is outside"},
		{name: "config for another pod's veth", edit: func(_ ns.NetNS, c *PodConfig) { c.HostVethName = HostVethName("eni", "default", "pod-b") },
			want: "does not match the veth made for"},
		{name: "the address is on the pod interface already", edit: func(podNS ns.NetNS, c *PodConfig) {
			netnstest.Do(t, podNS, func() error {
				l, err := netlink.LinkByName("eth0")
				if err != nil {
					return err
				}
				return netlink.AddrAdd(l, &netlink.Addr{IPNet: ipNet(host(c.Addr))})
			})
		}, want: "add 10.0.1.60 to eth0"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			n := newReadyNode(t, nil)
			podNS := newPodNS(t)
			cfg := vethConfig(podNS, "pod-a")
			p := n.prewire(t, cfg)
			full := withAddr(cfg, "10.0.1.60", 2, 0)
			ctx := testContext(t)
			if tt.cancel {
				var cancel context.CancelFunc
				ctx, cancel = context.WithCancel(ctx)
				cancel()
			}
			if tt.edit != nil {
				tt.edit(podNS, &full)
			}
			_, err := n.dp.WirePod(ctx, p, full)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("WirePod error = %v, want one containing %q", err, tt.want)
			}
			assertNoPodState(t, n)
			netnstest.Do(t, podNS, func() error {
				diffLines(t, "pod links", linkNames(t), []string{"lo"})
				return nil
			})
			if _, err := n.dp.WirePod(testContext(t), p, withAddr(cfg, "10.0.1.60", 2, 0)); err == nil || !strings.Contains(err.Error(), "already wired or removed") {
				t.Errorf("a second WirePod of a spent veth: error %v, want one saying it is spent", err)
			}
		})
	}
}

func TestRemoveTakesThePrewiredVethAndCanRepeat(t *testing.T) {
	n := newReadyNode(t, nil)
	podNS := newPodNS(t)
	p := n.prewire(t, vethConfig(podNS, "pod-a"))
	for range 2 {
		if err := p.Remove(); err != nil {
			t.Fatalf("Remove: %v", err)
		}
	}
	assertNoPodState(t, n)
	netnstest.Do(t, podNS, func() error {
		diffLines(t, "pod links", linkNames(t), []string{"lo"})
		return nil
	})
}

func TestRemoveAfterWirePodLeavesThePodWired(t *testing.T) {
	n := newReadyNode(t, nil)
	podNS := newPodNS(t)
	cfg := vethConfig(podNS, "pod-a")
	p := n.prewire(t, cfg)
	full := withAddr(cfg, "10.0.1.60", 2, 0)
	if _, err := n.dp.WirePod(testContext(t), p, full); err != nil {
		t.Fatal(err)
	}
	if err := p.Remove(); err != nil {
		t.Fatalf("Remove: %v", err)
	}
	if err := n.dp.CheckPod(testContext(t), full); err != nil {
		t.Errorf("the wired pod lost its wiring to Remove: %v", err)
	}
}

func TestAPrewirePodThatFailsLeavesNothing(t *testing.T) {
	for _, tt := range []struct {
		name    string
		cancel  bool
		setup   func(t *testing.T, n *testNode, cfg *PodConfig)
		wantErr func(error) bool
		links   []string // the node's links afterwards
	}{
		{
			name:    "context already ended",
			cancel:  true,
			setup:   func(*testing.T, *testNode, *PodConfig) {},
			wantErr: func(err error) bool { return errors.Is(err, context.Canceled) },
			links:   []string{"eth0", "eth1", "lo"},
		},
		{
			name: "namespace gone",
			setup: func(t *testing.T, _ *testNode, cfg *PodConfig) {
				cfg.NetNS = filepath.Join(t.TempDir(), "gone")
			},
			wantErr: func(err error) bool { return errors.Is(err, ErrNetNSNotFound) },
			links:   []string{"eth0", "eth1", "lo"},
		},
		{
			name: "host veth name taken by a link not ours",
			setup: func(t *testing.T, n *testNode, cfg *PodConfig) {
				netnstest.Do(t, n.node, func() error {
					return netlink.LinkAdd(&netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Name: cfg.HostVethName}})
				})
			},
			wantErr: func(err error) bool {
				return err != nil && strings.Contains(err.Error(), "is taken by a bridge link that is not ours")
			},
			links: []string{HostVethName("eni", "default", "pod-a"), "eth0", "eth1", "lo"},
		},
	} {
		t.Run(tt.name, func(t *testing.T) {
			n := newReadyNode(t, nil)
			podNS := newPodNS(t)
			cfg := vethConfig(podNS, "pod-a")
			tt.setup(t, n, &cfg)
			ctx := testContext(t)
			if tt.cancel {
				var cancel context.CancelFunc
				ctx, cancel = context.WithCancel(ctx)
				cancel()
			}
			p, err := n.dp.PrewirePod(ctx, cfg)
			if !tt.wantErr(err) {
				t.Fatalf("PrewirePod error = %v", err)
			}
			if p != nil {
				t.Errorf("PrewirePod returned a veth with its error")
			}
			netnstest.Do(t, n.node, func() error {
				diffLines(t, "node links", linkNames(t), tt.links)
				return nil
			})
			netnstest.Do(t, podNS, func() error {
				diffLines(t, "pod links", linkNames(t), []string{"lo"})
				return nil
			})
		})
	}
}

// A runtime repeats ADD for a pod that is running: the host veth of the
// pod's name is the live pod's, not a stale one to replace.
func TestPrewirePodRefusesAWiredPodAndLeavesItsVethAlone(t *testing.T) {
	n := newReadyNode(t, nil)
	a := n.addPod(t, "pod-a", "10.0.1.60", 2)
	hostBefore, podBefore := linkIndex(t, n.node, a.cfg.HostVethName), linkIndex(t, a.ns, "eth0")
	_, err := n.dp.PrewirePod(testContext(t), vethConfig(a.ns, "pod-a"))
	if err == nil || !strings.Contains(err.Error(), "already has an interface eth0") {
		t.Fatalf("PrewirePod error = %v, want one saying eth0 exists", err)
	}
	if h, p := linkIndex(t, n.node, a.cfg.HostVethName), linkIndex(t, a.ns, "eth0"); h != hostBefore || p != podBefore {
		t.Errorf("the live pod's veth was replaced: host index %d→%d, pod index %d→%d", hostBefore, h, podBefore, p)
	}
	if err := n.dp.CheckPod(testContext(t), a.cfg); err != nil {
		t.Errorf("the live pod lost its wiring: %v", err)
	}
}
