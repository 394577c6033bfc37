package doctor

import (
	"net/netip"
	"time"

	"github.com/vpcnet/vpcnet/checkpoint"
	"github.com/vpcnet/vpcnet/introspect"
)

// Facts is everything Gather could read. A nil part means its source
// could not be read; Sources says why.
type Facts struct {
	Now     time.Time
	Sources []Source

	Agent *AgentFacts
	// Checkpoint is vpcnet's checkpoint file as found on disk.
	Checkpoint *CheckpointFacts
	Host       *HostFacts
	CNI        *CNIFacts
	IMDS       *IMDSFacts
	EC2        *EC2Facts
	Kube       *KubeFacts

	// StartupTaint and ClusterName come from the agent's settings, or
	// doctor's flags when the agent cannot be asked.
	StartupTaint string
	ClusterName  string
	// PathDifferences are the places doctor was told to read that are
	// not the agent's own (Paths.Resolve).
	PathDifferences []PathDifference
}

// AgentFacts is the agent's own view, from its introspection endpoint.
type AgentFacts struct {
	Status introspect.Status
	// Config is /v1/config by setting name; nil if it could not be read.
	Config map[string]string
	// Policy is /v1/policy, the node's NetworkPolicy enforcement; nil if
	// it could not be read (an agent older than enforcement has none).
	Policy *introspect.PolicyStatus
}

// CheckpointFacts is the checkpoint file.
type CheckpointFacts struct {
	Path    string
	ModTime time.Time
	// Missing says there is no file; Corrupt says why it does not decode.
	Missing bool
	Corrupt string
	Entries []checkpoint.Entry
}

// HostFacts is what the node's kernel and filesystem show.
type HostFacts struct {
	Hostname string
	Links    []Link
	// PodRoutes are the /32 and /128 routes to pods through host veths
	// (the agent's "eni..." links): the host's proof a pod lives.
	PodRoutes []PodRoute
	Chains    []NFTChain
	// AWSNodeCheckpoint is the Amazon VPC CNI's ipam.json path when the
	// file exists.
	AWSNodeCheckpoint string
	// KubeletUnauthorized is a line of kubelet's log saying the API
	// server refused it, when the log is readable and has one.
	KubeletUnauthorized string
}

// Link is one network interface on the host.
type Link struct {
	Name string
	MAC  string
	// Kind is netlink's type: "device", "veth", ...
	Kind string
}

// PodRoute is a host route to one pod.
type PodRoute struct {
	Addr netip.Addr
	Dev  string
}

// NFTChain is one nftables chain (iptables-nft's chains appear here too).
type NFTChain struct {
	Family string
	Table  string
	Chain  string
}

// CNIFacts is the CNI configuration directory and plugin binaries, as the
// container runtime sees them.
type CNIFacts struct {
	ConfDir string
	BinDir  string
	// Files are the configuration files in ConfDir, sorted; the runtime
	// uses the first.
	Files []string
	// Ours is the file whose plugins include vpcnet, "" if none.
	Ours string
	// MissingPlugins are plugin types the configuration names that are
	// not in BinDir.
	MissingPlugins []string
	// Plugins are the plugin types of Ours's list, in order.
	Plugins []string
	// StatusRan says CNI STATUS was executed; StatusErr is its error
	// ("" means the plugin said ready).
	StatusRan bool
	StatusErr string
}

// IMDSFacts is what the instance metadata service says about this node.
type IMDSFacts struct {
	InstanceID    string
	InstanceType  string
	Zone          string
	Region        string
	LocalHostname string
	// Role is the instance's IAM role name, "" when IMDS lists none;
	// RoleErr says why it could not be read.
	Role    string
	RoleErr string
	// V1Allowed is set when doctor asked IMDS without a token: true
	// means IMDSv1 answered.
	V1Allowed *bool
	// MAC is the primary interface's MAC address; IPv6s and
	// IPv6Prefixes are what IMDS serves under it (ipv6s, ipv6-prefix),
	// empty when it serves none. IPv6Err says why they could not be read.
	MAC          string
	IPv6s        []netip.Addr
	IPv6Prefixes []netip.Prefix
	IPv6Err      string
}

// EC2Facts is what EC2 says about this instance, its ENIs and subnets.
type EC2Facts struct {
	InstanceID     string
	PrivateDNSName string
	// Metadata is the instance's MetadataOptions; nil when EC2 did not
	// return them.
	Metadata *MetadataOptions
	ENIs     []ENIFact
	Subnets  []SubnetFact
	// Leaked are available ENIs carrying vpcnet's (or the Amazon VPC
	// CNI's) owner tags in this node's subnets.
	Leaked []ENIFact
	// DryRun is each probed action and EC2's answer: "" allowed, else the
	// error code (UnauthorizedOperation means denied).
	DryRun map[string]string
	// Problems are partial failures (a Describe that failed while others
	// answered).
	Problems []string
}

// MetadataOptions is the instance's IMDS configuration.
type MetadataOptions struct {
	HTTPTokens   string // "required" or "optional"
	HopLimit     int
	HTTPEndpoint string // "enabled" or "disabled"
}

// ENIFact is one ENI as EC2 describes it.
type ENIFact struct {
	ID            string
	Status        string
	SubnetID      string
	InterfaceType string
	// DeviceIndex is -1 when not attached.
	DeviceIndex int
	// NetworkCard is the attachment's network card (0 on one-card types).
	NetworkCard int
	PrimaryIP   netip.Addr
	Secondary   []netip.Addr
	Prefixes    []netip.Prefix
	// IPv6Addrs are the ENI's own IPv6 addresses and IPv6Prefixes its
	// IPv6 prefixes (an IPv6 node's pods' /80).
	IPv6Addrs    []netip.Addr
	IPv6Prefixes []netip.Prefix
	Tags         map[string]string
}

// SubnetFact is one of the node's subnets.
type SubnetFact struct {
	ID        string
	CIDR      netip.Prefix
	Available int
	// IPv6CIDRs are the subnet's associated IPv6 blocks.
	IPv6CIDRs []netip.Prefix
}

// KubeFacts is what the Kubernetes API says about this node.
type KubeFacts struct {
	// Node is nil when no Node matches the instance.
	Node    *NodeFact
	FoundBy string // "name" or "providerID"
	// AWSAuth is the aws-auth ConfigMap; nil if it does not exist or
	// could not be read (AWSAuthErr).
	AWSAuth    *AWSAuth
	AWSAuthErr string
	// AWSNodeDaemonSet says kube-system/aws-node exists.
	AWSNodeDaemonSet bool
	// NetworkPolicies is how many NetworkPolicy objects the cluster has;
	// nil when they could not be listed (Problems says why).
	NetworkPolicies *int
	Problems        []string
}

// NodeFact is the Node object.
type NodeFact struct {
	Name       string
	ProviderID string
	// Taints are "key=value:effect".
	Taints      []string
	InternalDNS []string
	Hostname    string // the kubernetes.io/hostname label
}

// AWSAuth is the parts of kube-system/aws-auth doctor reads.
type AWSAuth struct {
	RoleARNs []string
}
