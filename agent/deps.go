package agent

import (
	"context"
	"net/netip"

	"github.com/vpcnet/vpcnet/cloud"
	"github.com/vpcnet/vpcnet/limits"
)

// Cloud is what the agent asks of EC2 and IMDS. *cloud.Client implements
// it; every call is rate limited, retried and measured there.
type Cloud interface {
	DescribeSelf(ctx context.Context) (cloud.Self, error)
	InstanceLimits(ctx context.Context, instanceType string) (limits.Limits, error)
	DescribeSubnets(ctx context.Context, ids ...string) ([]cloud.Subnet, error)
	ListENIs(ctx context.Context, f cloud.ENIFilter) ([]cloud.ENI, error)
	DescribeENIs(ctx context.Context, ids ...string) ([]cloud.ENI, error)
	CreateENI(ctx context.Context, in cloud.CreateENIInput) (cloud.ENI, error)
	AttachENI(ctx context.Context, eniID, instanceID string, deviceIndex int) (string, error)
	SetDeleteOnTermination(ctx context.Context, eniID, attachmentID string, on bool) error
	DetachENI(ctx context.Context, attachmentID string, force bool) error
	DeleteENI(ctx context.Context, eniID string) error
	AssignAddresses(ctx context.Context, eniID string, count int) ([]netip.Addr, error)
	AssignPrefixes(ctx context.Context, eniID string, count int) ([]netip.Prefix, error)
	UnassignAddresses(ctx context.Context, eniID string, addrs []netip.Addr) error
	UnassignPrefixes(ctx context.Context, eniID string, prefixes []netip.Prefix) error
}

var _ Cloud = (*cloud.Client)(nil)

// Host is the node's own networking: the dataplane package implements it
// with netlink and nftables; tests use a fake.
type Host interface {
	// Setup makes the node-wide dataplane (rules, SNAT, connmark,
	// rp_filter) match the settings. Idempotent.
	Setup(ctx context.Context, n NodeNet) error
	// SetupENI brings a newly attached secondary ENI up with its own route
	// table; TeardownENI removes what SetupENI made. Both idempotent.
	SetupENI(ctx context.Context, e ENINet) error
	TeardownENI(ctx context.Context, e ENINet) error
	// PodAddrs lists the addresses the host routes to a pod's veth: proof,
	// independent of the checkpoint, that a pod still uses them.
	PodAddrs(ctx context.Context) ([]netip.Addr, error)
}

// NodeNet is what host setup needs to know about the node.
type NodeNet struct {
	PrimaryMAC       string
	PrimaryIP        netip.Addr
	VPCCIDRs         []netip.Prefix
	ExcludeSNATCIDRs []netip.Prefix
	ExternalSNAT     bool
	RandomizeSNAT    string
	MTU              int
}

// ENINet is one secondary ENI as the host sees it.
type ENINet struct {
	ID          string
	MAC         string
	DeviceIndex int
	PrimaryIP   netip.Addr
	SubnetCIDR  netip.Prefix
	MTU         int
}

// RouteTable is the policy-routing table of a secondary ENI: device index
// plus one, as the Amazon VPC CNI numbers them. The primary ENI uses main.
func RouteTable(deviceIndex int) int {
	if deviceIndex == 0 {
		return 0
	}
	return deviceIndex + 1
}
