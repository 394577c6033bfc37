package sim

import (
	"errors"
	"fmt"
	"os"
	"time"
)

// Topology describes the cloud the emulator starts with: one VPC, its
// subnets and security groups, the running instances, and the knobs that
// make the cloud behave like AWS on a bad day (delays, lag, throttling,
// faults). README.md in this directory documents every field.
type Topology struct {
	Region    string       `json:"region"`
	AccountID string       `json:"accountId,omitempty"`
	VPC       VPCSpec      `json:"vpc"`
	Subnets   []SubnetSpec `json:"subnets"`
	// SecurityGroups lists the groups that exist; the first is the VPC's
	// default group, given to ENIs created without SecurityGroupId.N.
	SecurityGroups []string             `json:"securityGroups"`
	InstanceTypes  []InstanceTypeSpec   `json:"instanceTypes,omitempty"`
	Instances      []InstanceSpec       `json:"instances"`
	AttachDelay    Duration             `json:"attachDelay,omitempty"`
	DetachDelay    Duration             `json:"detachDelay,omitempty"`
	IMDSLag        Duration             `json:"imdsLag,omitempty"`
	Throttle       ThrottleSpec         `json:"throttle,omitempty"`
	Faults         map[string]FaultSpec `json:"faults,omitempty"`
	// Roles are IAM roles by name; an instance names its own. A request
	// signed with an instance ID as its access key ID is that instance's
	// (see roles.go).
	Roles map[string]RoleSpec `json:"roles,omitempty"`
	// AddressOrder is how free addresses are picked: "sequential" (lowest
	// first, the default) or "random" (seeded, scattering addresses over
	// the subnet the way EC2 does, which fragments it for prefixes).
	AddressOrder string `json:"addressOrder,omitempty"`
	Seed         int64  `json:"seed,omitempty"`
}

// VPCSpec is the one VPC of the topology.
type VPCSpec struct {
	ID    string   `json:"id"`
	CIDRs []string `json:"cidrs"`
	// IPv6CIDR is the VPC's Amazon-provided IPv6 /56; empty leaves the
	// VPC IPv4-only (AssociateVpcCidrBlock can add one while running).
	IPv6CIDR string `json:"ipv6Cidr,omitempty"`
}

// SubnetSpec is one subnet of the VPC.
type SubnetSpec struct {
	ID   string            `json:"id"`
	AZ   string            `json:"az"`
	CIDR string            `json:"cidr"`
	Tags map[string]string `json:"tags,omitempty"`
	// IPv6CIDR is the subnet's IPv6 /64, inside vpc.ipv6Cidr; empty
	// leaves the subnet IPv4-only.
	IPv6CIDR string `json:"ipv6Cidr,omitempty"`
	// IPv6Native makes the subnet IPv6-only (it needs ipv6Cidr). EC2
	// gives such a subnet's ENIs no IPv4 address; the emulator still
	// gives each a primary IPv4 from cidr (see README.md).
	IPv6Native bool `json:"ipv6Native,omitempty"`
	// AssignIPv6AddressOnCreation gives every ENI created in the subnet,
	// instances' primary ENIs included, one IPv6 address. Always on in
	// an IPv6-only subnet, as EC2 requires.
	AssignIPv6AddressOnCreation bool `json:"assignIpv6AddressOnCreation,omitempty"`
}

// InstanceTypeSpec defines an instance type the limits table does not
// know, so DescribeInstanceTypes can answer for it.
type InstanceTypeSpec struct {
	Name       string `json:"name"`
	MaxENIs    int    `json:"maxENIs"`
	IPv4PerENI int    `json:"ipv4PerENI"`
	// Hypervisor is "nitro" (the default) or "xen"; only nitro types take
	// /28 prefixes.
	Hypervisor string `json:"hypervisor,omitempty"`
	// NetworkCards are the ENIs each network card takes, card 0 (the
	// default card) first, which must be MaxENIs; absent is one card.
	// A type with several has interfaces a node agent must not manage,
	// as the table's multi-card types do, at a size tests can afford.
	NetworkCards []int `json:"networkCards,omitempty"`
}

// InstanceSpec is one running instance. Its primary ENI exists from the
// start, in its subnet, with its primary address.
type InstanceSpec struct {
	ID     string `json:"id"`
	Type   string `json:"type"`
	Subnet string `json:"subnet"`
	// PrivateIP is the primary address; empty picks one from the subnet.
	PrivateIP      string            `json:"privateIp,omitempty"`
	SecurityGroups []string          `json:"securityGroups,omitempty"`
	Tags           map[string]string `json:"tags,omitempty"`
	// Role names the instance's IAM role in Roles; empty allows every
	// action.
	Role string `json:"role,omitempty"`
	// Interfaces are attached at launch besides the primary ENI, as a
	// launch template or another controller does before any agent
	// starts: EFA interfaces on other network cards, a trunk, an ENI
	// tagged no_manage.
	Interfaces []InterfaceSpec `json:"interfaces,omitempty"`
	// ConnectionTracking sets the primary ENI's connection-tracking idle
	// timeouts, as a launch template's ConnectionTrackingSpecification
	// does; absent leaves EC2's defaults (and none described).
	ConnectionTracking *ConnTrackSpec `json:"connectionTracking,omitempty"`
}

// RoleSpec is an IAM role as the emulator models it: every EC2 action is
// allowed but those it denies.
type RoleSpec struct {
	// Deny lists EC2 actions (CreateNetworkInterface, CreateTags, ...)
	// the role may not call: EC2 answers UnauthorizedOperation, with or
	// without DryRun.
	Deny []string `json:"deny,omitempty"`
}

// InterfaceSpec is one interface attached to an instance at launch.
type InterfaceSpec struct {
	// Type is EC2's InterfaceType: interface (the default), efa,
	// efa-only (which has no IP address) or trunk.
	Type string `json:"type,omitempty"`
	// NetworkCard and DeviceIndex place the attachment; card 0 device 0
	// is the primary ENI's.
	NetworkCard int `json:"networkCard,omitempty"`
	DeviceIndex int `json:"deviceIndex"`
	// Subnet defaults to the instance's; it must be in the same zone.
	Subnet string `json:"subnet,omitempty"`
	// SecondaryAddresses is how many secondary addresses it holds.
	SecondaryAddresses int               `json:"secondaryAddresses,omitempty"`
	Tags               map[string]string `json:"tags,omitempty"`
}

// ThrottleSpec configures the account-wide request token buckets. Every
// action has its own bucket, sized by its class unless Actions overrides it.
type ThrottleSpec struct {
	// Mutating sizes the buckets of actions that change state.
	Mutating BucketSpec `json:"mutating,omitempty"`
	// Describe sizes the buckets of Describe* actions.
	Describe BucketSpec            `json:"describe,omitempty"`
	Actions  map[string]BucketSpec `json:"actions,omitempty"`
	// Disabled turns throttling off.
	Disabled bool `json:"disabled,omitempty"`
}

// BucketSpec is a token bucket: Burst tokens at most, Refill tokens added
// per second. The zero value means the class default.
type BucketSpec struct {
	Burst  int     `json:"burst"`
	Refill float64 `json:"refill"`
}

// EC2's published request-token defaults for the actions emulated here:
// the ENI mutating actions (create, delete, assign, unassign, modify) hold
// 100 tokens and refill 5 per second; non-mutating (Describe) actions hold
// 100 and refill 20 per second. Attach and detach are smaller (50) in EC2;
// a topology can say so per action.
var (
	defaultMutatingBucket = BucketSpec{Burst: 100, Refill: 5}
	defaultDescribeBucket = BucketSpec{Burst: 100, Refill: 20}
)

// FaultSpec is Fault as written in a topology file.
type FaultSpec struct {
	ErrorRate float64  `json:"errorRate,omitempty"`
	Code      string   `json:"code,omitempty"`
	Latency   Duration `json:"latency,omitempty"`
}

// Fault returns the runtime fault the spec describes.
func (f FaultSpec) Fault() Fault {
	return Fault{ErrorRate: f.ErrorRate, Code: f.Code, Latency: time.Duration(f.Latency)}
}

// ParseTopology reads a topology from YAML or JSON and checks it. Unknown
// fields are errors, so a misspelt knob is not silently ignored. Every
// error is a *TopologyError, with the line when the mistake has one.
func ParseTopology(data []byte) (*Topology, error) {
	var t Topology
	if err := decodeTopology(data, &t); err != nil {
		var te *TopologyError
		if errors.As(err, &te) {
			return nil, te
		}
		return nil, &TopologyError{Err: err}
	}
	if err := t.validate(); err != nil {
		te := &TopologyError{Err: err}
		var pe *pathError
		if errors.As(err, &pe) {
			te.Line = lineOf(data, pe.path)
		}
		return nil, te
	}
	return &t, nil
}

// LoadTopology reads and checks the topology file at path. An error in
// the file reads "FILE:LINE: what is wrong", as compilers write it, so
// editors jump to it.
func LoadTopology(path string) (*Topology, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("load topology: %w", err)
	}
	t, err := ParseTopology(data)
	if err != nil {
		var te *TopologyError
		if errors.As(err, &te) && te.Line > 0 {
			where := *te
			where.Line = 0
			return nil, fmt.Errorf("topology %s:%d: %w", path, te.Line, &where)
		}
		return nil, fmt.Errorf("topology %s: %w", path, err)
	}
	return t, nil
}
