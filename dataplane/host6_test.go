package dataplane

import (
	"strings"
	"testing"

	"github.com/containernetworking/plugins/pkg/utils/sysctl"

	"github.com/vpcnet/vpcnet/dataplane/netnstest"
)

// wantHost6Table is `nft list table ip vpcnet` on an IPv6 node with the
// pod-IMDS deny: aws-node's block of the pods' egress addresses, and the
// deny of IMDS over the pods' IPv4 egress veths. No SNAT, no connmark.
const wantHost6Table = `table ip vpcnet {
	chain forward {
		type filter hook forward priority filter; policy accept;
		ip daddr 169.254.172.0/22 ct state new reject comment "vpcnet: new connections to pods' node-local IPv4 egress addresses 169.254.172.0/22 are refused"
	}

	chain pod-imds {
		type filter hook prerouting priority raw; policy accept;
		iifname "v4*" ip daddr 169.254.169.254 drop comment "vpcnet: VPCNET_POD_IMDS=deny: drop pod packets to IMDS at 169.254.169.254"
	}
}`

func (n *testNode) host6Config() HostConfig {
	cfg := n.hostConfig()
	cfg.IPv6, cfg.VPCCIDRs, cfg.DenyPodIMDS = true, nil, true
	return cfg
}

// An IPv6 node is set up as aws-node's IPv6 mode sets it up: IPv6
// forwarding with router advertisements still accepted on the primary
// interface, and neither the SNAT and connmark rules nor rule 1024 of an
// IPv4 node, including ones an IPv4 set-up left.
func TestSetupHostForIPv6PodsForwardsIPv6AndWritesNoIPv4SNAT(t *testing.T) {
	n := newTestNode(t)
	ctx := testContext(t)
	if err := n.dp.SetupHost(ctx, n.hostConfig()); err != nil {
		t.Fatal(err)
	}
	if err := n.dp.SetupHost(ctx, n.host6Config()); err != nil {
		t.Fatal(err)
	}
	diffLines(t, "rules", rulesIn(t, n.node), nil)
	netnstest.Do(t, n.node, func() error {
		for name, want := range map[string]string{
			"net.ipv6.conf.all.disable_ipv6": "0", "net.ipv6.conf.all.forwarding": "1",
			"net.ipv6.conf.eth0.accept_ra": "2", "net.ipv6.conf.eth0.forwarding": "1",
			"net.ipv4.conf.eth0.rp_filter": "2",
		} {
			if got, err := sysctl.Sysctl(name); err != nil || got != want {
				t.Errorf("sysctl %s = %q (%v), want %q", name, got, err, want)
			}
		}
		return nil
	})
	if got := nftList(t, n.node); got != wantHost6Table {
		t.Errorf("nft list table ip vpcnet:\n%s\nwant:\n%s", got, wantHost6Table)
	}
	if got := nftListFamily(t, n.node, "ip6"); !strings.Contains(got, `iifname "eni*" ip6 daddr fd00:ec2::254 drop`) {
		t.Errorf("nft list table ip6 vpcnet lacks the IPv6 pod-IMDS deny:\n%s", got)
	}
	// Again: nothing rewritten.
	table := nftState(t, n.node)
	if err := n.dp.SetupHost(ctx, n.host6Config()); err != nil {
		t.Fatal(err)
	}
	diffLines(t, "nftables after the second run", nftState(t, n.node), table)
}

// Without the pod-IMDS deny an IPv6 node's table ip vpcnet is the block
// of the egress addresses alone, and an IPv6 node needs no VPC CIDR (it
// SNATs nothing).
func TestSetupHostForIPv6PodsWithoutIMDSDenyBlocksOnlyEgressAddresses(t *testing.T) {
	n := newTestNode(t)
	cfg := n.host6Config()
	cfg.DenyPodIMDS = false
	if err := n.dp.SetupHost(testContext(t), cfg); err != nil {
		t.Fatal(err)
	}
	want := wantHost6Table[:strings.Index(wantHost6Table, "\n\n\tchain pod-imds")] + "\n}"
	if got := nftList(t, n.node); got != want {
		t.Errorf("nft list table ip vpcnet:\n%s\nwant:\n%s", got, want)
	}
	if got := nftListFamily(t, n.node, "ip6"); got != "" {
		t.Errorf("table ip6 vpcnet without the deny:\n%s", got)
	}
}
