package dataplane

import (
	"fmt"
	"net/netip"
	"os/exec"
	"strings"
	"testing"

	"github.com/containernetworking/plugins/pkg/ns"

	"github.com/vpcnet/vpcnet/dataplane/netnstest"
	"github.com/vpcnet/vpcnet/hostport"
	"github.com/vpcnet/vpcnet/ipam"
)

// wantHostPortTable is what `nft list table ip vpcnet-hostport` prints for
// hostPortEntries(): what portmap's nftables backend does with "snat":
// true, in one table of the agent's.
const wantHostPortTable = `table ip vpcnet-hostport {
	chain prerouting {
		type nat hook prerouting priority dstnat; policy accept;
		fib daddr type local jump hostports comment "vpcnet: to the node's own addresses"
	}

	chain output {
		type nat hook output priority -100; policy accept;
		fib daddr type local jump hostports comment "vpcnet: to the node's own addresses"
	}

	chain hostports {
		tcp dport 8080 dnat to 10.0.0.21:80 comment "vpcnet: *:8080/tcp->80 of pod default/web"
		ip daddr 10.0.0.10 udp dport 53 dnat to 10.0.0.22:5353 comment "vpcnet: 10.0.0.10:53/udp->5353 of pod kube-system/dns"
		sctp dport 9000 dnat to 10.0.0.22:9000 comment "vpcnet: *:9000/sctp->9000 of pod kube-system/dns"
	}

	chain postrouting {
		type nat hook postrouting priority srcnat; policy accept;
		ip saddr 10.0.0.21 ip daddr 10.0.0.21 ct status dnat masquerade comment "vpcnet: pod default/web reaching its own hostPort"
		ip saddr 127.0.0.1 ip daddr 10.0.0.21 ct status dnat masquerade comment "vpcnet: the node reaching pod default/web by 127.0.0.1:hostPort"
		ip saddr 10.0.0.22 ip daddr 10.0.0.22 ct status dnat masquerade comment "vpcnet: pod kube-system/dns reaching its own hostPort"
		ip saddr 127.0.0.1 ip daddr 10.0.0.22 ct status dnat masquerade comment "vpcnet: the node reaching pod kube-system/dns by 127.0.0.1:hostPort"
	}
}`

func hostPortEntries() []hostport.Entry {
	return []hostport.Entry{
		{Key: ipam.Key{Network: "aws-cni", ContainerID: "c1", IfName: "eth0"}, Pod: ipam.Pod{Namespace: "default", Name: "web"},
			Addr: netip.MustParseAddr("10.0.0.21"), Mappings: []hostport.Mapping{{HostPort: 8080, ContainerPort: 80, Protocol: hostport.TCP}}},
		{Key: ipam.Key{Network: "aws-cni", ContainerID: "c2", IfName: "eth0"}, Pod: ipam.Pod{Namespace: "kube-system", Name: "dns"},
			Addr: netip.MustParseAddr("10.0.0.22"), Mappings: []hostport.Mapping{
				{HostIP: netip.MustParseAddr(primaryIP), HostPort: 53, ContainerPort: 5353, Protocol: hostport.UDP},
				{HostPort: 9000, ContainerPort: 9000, Protocol: hostport.SCTP},
			}},
	}
}

// listTable is `nft [-a] list table ip name`, or nil when there is none.
func listTable(t *testing.T, n ns.NetNS, name string, handles bool) []string {
	t.Helper()
	return listFamilyTable(t, n, "ip", name, handles)
}

// listFamilyTable is listTable for a table of family ("ip", "ip6").
func listFamilyTable(t *testing.T, n ns.NetNS, family, name string, handles bool) []string {
	t.Helper()
	if _, err := exec.LookPath("nft"); err != nil {
		t.Skip("nft CLI not installed (apt-get install nftables): cannot read the rule set as text")
	}
	args := []string{"list", "table", family, name}
	if handles {
		args = append([]string{"-a"}, args...)
	}
	var out []byte
	netnstest.Do(t, n, func() error {
		var err error
		out, err = exec.Command("nft", args...).CombinedOutput()
		if err != nil && strings.Contains(string(out), "No such file or directory") {
			out, err = nil, nil
		}
		if err != nil {
			return fmt.Errorf("nft list: %v: %s", err, out)
		}
		return nil
	})
	if len(out) == 0 {
		return nil
	}
	return strings.Split(strings.TrimSpace(string(out)), "\n")
}

func TestHostPortsAreWrittenOnceAndGoWithTheLastPod(t *testing.T) {
	n := newTestNode(t)
	ctx := testContext(t)
	if err := n.dp.SetHostPorts(ctx, hostPortEntries()); err != nil {
		t.Fatal(err)
	}
	diffLines(t, "nft list table ip "+HostPortTable, listTable(t, n.node, HostPortTable, false), strings.Split(wantHostPortTable, "\n"))

	// Rule handles included: a rewrite would give new ones, and a rule
	// read back unlike what was written would rewrite it every time.
	before := listTable(t, n.node, HostPortTable, true)
	if err := n.dp.SetHostPorts(ctx, hostPortEntries()); err != nil {
		t.Fatal(err)
	}
	diffLines(t, "the table after writing the same set again", listTable(t, n.node, HostPortTable, true), before)

	if err := n.dp.SetHostPorts(ctx, hostPortEntries()[:1]); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(listTable(t, n.node, HostPortTable, false), "\n"); strings.Contains(got, "dns") || !strings.Contains(got, "default/web") {
		t.Errorf("after kube-system/dns left, the table is:\n%s", got)
	}
	if err := n.dp.SetHostPorts(ctx, nil); err != nil {
		t.Fatal(err)
	}
	if got := listTable(t, n.node, HostPortTable, false); got != nil {
		t.Errorf("no pod has a hostPort, but the table is still there:\n%s", strings.Join(got, "\n"))
	}
}

func TestHostPortsAndTheHostTableLeaveEachOtherAlone(t *testing.T) {
	n := newTestNode(t)
	ctx := testContext(t)
	if err := n.dp.SetHostPorts(ctx, hostPortEntries()); err != nil {
		t.Fatal(err)
	}
	if err := n.dp.SetupHost(ctx, n.hostConfig()); err != nil {
		t.Fatal(err)
	}
	ports := listTable(t, n.node, HostPortTable, true)
	if len(ports) == 0 {
		t.Fatal("setting up the host removed the hostPort table")
	}
	host := nftState(t, n.node)
	if err := n.dp.SetHostPorts(ctx, nil); err != nil {
		t.Fatal(err)
	}
	diffLines(t, "the host table after the hostPorts went", nftState(t, n.node), host)
	if err := n.dp.SetHostPorts(ctx, hostPortEntries()); err != nil {
		t.Fatal(err)
	}
	if err := n.dp.TeardownHost(ctx); err != nil {
		t.Fatal(err)
	}
	if got := listTable(t, n.node, HostPortTable, false); got != nil {
		t.Errorf("TeardownHost left the hostPort table:\n%s", strings.Join(got, "\n"))
	}
}

// wantHostPort6Table is table ip6 vpcnet-hostport for an IPv6 pod: the
// IPv4 table's rules in IPv6, but for the node's loopback, which IPv6
// never routes out of the node.
const wantHostPort6Table = `table ip6 vpcnet-hostport {
	chain prerouting {
		type nat hook prerouting priority dstnat; policy accept;
		fib daddr type local jump hostports comment "vpcnet: to the node's own addresses"
	}

	chain output {
		type nat hook output priority -100; policy accept;
		fib daddr type local jump hostports comment "vpcnet: to the node's own addresses"
	}

	chain hostports {
		tcp dport 8080 dnat to [2600:1f14:abc:de01:1234::5]:80 comment "vpcnet: *:8080/tcp->80 of pod default/web6"
		ip6 daddr 2600:1f14:abc:de01::10 udp dport 53 dnat to [2600:1f14:abc:de01:1234::5]:5353 comment "vpcnet: 2600:1f14:abc:de01::10:53/udp->5353 of pod default/web6"
	}

	chain postrouting {
		type nat hook postrouting priority srcnat; policy accept;
		ip6 saddr 2600:1f14:abc:de01:1234::5 ip6 daddr 2600:1f14:abc:de01:1234::5 ct status dnat masquerade comment "vpcnet: pod default/web6 reaching its own hostPort"
	}
}`

// An IPv6 pod's hostPorts are DNATed in table ip6 vpcnet-hostport, next
// to the IPv4 pods' table and apart from it; each goes with its last pod,
// and TeardownHost removes both.
func TestIPv6PodsHostPortsAreDNATedInTheirOwnFamilysTable(t *testing.T) {
	n := newTestNode(t)
	ctx := testContext(t)
	pod6 := netip.MustParseAddr("2600:1f14:abc:de01:1234::5")
	v6 := hostport.Entry{Key: ipam.Key{Network: "aws-cni", ContainerID: "c6", IfName: "eth0"}, Pod: ipam.Pod{Namespace: "default", Name: "web6"},
		Addr: pod6, Mappings: []hostport.Mapping{
			{HostPort: 8080, ContainerPort: 80, Protocol: hostport.TCP},
			{HostIP: netip.MustParseAddr("2600:1f14:abc:de01::10"), HostPort: 53, ContainerPort: 5353, Protocol: hostport.UDP},
		}}
	entries := append(hostPortEntries(), v6)
	if err := n.dp.SetHostPorts(ctx, entries); err != nil {
		t.Fatal(err)
	}
	diffLines(t, "nft list table ip6 "+HostPortTable, listFamilyTable(t, n.node, "ip6", HostPortTable, false), strings.Split(wantHostPort6Table, "\n"))
	diffLines(t, "nft list table ip "+HostPortTable, listTable(t, n.node, HostPortTable, false), strings.Split(wantHostPortTable, "\n"))
	before := listFamilyTable(t, n.node, "ip6", HostPortTable, true)
	if err := n.dp.SetHostPorts(ctx, entries); err != nil {
		t.Fatal(err)
	}
	diffLines(t, "the ip6 table after writing the same set again", listFamilyTable(t, n.node, "ip6", HostPortTable, true), before)
	if err := n.dp.SetHostPorts(ctx, hostPortEntries()); err != nil {
		t.Fatal(err)
	}
	if got := listFamilyTable(t, n.node, "ip6", HostPortTable, false); got != nil {
		t.Errorf("the IPv6 pod left, but table ip6 %s remains:\n%s", HostPortTable, strings.Join(got, "\n"))
	}
	if err := n.dp.SetHostPorts(ctx, entries); err != nil {
		t.Fatal(err)
	}
	if err := n.dp.TeardownHost(ctx); err != nil {
		t.Fatal(err)
	}
	if got := listFamilyTable(t, n.node, "ip6", HostPortTable, false); got != nil {
		t.Errorf("TeardownHost left table ip6 %s:\n%s", HostPortTable, strings.Join(got, "\n"))
	}
}
