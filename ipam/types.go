// Package ipam is vpcnet's deterministic core: the node's address pool and
// the warm-pool planner. It performs no I/O and reads no clock; time is
// always a parameter, so every behaviour can be replayed in a test.
package ipam

import (
	"net/netip"
	"time"
)

// Key identifies one attachment the way the container runtime does: the
// CNI network name, the container id and the interface name inside it.
type Key struct {
	Network     string
	ContainerID string
	IfName      string
}

func (k Key) String() string { return k.Network + "/" + k.ContainerID + "/" + k.IfName }

// Pod names the Kubernetes pod that holds an address. It is informational:
// ownership is decided by Key alone.
type Pod struct {
	Namespace string
	Name      string
}

func (p Pod) String() string { return p.Namespace + "/" + p.Name }

// ENI is an elastic network interface attached to the node.
type ENI struct {
	ID          string
	DeviceIndex int
	// Primary is true for the instance's primary ENI (device index 0),
	// which can never be detached.
	Primary    bool
	SubnetID   string
	SubnetCIDR netip.Prefix
	// SubnetIPv6CIDR is the subnet's IPv6 /64; invalid for an IPv4-only
	// subnet. IPv6 /80 blocks must lie inside it.
	SubnetIPv6CIDR netip.Prefix
	SecurityGroups []string
	// PrimaryIP is the ENI's own primary address. It belongs to no block
	// and is never handed to a pod.
	PrimaryIP netip.Addr
	CreatedAt time.Time
}

// Assignment is one address held by one attachment.
type Assignment struct {
	Key        Key
	Pod        Pod
	Addr       netip.Addr
	ENIID      string
	Block      netip.Prefix
	AssignedAt time.Time
}

// Snapshot is the planner's read-only view of the pool at one instant.
type Snapshot struct {
	ENIs []ENIState
	// Waiting is the number of Add requests blocked for lack of a free
	// address; the planner treats them as demand on top of the targets.
	Waiting int
	// Expected is how many more Add requests the agent expects soon (a
	// burst still arriving): demand like Waiting, but a guess, and
	// reasons say so rather than count them as waiting.
	Expected int
}

// ENIState is one ENI and the occupancy of each of its blocks.
type ENIState struct {
	ENI
	Blocks []BlockState
}

// BlockState is one secondary /32 or delegated /28 and its occupancy.
// Assigned+Cooling+Free equals the block's size.
type BlockState struct {
	Prefix   netip.Prefix
	Assigned int
	Cooling  int
	Free     int
}
