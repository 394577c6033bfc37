package netfacts

import (
	"crypto/sha1"
	"encoding/hex"
	"net/netip"
)

// MainTable is what RouteTable returns for the primary ENI: its pods route
// through the main table (RT_TABLE_MAIN, 254, in the kernel; 0 here, as
// the plugin API carries it, meaning "no table of its own").
const MainTable = 0

// MaxDeviceIndex is the largest ENI device index vpcnet accepts: its
// table, RouteTable(251) = 252, is the last below the kernel's reserved
// 253-255 (default, main, local). No instance type comes near it; an
// answer beyond it is corrupt.
const MaxDeviceIndex = 251

// RouteTable is the policy-routing table of the ENI at deviceIndex: the
// primary ENI (device index 0) uses the main table, a secondary ENI table
// device index + 1, as the Amazon VPC CNI numbers them, so a node can
// switch between the two with its tables in place.
func RouteTable(deviceIndex int) int {
	if deviceIndex == 0 {
		return MainTable
	}
	return deviceIndex + 1
}

// SubnetGateway is the VPC router's address in subnet: the first address
// after the network address (AWS reserves it for the router). The prefix
// is masked first, so 10.0.1.7/24 gives 10.0.1.1, as the subnet's own
// CIDR would. An invalid prefix gives the invalid Addr.
func SubnetGateway(subnet netip.Prefix) netip.Addr {
	if !subnet.IsValid() {
		return netip.Addr{}
	}
	return subnet.Masked().Addr().Next()
}

// DefaultVethPrefix is the Amazon VPC CNI's default host veth prefix
// (AWS_VPC_K8S_CNI_VETHPREFIX).
const DefaultVethPrefix = "eni"

// HostVethName is the host-side veth of a pod: prefix followed by the first
// 11 hex digits of sha1("<namespace>.<pod>"). These are the Amazon VPC
// CNI's names (GeneratePodHostVethName), so after a switch the veths of
// existing pods are recognised, and policy engines that derive the name
// the same way (Calico) keep working. With a prefix of at most 4
// characters the name fits the kernel's 15.
func HostVethName(prefix, podNamespace, podName string) string {
	sum := sha1.Sum([]byte(podNamespace + "." + podName))
	return prefix + hex.EncodeToString(sum[:])[:11]
}
