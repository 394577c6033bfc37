// Package verdicts is what NetworkPolicy makes of one node's pods: for
// each isolated pod, per direction, which peers and ports pass
// (Ruleset), and NETWORK_POLICY_ENFORCING_MODE's values (Mode). The
// compiler (package netpol) produces it from the API's objects; the
// dataplane writes it, and the settings name its modes, without linking
// the Kubernetes API types: the CNI plugin links both.
package verdicts

import "net/netip"

// Mode is how a pod whose policies cannot be known yet starts.
type Mode string

const (
	// Standard: a pod whose policies cannot be known yet starts open,
	// and is isolated as soon as they are.
	Standard Mode = "standard"
	// Strict: such a pod starts isolated in both directions with
	// nothing allowed (traffic with its own node aside), until its
	// policies are known.
	Strict Mode = "strict"
)

// Protocol is a transport protocol a policy port names.
type Protocol string

// The protocols NetworkPolicy ports may name.
const (
	TCP  Protocol = "TCP"
	UDP  Protocol = "UDP"
	SCTP Protocol = "SCTP"
)

// Ruleset is the verdicts of a node's pods: one entry per local pod that
// is isolated in at least one direction, sorted by address. A pod not in
// it is open both ways.
type Ruleset struct {
	Pods []PodRules
}

// PodRef names a local pod and its address.
type PodRef struct {
	Namespace string
	Name      string
	IP        netip.Addr
}

// PodRules is one local pod's verdicts.
type PodRules struct {
	Pod PodRef
	// Ingress and Egress are nil when the pod is open in that direction.
	Ingress *Isolation
	Egress  *Isolation
	// EgressV4Veth, on an IPv6 node with IPv4 egress (ENABLE_V4_EGRESS),
	// is the host end of the pod's IPv4 egress veth, named before the
	// egress plugin makes it: Egress judges the pod's IPv4 traffic
	// leaving through it too. Empty: the pod has none.
	EgressV4Veth string
}

// Isolation is what passes in one direction of an isolated pod: a
// connection passes when some Allow matches it; none (an empty Allows)
// means nothing passes.
type Isolation struct {
	// Policies are the selecting policies, "namespace/name", sorted;
	// empty for an Unknown pod under Strict.
	Policies []string
	Allows   []Allow
}

// Allow lets connections with one of Peers (the source for ingress, the
// destination for egress) on one of Ports pass.
type Allow struct {
	// Rule says where it comes from: "namespace/name ingress[0]".
	Rule string
	// AnyPeer allows every address; otherwise Peers, which may be empty
	// (a selector that matches no pod yet allows nothing).
	AnyPeer bool
	Peers   []netip.Prefix
	// Ports nil allows every port of every protocol.
	Ports []Port
}

// Port is a protocol and a range of destination ports, First to Last
// inclusive; First 0 means every port of Protocol.
type Port struct {
	Protocol Protocol
	First    uint16
	Last     uint16
}

// AllPorts says the Port matches every port of its protocol.
func (p Port) AllPorts() bool { return p.First == 0 }

// Drops counts the packets dropped to (Ingress) and from (Egress) one
// isolated pod.
type Drops struct {
	Ingress uint64
	Egress  uint64
}
