package e2e

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"

	"github.com/vpcnet/vpcnet/simcluster"
)

// podState lists what vpcnet made on the node for pods: host veths, /32
// routes to them, and the 512/1536 policy rules.
func podState(t *testing.T, n *simcluster.Node) []string {
	t.Helper()
	nl := nodeHandle(t, n)
	defer nl.Close()
	links, err := nl.LinkList()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, l := range links {
		if strings.HasPrefix(l.Attrs().Name, "eni") {
			out = append(out, "veth "+l.Attrs().Name)
		}
	}
	routes, err := nl.RouteList(nil, netlink.FAMILY_V4)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range routes {
		if l, err := nl.LinkByIndex(r.LinkIndex); err == nil && strings.HasPrefix(l.Attrs().Name, "eni") {
			out = append(out, fmt.Sprintf("route %s dev %s", r.Dst, l.Attrs().Name))
		}
	}
	rules, err := nl.RuleList(netlink.FAMILY_V4)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rules {
		if r.Priority == 512 || r.Priority == 1536 {
			out = append(out, fmt.Sprintf("rule %d from %v to %v table %d", r.Priority, r.Src, r.Dst, r.Table))
		}
	}
	return out
}

// leftAfterDel is podState once a DEL has returned: the routes and rules
// must be gone at once, while vpcnetd deletes the veth pair just after
// answering, so veths are given a few seconds to go.
func leftAfterDel(t *testing.T, n *simcluster.Node) []string {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		left := podState(t, n)
		onlyVeths := !slices.ContainsFunc(left, func(s string) bool { return !strings.HasPrefix(s, "veth ") })
		if len(left) == 0 || !onlyVeths || time.Now().After(deadline) {
			return left
		}
		time.Sleep(20 * time.Millisecond) // polling the kernel's state, not synchronising
	}
}

// delFromRule removes the pod's "from POD lookup TABLE" rules and returns
// them, so a test can put them back.
func delFromRule(t *testing.T, n *simcluster.Node, addr netip.Addr) []netlink.Rule {
	t.Helper()
	nl := nodeHandle(t, n)
	defer nl.Close()
	rules, err := nl.RuleList(netlink.FAMILY_V4)
	if err != nil {
		t.Fatal(err)
	}
	var removed []netlink.Rule
	for _, r := range rules {
		if r.Priority != 1536 || r.Src == nil || !r.Src.IP.Equal(addr.AsSlice()) {
			continue
		}
		if err := nl.RuleDel(&r); err != nil {
			t.Fatal(err)
		}
		removed = append(removed, r)
	}
	return removed
}

func addRules(t *testing.T, n *simcluster.Node, rules []netlink.Rule) {
	t.Helper()
	nl := nodeHandle(t, n)
	defer nl.Close()
	for _, r := range rules {
		if err := nl.RuleAdd(&r); err != nil {
			t.Fatal(err)
		}
	}
}

func nodeHandle(t *testing.T, n *simcluster.Node) *netlink.Handle {
	t.Helper()
	h, err := netns.GetFromPath(n.NetNS)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	nl, err := netlink.NewHandleAt(h)
	if err != nil {
		t.Fatal(err)
	}
	return nl
}
