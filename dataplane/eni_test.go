package dataplane

import (
	"context"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vishvananda/netlink"

	"github.com/vpcnet/vpcnet/dataplane/netnstest"
)

func TestSetupENIWaitsForTheInterfaceAndConfiguresIt(t *testing.T) {
	n := newTestNode(t)
	ctx := testContext(t)
	done := make(chan error, 1)
	go func() { done <- n.dp.SetupENI(ctx, n.eni1()) }()
	// The interface shows up after the call started, as after an attach.
	time.Sleep(100 * time.Millisecond)
	n.attachENI1(t)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	assertENI1(t, n)
	if err := n.dp.SetupENI(ctx, n.eni1()); err != nil {
		t.Fatalf("second SetupENI: %v", err)
	}
	assertENI1(t, n)
}

func assertENI1(t *testing.T, n *testNode) {
	t.Helper()
	netnstest.Do(t, n.node, func() error {
		l, err := netlink.LinkByName("eth1")
		if err != nil {
			return err
		}
		if l.Attrs().MTU != 9001 || l.Attrs().Flags&1 == 0 {
			t.Errorf("eth1 MTU %d flags %v, want MTU 9001 and up", l.Attrs().MTU, l.Attrs().Flags)
		}
		addrs, err := netlink.AddrList(l, netlink.FAMILY_V4)
		if err != nil {
			return err
		}
		var got []string
		for _, a := range addrs {
			got = append(got, a.IPNet.String())
		}
		diffLines(t, "eth1 addresses", got, []string{"10.0.1.20/24"})
		return nil
	})
	diffLines(t, "table 2", routesIn(t, n.node, 2), []string{
		"10.0.1.1 dev eth1 scope link",
		"default via 10.0.1.1 dev eth1",
	})
	// The kernel's subnet route for the new address is gone from main.
	diffLines(t, "main table", routesIn(t, n.node, 254), []string{
		"10.0.0.0/24 dev eth0 scope link src 10.0.0.10",
		"default via 10.0.0.1 dev eth0",
	})
	diffLines(t, "rules", rulesIn(t, n.node), []string{"32765: from 10.0.1.20/32 lookup 2"})
}

func TestSetupENIReplacesStaleState(t *testing.T) {
	n := newTestNode(t)
	ctx := testContext(t)
	n.attachENI1(t)
	// An earlier ENI at device index 1 left an address, a route and a rule.
	netnstest.Do(t, n.node, func() error {
		l, err := netlink.LinkByName("eth1")
		if err != nil {
			return err
		}
		if err := netlink.AddrAdd(l, &netlink.Addr{IPNet: ipNet(netip.MustParsePrefix("10.0.9.9/24"))}); err != nil {
			return err
		}
		if err := netlink.LinkSetUp(l); err != nil {
			return err
		}
		if err := netlink.RouteAdd(&netlink.Route{LinkIndex: l.Attrs().Index, Dst: ipNet(netip.MustParsePrefix("10.0.9.0/24")), Table: 2, Scope: netlink.SCOPE_LINK}); err != nil {
			return err
		}
		r := netlink.NewRule()
		r.Priority, r.Table, r.Src = ENIPrimaryPriority, 2, ipNet(netip.MustParsePrefix("10.0.9.9/32"))
		return netlink.RuleAdd(r)
	})
	if err := n.dp.SetupENI(ctx, n.eni1()); err != nil {
		t.Fatal(err)
	}
	assertENI1(t, n)
}

func TestSetupENIGivesUpWhenTheInterfaceNeverAppears(t *testing.T) {
	n := newTestNode(t)
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	err := n.dp.SetupENI(ctx, n.eni1())
	if err == nil || !strings.Contains(err.Error(), "no interface with MAC 02:00:00:00:00:11 appeared") {
		t.Fatalf("SetupENI error = %v, want one naming the missing MAC", err)
	}
}

func TestTeardownENIRemovesItsRuleRoutesAndAddress(t *testing.T) {
	n := newTestNode(t)
	ctx := testContext(t)
	n.attachENI1(t)
	if err := n.dp.SetupENI(ctx, n.eni1()); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := n.dp.TeardownENI(ctx, n.eni1()); err != nil {
			t.Fatal(err)
		}
	}
	diffLines(t, "rules", rulesIn(t, n.node), nil)
	diffLines(t, "table 2", routesIn(t, n.node, 2), nil)
	netnstest.Do(t, n.node, func() error {
		l, err := netlink.LinkByName("eth1")
		if err != nil {
			return err
		}
		addrs, err := netlink.AddrList(l, netlink.FAMILY_V4)
		if len(addrs) != 0 {
			t.Errorf("eth1 still has %v", addrs)
		}
		return err
	})
}

func TestENIConfigRejectsWhatCannotBeWired(t *testing.T) {
	good := ENIConfig{MAC: mustMAC(eni1MAC), DeviceIndex: 1, PrimaryIP: netip.MustParseAddr("10.0.1.20"), SubnetCIDR: netip.MustParsePrefix("10.0.1.0/24")}
	tests := []struct {
		name   string
		change func(*ENIConfig)
		want   string
	}{
		{"primary ENI", func(c *ENIConfig) { c.DeviceIndex = 0 }, "device index 0 is not a secondary ENI"},
		{"no MAC", func(c *ENIConfig) { c.MAC = nil }, "MAC is empty"},
		{"address outside subnet", func(c *ENIConfig) { c.PrimaryIP = netip.MustParseAddr("10.0.2.20") }, "not in subnet 10.0.1.0/24"},
		{"table reserved by the kernel", func(c *ENIConfig) { c.DeviceIndex = 253 }, "reserved by the kernel"},
		{"MTU below IPv4 minimum", func(c *ENIConfig) { c.MTU = 500 }, "MTU 500 is outside"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := good
			tt.change(&cfg)
			err := cfg.validate()
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("validate() = %v, want an error containing %q", err, tt.want)
			}
		})
	}
	if err := good.validate(); err != nil {
		t.Errorf("valid config rejected: %v", err)
	}
}

// Issue 16: a burst's pods wait for a new ENI's interface; it is seen as
// it appears, not at the next poll (an hour here).
func TestSetupENISeesTheInterfaceAsItAppears(t *testing.T) {
	n := newTestNode(t)
	dp, err := New(Options{NetNS: n.node.Path(), PollInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	dp.notFound = func() { once.Do(func() { n.attachENI1(t) }) }
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if err := dp.SetupENI(ctx, n.eni1()); err != nil {
		t.Fatalf("SetupENI = %v; want the interface seen as it appeared", err)
	}
	assertENI1(t, n)
}
