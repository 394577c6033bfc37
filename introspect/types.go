// Package introspect is the contract of vpcnetd's introspection endpoint
// (/v1/status, /v1/enis, /v1/pods, /v1/config, /readyz): the JSON types the
// agent serves and a small client that reads them. vpcnetctl, doctor,
// the support bundle and the local cloud all read the agent through it, so
// the field names live in one place. Field names are part of the interface
// operators script against: add fields, never rename them.
package introspect

import "time"

// DefaultAddr is where vpcnetd serves introspection unless told otherwise
// (loopback only: it shows every pod's address).
const DefaultAddr = "127.0.0.1:61679"

// Condition is one readiness or diagnostic check and why it holds or not.
type Condition struct {
	Name    string    `json:"name"`
	OK      bool      `json:"ok"`
	Message string    `json:"message"`
	Since   time.Time `json:"since"`
}

// Readyz is the body of /readyz.
type Readyz struct {
	Ready      bool        `json:"ready"`
	Conditions []Condition `json:"conditions"`
}

// ENI is one ENI in the pool, from /v1/enis.
type ENI struct {
	ID          string    `json:"id"`
	DeviceIndex int       `json:"deviceIndex"`
	Primary     bool      `json:"primary"`
	SubnetID    string    `json:"subnetId"`
	SubnetCIDR  string    `json:"subnetCidr"`
	PrimaryIP   string    `json:"primaryIp"`
	MAC         string    `json:"mac"`
	RouteTable  int       `json:"routeTable"`
	CreatedAt   time.Time `json:"createdAt"`
	Total       int       `json:"total"`
	Assigned    int       `json:"assigned"`
	Cooling     int       `json:"cooling"`
	Free        int       `json:"free"`
	Blocks      []Block   `json:"blocks"`
	// DeleteOnTermination says EC2 confirmed the ENI goes with the
	// instance; false while the agent is still setting it.
	DeleteOnTermination bool `json:"deleteOnTermination"`
}

// Block is a secondary address (/32) or a delegated prefix (/28).
type Block struct {
	Prefix   string `json:"prefix"`
	Assigned int    `json:"assigned"`
	Cooling  int    `json:"cooling"`
	Free     int    `json:"free"`
	Holders  []Hold `json:"holders,omitempty"`
}

// Hold is one address held for a pod's attachment, from /v1/pods and the
// holders of a Block.
type Hold struct {
	Address     string    `json:"address"`
	Pod         string    `json:"pod,omitempty"`
	ContainerID string    `json:"containerId"`
	IfName      string    `json:"ifName"`
	Network     string    `json:"network"`
	Since       time.Time `json:"since"`
	Quarantined bool      `json:"quarantined,omitempty"`
}

// Counts are the pool's address counts.
type Counts struct {
	Total    int `json:"total"`
	Assigned int `json:"assigned"`
	Cooling  int `json:"cooling"`
	Free     int `json:"free"`
}

// Status is /v1/status: readiness and what the agent is doing and why.
type Status struct {
	Ready        bool        `json:"ready"`
	Conditions   []Condition `json:"conditions"`
	Version      string      `json:"version"`
	Commit       string      `json:"commit,omitempty"`
	InstanceID   string      `json:"instanceId"`
	InstanceType string      `json:"instanceType"`
	// LimitsSource says where MaxENIs and IPv4PerENI came from: the
	// generated table, EC2's DescribeInstanceTypes, or observed on the
	// node because the type is unknown (DESIGN.md story 1).
	LimitsSource string `json:"limitsSource,omitempty"`
	// MaxENIs is how many ENIs the pool may use: the type's limit on
	// network card 0, lowered by MAX_ENI and by the unmanaged interfaces
	// on that card.
	MaxENIs       int       `json:"maxEnis"`
	IPv4PerENI    int       `json:"ipv4PerEni"`
	Addresses     Counts    `json:"addresses"`
	Waiting       int       `json:"waiting"`
	LastReconcile time.Time `json:"lastReconcile"`
	LastEC2Error  string    `json:"lastEc2Error,omitempty"`
	Shortfall     string    `json:"shortfall,omitempty"`
	// NextFree is when the first cooling address comes free, set while
	// any address cools (DESIGN.md story 8).
	NextFree *time.Time `json:"nextFree,omitempty"`
	// Planned is what the planner would change now, with its reasons:
	// empty means the pool is at the target the settings ask for, or,
	// with a Shortfall, that a limit stops it growing there.
	Planned []string `json:"planned"`
	// GrowthHeldUntil is set while growth waits after EC2 refused it.
	GrowthHeldUntil *time.Time `json:"growthHeldUntil,omitempty"`
	ReleaseHold     string     `json:"releaseHold,omitempty"`
	Quarantined     []string   `json:"quarantined,omitempty"`
	StaleEntries    []Hold     `json:"staleCheckpointEntries,omitempty"`
	// Reclaimed counts assignments the agent released itself because
	// their pod was gone from the host (a DEL it never saw).
	Reclaimed int `json:"reclaimed"`
	// Diagnostics never make the agent unready; doctor reads them.
	Diagnostics      []Condition `json:"diagnostics"`
	Kubernetes       KubeState   `json:"kubernetes"`
	CustomNetworking string      `json:"customNetworking,omitempty"`
	// MaxPods is the max pods the pool is planned for, where it came
	// from, and whether it fits the node.
	MaxPods MaxPods `json:"maxPods"`
	// IAM is what the start-up DryRun probes found the node's role may
	// call.
	IAM IAMStatus `json:"iam"`
	// PrefixFallback is set while the node gives pods single secondary
	// addresses because EC2 found no free /28 in its subnet.
	PrefixFallback *PrefixFallback `json:"prefixFallback,omitempty"`
	// Unmanaged are the interfaces attached to the instance that vpcnet
	// leaves alone (trunk, EFA, other network cards, no_manage); those on
	// network card 0 take ENI slots from the pool.
	Unmanaged []UnmanagedInterface `json:"unmanagedInterfaces,omitempty"`
	// Budget is the EC2 budget controller as this agent sees it; absent
	// when VPCNET_BUDGET_LEASE names none.
	Budget *BudgetStatus `json:"budget,omitempty"`
}

// BudgetStatus is the agent's view of the EC2 budget controller.
type BudgetStatus struct {
	// Lease is VPCNET_BUDGET_LEASE.
	Lease string `json:"lease"`
	// Granted counts jobs the controller granted; Alone those that
	// called EC2 on the node's own budget because it did not answer.
	Granted uint64 `json:"granted"`
	Alone   uint64 `json:"alone"`
	// Answered counts the controller's answers, the subnet-pressure
	// polls included.
	Answered uint64 `json:"answered"`
	// AloneUntil is set while the controller did not answer: the agent
	// calls EC2 on its own budget until then; AloneBecause says why.
	AloneUntil   *time.Time `json:"aloneUntil,omitempty"`
	AloneBecause string     `json:"aloneBecause,omitempty"`
	// SubnetsUnderPressure are the node's subnets the controller says
	// are nearly full: the pool keeps no warm addresses on them.
	SubnetsUnderPressure []string `json:"subnetsUnderPressure,omitempty"`
}

// IAMStatus is the IAM preflight: each EC2 action the enabled features
// need, tried with DryRun.
type IAMStatus struct {
	// Checked is when the last pass ran; zero before the first.
	Checked time.Time `json:"checked"`
	// Recorded says no probe ran this start: a pass recorded on the
	// node (at Checked), still valid, vouches for the permissions.
	Recorded bool `json:"recorded,omitempty"`
	// Missing are the actions EC2 refused (UnauthorizedOperation).
	Missing []MissingPermission `json:"missing,omitempty"`
	// FeaturesOff are the features the agent runs without because an
	// action they need is missing.
	FeaturesOff []string `json:"featuresOff,omitempty"`
	// Unknown are actions EC2 did not answer for (throttling, no
	// answer); they are asked again.
	Unknown []string `json:"unknown,omitempty"`
	// NotProbed are actions vpcnet calls that cannot be asked with
	// DryRun: a missing permission for them shows only when called.
	NotProbed []string `json:"notProbed,omitempty"`
}

// MissingPermission is one EC2 action the node's role may not call.
type MissingPermission struct {
	Action   string   `json:"action"` // ec2:Action
	Features []string `json:"features"`
	// Add is the policy statement that grants it, as in
	// deploy/iam-policy.json.
	Add string `json:"add"`
	// Message is EC2's answer.
	Message string `json:"message,omitempty"`
}

// MaxPods is the node's max pods: the pool never grows past what this
// many pods can use.
type MaxPods struct {
	// Value is the max pods in effect; Source is "kubelet" (the Node's
	// status.capacity.pods), "MAX_PODS" or "EKS rule".
	Value  int    `json:"value"`
	Source string `json:"source"`
	// Kubelet is the kubelet's value, 0 while unknown; Setting is
	// MAX_PODS, 0 when unset; Rule is EKS's rule for this node.
	Kubelet int `json:"kubelet,omitempty"`
	Setting int `json:"setting,omitempty"`
	Rule    int `json:"rule"`
	// Addressable is the most pods the node's ENIs can give addresses
	// to; Recommended is EKS's recommended max pods (at most 110, or 250
	// above 30 vCPUs).
	Addressable int `json:"addressable"`
	Recommended int `json:"recommended"`
	// Problem says the value is above Addressable (Warning) or far below
	// Recommended, and what to do.
	Problem string `json:"problem,omitempty"`
	Warning bool   `json:"warning,omitempty"`
}

// PrefixFallback: the subnet is fragmented for prefixes (EC2's
// InsufficientCidrBlocks) and the node grows by single addresses.
type PrefixFallback struct {
	// Reason is subnet_fragmented, as in the pods' errors and the
	// vpcnet_no_address_errors_total metric.
	Reason        string    `json:"reason"`
	SubnetID      string    `json:"subnetId"`
	FreeAddresses int       `json:"freeAddresses"`
	Since         time.Time `json:"since"`
	// RetryPrefixesAt is when the pool asks for prefixes again.
	RetryPrefixesAt time.Time `json:"retryPrefixesAt"`
	Fix             string    `json:"fix"`
}

// UnmanagedInterface is an attached interface that is not vpcnet's.
type UnmanagedInterface struct {
	ID          string `json:"id"`
	NetworkCard int    `json:"networkCard"`
	DeviceIndex int    `json:"deviceIndex"`
	Reason      string `json:"reason"`
}

// KubeState is what the agent's Kubernetes layer knows, for /v1/status,
// the diagnostic conditions and custom networking.
type KubeState struct {
	// Enabled is false when the agent runs without an API server.
	Enabled bool `json:"enabled"`
	// Source says how the API server is reached, or why it is not.
	Source string `json:"source"`
	// Reachable says whether the API server answered the last request;
	// Since is when that last changed. LastError is the last failure,
	// which may be an answer (a missing RBAC verb) rather than silence.
	Reachable bool      `json:"reachable"`
	Since     time.Time `json:"since"`
	LastError string    `json:"lastError,omitempty"`
	// Node is this node's Node name once found, and NodeFoundBy how
	// ("MY_NODE_NAME" or "providerID"); NodeProblem says why it is not
	// found yet.
	Node        string `json:"node,omitempty"`
	NodeFoundBy string `json:"nodeFoundBy,omitempty"`
	NodeProblem string `json:"nodeProblem,omitempty"`
	// Mismatch says which names of this node disagree (MY_NODE_NAME,
	// the providerID's Node, the host name, EC2's private DNS name).
	Mismatch string `json:"nameMismatch,omitempty"`
	// Pods is how many of this node's pods the watch holds.
	Pods int `json:"pods"`
	// MaxPods is the kubelet's max pods, the Node's status.capacity.pods;
	// 0 until the Node is found or while the kubelet has not said.
	MaxPods int `json:"maxPods,omitempty"`
	// Cordoned says the Node carries the taint
	// node.kubernetes.io/unschedulable:NoSchedule, which cordoning adds
	// (the Amazon VPC CNI's test for a non-schedulable node).
	Cordoned bool `json:"cordoned,omitempty"`
	// StartupTaint says what became of VPCNET_STARTUP_TAINT; TaintRemoved
	// is true once it is off the Node, or when there is none to remove.
	StartupTaint string         `json:"startupTaint"`
	TaintRemoved bool           `json:"startupTaintRemoved"`
	ENIConfig    ENIConfigState `json:"eniConfig"`
}

// ENIConfigState is the node's ENIConfig as the API server has it.
type ENIConfigState struct {
	// Name is the ENIConfig the node asks for, and From where the name
	// came from (annotation, label, or the default); both empty until the
	// Node is known.
	Name string `json:"name,omitempty"`
	From string `json:"from,omitempty"`
	// Known says the API server has answered about the ENIConfig, so
	// Found and Problem are a verdict rather than a wait.
	Known bool `json:"known"`
	// Found says the ENIConfig exists and is usable; Problem says why not.
	Found          bool     `json:"found"`
	Subnet         string   `json:"subnet,omitempty"`
	SecurityGroups []string `json:"securityGroups,omitempty"`
	Problem        string   `json:"problem,omitempty"`
}

// Setting is one agent setting, from /v1/config.
type Setting struct {
	Name    string `json:"name"`
	Value   string `json:"value"`
	Default string `json:"default"`
	Meaning string `json:"meaning"`
}
