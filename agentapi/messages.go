package agentapi

// The calls, by the name a request carries.
const (
	// MethodAdd assigns an address to an attachment (AddRequest, AddReply).
	// Idempotent for the same attachment; the assignment is on disk before
	// the reply is sent.
	MethodAdd = "Add"
	// MethodDel releases the attachment's address into cooldown (DelRequest,
	// DelReply). Deleting an unknown attachment succeeds.
	MethodDel = "Del"
	// MethodCheck returns the attachment's assignment (CheckRequest,
	// AddReply), or NotFound.
	MethodCheck = "Check"
	// MethodStatus reports whether the agent can serve Add now, condition
	// by condition (StatusRequest, StatusReply).
	MethodStatus = "Status"
	// MethodGC releases every assignment of the network not in the
	// runtime's valid set and older than the cooldown, so an Add in flight
	// is never collected (GCRequest, GCReply).
	MethodGC = "GC"
)

// Attachment is the runtime's identity for one pod interface.
type Attachment struct {
	Network     string `json:"network,omitempty"`
	ContainerId string `json:"container_id,omitempty"`
	IfName      string `json:"if_name,omitempty"`
}

// AddRequest asks for an address for an attachment.
type AddRequest struct {
	Attachment   *Attachment `json:"attachment,omitempty"`
	PodNamespace string      `json:"pod_namespace,omitempty"`
	PodName      string      `json:"pod_name,omitempty"`
	Netns        string      `json:"netns,omitempty"`
	// PortMappings are the pod's hostPorts (the runtime's portMappings);
	// the agent writes their rules before it replies and removes them
	// with the address.
	PortMappings []PortMapping `json:"port_mappings,omitempty"`
}

// PortMapping is one hostPort, as the runtime passes it to the plugin.
type PortMapping struct {
	HostPort      int32  `json:"host_port,omitempty"`
	ContainerPort int32  `json:"container_port,omitempty"`
	Protocol      string `json:"protocol,omitempty"`
	HostIp        string `json:"host_ip,omitempty"`
}

// AddReply carries everything the plugin needs to wire the pod.
type AddReply struct {
	Address          string   `json:"address,omitempty"` // pod IPv4 address, wired as a /32
	EniId            string   `json:"eni_id,omitempty"`
	DeviceIndex      int32    `json:"device_index,omitempty"`
	RouteTable       int32    `json:"route_table,omitempty"` // 0 for the primary ENI (main table)
	SubnetCidr       string   `json:"subnet_cidr,omitempty"`
	SubnetGateway    string   `json:"subnet_gateway,omitempty"`
	VpcCidrs         []string `json:"vpc_cidrs,omitempty"`
	Mtu              int32    `json:"mtu,omitempty"`     // host interfaces
	PodMtu           int32    `json:"pod_mtu,omitempty"` // pod eth0
	ExternalSnat     bool     `json:"external_snat,omitempty"`
	ExcludeSnatCidrs []string `json:"exclude_snat_cidrs,omitempty"`
	NodePrimaryIp    string   `json:"node_primary_ip,omitempty"`
	PodNamespace     string   `json:"pod_namespace,omitempty"`
	PodName          string   `json:"pod_name,omitempty"`
	// Existing: the attachment already held this address before this call
	// (the runtime repeated ADD). A plugin that fails to wire the pod must
	// not release it then: the first ADD's pod may be using it.
	Existing bool `json:"existing,omitempty"`
}

// DelRequest asks to release an attachment's address.
type DelRequest struct {
	Attachment *Attachment `json:"attachment,omitempty"`
	// HostVeth and HostVethIndex name the pod's host veth when the plugin
	// has already removed everything that routes to the pod, and leaves
	// deleting the pair (which waits on the kernel) to the agent.
	HostVeth      string `json:"host_veth,omitempty"`
	HostVethIndex int32  `json:"host_veth_index,omitempty"`
}

// DelReply says what was released.
type DelReply struct {
	Address  string `json:"address,omitempty"` // empty when nothing was held
	Released bool   `json:"released,omitempty"`
	// VethDeleting: the agent deletes the veth the request named, after
	// this reply. Without it (an agent that cannot) the plugin deletes it.
	VethDeleting bool `json:"veth_deleting,omitempty"`
}

// CheckRequest asks for an attachment's assignment.
type CheckRequest struct {
	Attachment *Attachment `json:"attachment,omitempty"`
}

// StatusRequest asks whether the agent can serve Add.
type StatusRequest struct{}

// Condition is one reason the agent is or is not ready.
type Condition struct {
	Name    string `json:"name,omitempty"`
	Ok      bool   `json:"ok,omitempty"`
	Message string `json:"message,omitempty"`
}

// StatusReply is the agent's readiness, condition by condition.
type StatusReply struct {
	Ready      bool         `json:"ready,omitempty"`
	Conditions []*Condition `json:"conditions,omitempty"`
}

// GCRequest lists the attachments the runtime still has.
type GCRequest struct {
	// Network is the CNI network being collected; only its attachments are
	// considered.
	Network string        `json:"network,omitempty"`
	Valid   []*Attachment `json:"valid,omitempty"`
}

// GCReply lists the addresses put into cooldown.
type GCReply struct {
	Released []string `json:"released,omitempty"`
}
