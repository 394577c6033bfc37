package doctor

import (
	"context"
	"time"

	"github.com/vpcnet/vpcnet/introspect"
)

// Source names, as the report's sources section shows them.
const (
	SourceAgent      = "agent"
	SourceCheckpoint = "checkpoint"
	SourceHost       = "host"
	SourceCNI        = "cni"
	SourceIMDS       = "imds"
	SourceEC2        = "ec2"
	SourceKube       = "kubernetes"
)

// Agent reads vpcnetd's introspection; *introspect.Client is one.
type Agent interface {
	Status(ctx context.Context) (introspect.Status, error)
	Config(ctx context.Context) ([]introspect.Setting, error)
	// Policy reads /v1/policy; doctor asks for no pod ("").
	Policy(ctx context.Context, pod string) (introspect.PolicyStatus, error)
}

// Host reads the node's kernel state and files.
type Host interface {
	Host(ctx context.Context) (HostFacts, error)
}

// CNI reads the CNI configuration directory and runs CNI STATUS.
type CNI interface {
	CNI(ctx context.Context) (CNIFacts, error)
}

// Metadata reads IMDS.
type Metadata interface {
	Metadata(ctx context.Context) (IMDSFacts, error)
}

// CloudQuery is what the EC2 reader needs to know about the node.
type CloudQuery struct {
	InstanceID  string
	Region      string
	ClusterName string
	// InstanceType is probed with DescribeInstanceTypes.
	InstanceType string
	// ExtraSubnets are subnets to search for leaked ENIs besides those of
	// the instance's own ENIs (an ENIConfig's subnet).
	ExtraSubnets []string
}

// Cloud reads EC2, read-only and with DryRun calls.
type Cloud interface {
	Cloud(ctx context.Context, q CloudQuery) (EC2Facts, error)
}

// KubeQuery is what the Kubernetes reader needs to find the Node.
type KubeQuery struct {
	// Names to try, in order (MY_NODE_NAME, the host name, PrivateDnsName).
	Names      []string
	InstanceID string
}

// Kube reads the Kubernetes API.
type Kube interface {
	Kube(ctx context.Context, q KubeQuery) (KubeFacts, error)
}

// Readers are the sources Gather reads; a nil reader is a source doctor
// was told not to read (no kubeconfig, say), reported as not read.
type Readers struct {
	Agent          Agent
	CheckpointPath string
	Host           Host
	CNI            CNI
	Metadata       Metadata
	Cloud          Cloud
	Kube           Kube
	// StartupTaint and ClusterName are used when the agent cannot say.
	StartupTaint string
	ClusterName  string
	Now          func() time.Time
	// Skipped are sources the operator left out (--skip), reported as
	// such rather than as missing.
	Skipped map[string]bool
	// PathDifferences are the places the readers above were told to
	// read that are not the agent's own (Paths.Resolve).
	PathDifferences []PathDifference
}

// notRead starts the detail of a source doctor did not try to read.
const notRead = "not read: "
