// Package dataplane wires a node's host and pod networking in the shape the
// Amazon VPC CNI uses, so a node can switch between the two without
// rewiring live pods:
//
//   - pod side: the CNI interface (eth0) holds the pod address as a /32, a
//     link route to 169.254.1.1, a default route via it, and a permanent
//     neighbour entry for 169.254.1.1 with the host veth's MAC;
//   - host side: a veth named prefix + sha1("<namespace>.<pod>")[:11] and a
//     /32 route to the pod in the main table;
//   - policy rules: 512 "to POD lookup main", 1024 "fwmark M/M lookup main",
//     1536 "from POD lookup <ENI table>" for pods on a secondary ENI, 32765
//     "from <ENI primary address> lookup <ENI table>";
//   - one route table per secondary ENI (device index + 1) with a link route
//     to the subnet gateway and a default route via it;
//   - nftables table "ip vpcnet": SNAT of pod traffic leaving the VPC to the
//     node's primary address, and the connmark that sends replies to
//     connections that entered on the primary interface back out of it.
//
// All kernel access goes through two thin wrappers, nlHandle (rtnetlink) and
// nftConn (nf_tables); the rest of the package calls those. Every operation
// takes a context and works in the node's network namespace: the one named
// in Options.NetNS, or else the namespace of the calling OS thread.
package dataplane

import (
	"fmt"
	"net/netip"

	"github.com/vpcnet/vpcnet/netfacts"
)

// Rule priorities, identical to the Amazon VPC CNI's.
const (
	ToPodPriority      = 512
	MainMarkPriority   = 1024
	FromPodPriority    = 1536
	ENIPrimaryPriority = 32765
)

const (
	// DefaultMTU is the MTU of ENIs and pod interfaces unless configured.
	DefaultMTU = 9001
	// MinMTU is the smallest MTU IPv4 allows on a link we configure.
	MinMTU = 576
	// DefaultConnmark is the mark bit for traffic that entered on the
	// primary interface (AWS_VPC_K8S_CNI_CONNMARK's default).
	DefaultConnmark = 0x80
	// TableName is the nftables table (family ip) that holds all our rules.
	TableName = "vpcnet"
	// mainTable is the kernel's main routing table (RT_TABLE_MAIN).
	mainTable = 254
)

// PodGateway is the link-local next hop every pod routes through; the host
// veth answers for it through a permanent neighbour entry in the pod.
func PodGateway() netip.Addr { return netip.AddrFrom4([4]byte{169, 254, 1, 1}) }

// PodGateway6 is PodGateway for IPv6 pods, aws-node's fe80::1
// (CalculatePodIPv6GatewayIP for a pod's first interface): a link-local
// next hop the host veth answers for through a permanent neighbour entry.
func PodGateway6() netip.Addr {
	return netip.AddrFrom16([16]byte{0xfe, 0x80, 15: 1})
}

// ENITable is the route table of the secondary ENI at deviceIndex. The
// numbering is netfacts.RouteTable, which the agent reports to the plugin;
// this name stays for callers that know only dataplane.
func ENITable(deviceIndex int) int { return netfacts.RouteTable(deviceIndex) }

// SubnetGateway is the VPC router's address in subnet (netfacts.SubnetGateway).
func SubnetGateway(subnet netip.Prefix) netip.Addr { return netfacts.SubnetGateway(subnet) }

// validRouteTable reports whether table may hold a pod's or ENI's routes.
// 0 means the main table; the kernel reserves 253-255 and 0 otherwise.
func validRouteTable(table int) error {
	switch {
	case table < 0:
		return fmt.Errorf("route table %d is negative", table)
	case table >= 253 && table <= 255:
		return fmt.Errorf("route table %d is reserved by the kernel (default, main, local)", table)
	}
	return nil
}

func validMTU(mtu int) error {
	if mtu != 0 && (mtu < MinMTU || mtu > DefaultMTU) {
		return fmt.Errorf("MTU %d is outside %d-%d", mtu, MinMTU, DefaultMTU)
	}
	return nil
}

func orDefaultMTU(mtu int) int {
	if mtu == 0 {
		return DefaultMTU
	}
	return mtu
}
