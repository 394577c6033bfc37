package dataplane

import (
	"net/netip"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
)

// An IPv6 node (HostConfig.IPv6, aws-node's IPv6 mode) is set up as
// aws-node v1.23 sets it up:
//
//   - its init container writes net.ipv6.conf.all.disable_ipv6=0,
//     net.ipv6.conf.all.forwarding=1 and accept_ra=2 on the primary
//     interface (forwarding alone would make the kernel ignore the VPC
//     router's advertisements, and with them the node's default route);
//     rp_filter=2 on the primary interface as in IPv4 mode;
//   - ipamd's SetupHostNetwork writes no SNAT and no connmark rules
//     ("traffic enters and exits from the ENI it came from": every pod is
//     on the primary ENI), and adds a FORWARD rule rejecting new
//     connections to 169.254.172.0/22, the pods' node-local IPv4 egress
//     addresses, which only the pod's own node may use.
//
// vpcnet differs in two places. It writes no rule 1024 (aws-node adds an
// IPv6 one, but with no connmark rule nothing sets the mark it looks
// for). And with VPCNET_POD_IMDS=deny, a vpcnet setting, IPv6 pods are
// kept from IMDS both ways: fd00:ec2::254 from their veths (table ip6
// vpcnet) and 169.254.169.254 from their IPv4 egress veths (table ip
// vpcnet), which would otherwise SNAT it to the node's address.

// egressV4Range is aws-node's range of the pods' node-local IPv4 egress
// addresses (cniconf.EgressV4Subnet).
var egressV4Range = netip.MustParsePrefix("169.254.172.0/22")

// egressVethPrefix starts the name of every IPv4 egress host veth
// (egressVethOf).
const egressVethPrefix = "v4"

const chainForward = "forward"

// ipv6Sysctls are an IPv6 node's settings, in the order they are written.
func ipv6Sysctls(primaryIf string) [][2]string {
	return [][2]string{
		{"net.ipv6.conf.all.disable_ipv6", "0"},
		{"net.ipv6.conf.all.forwarding", "1"},
		{"net.ipv6.conf." + primaryIf + ".accept_ra", "2"},
		{"net.ipv4.conf." + primaryIf + ".rp_filter", "2"},
	}
}

// ipv6NodeChains is table ip vpcnet on an IPv6 node: the block of the
// pods' egress addresses, and the pod-IMDS deny of their IPv4 egress.
func ipv6NodeChains(r hostRules) []chainSpec {
	fwd := chainSpec{
		name: chainForward, hook: nftables.ChainHookForward,
		priority: *nftables.ChainPriorityFilter, typ: nftables.ChainTypeFilter,
		rules: []ruleSpec{{
			comment: "new connections to pods' node-local IPv4 egress addresses " + egressV4Range.String() + " are refused",
			exprs:   concat(daddrIn(egressV4Range), ctStateHas(expr.CtStateBitNEW), rejectPortUnreachable()),
		}},
	}
	egress := r
	egress.vethPrefix = egressVethPrefix
	return append([]chainSpec{fwd}, podIMDSChains(egress, imdsV4)...)
}

// rejectPortUnreachable is iptables' -j REJECT: an ICMP port unreachable
// (`reject` in table ip).
func rejectPortUnreachable() []expr.Any {
	const (
		nftRejectICMPUnreach = 0 // NFT_REJECT_ICMP_UNREACH
		icmpPortUnreach      = 3 // ICMP_PORT_UNREACH
	)
	return []expr.Any{&expr.Reject{Type: nftRejectICMPUnreach, Code: icmpPortUnreach}}
}
