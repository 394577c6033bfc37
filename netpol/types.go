// Package netpol compiles Kubernetes NetworkPolicy (networking.k8s.io/v1)
// into the verdicts of one node's pods: for each pod on the node, whether
// it is isolated for ingress and for egress, and if so which peers and
// ports some policy allows. It is the pure core of vpcnet's policy
// enforcement: it reads API objects and returns values; the agent feeds
// it from its watches and the dataplane writes its Ruleset to nftables.
//
// Semantics are the API's (k8s.io/api/networking/v1 and the Kubernetes
// NetworkPolicy documentation):
//   - a pod selected by no policy of a type is open in that direction;
//     selected by any, only what some selecting policy allows passes;
//   - policyTypes defaults to Ingress, plus Egress when the policy has
//     egress rules;
//   - a rule with no peers allows every peer, with no ports every port;
//     a peer is a podSelector (in the policy's namespace), a
//     namespaceSelector (every pod in the matching namespaces), both (the
//     matching pods in the matching namespaces), or an ipBlock less its
//     excepts;
//   - a named port is the target pod's container port of that name for
//     ingress and the peer pod's for egress;
//   - replies of allowed connections, and traffic between a pod and its
//     own node, are not judged here: the dataplane always lets them pass.
//
// Host-network pods are never targets and never pod peers: their address
// is their node's.
package netpol

import (
	"net/netip"

	networkingv1 "k8s.io/api/networking/v1"
)

// Protocol is a transport protocol a policy port names.
type Protocol string

// The protocols NetworkPolicy ports may name.
const (
	TCP  Protocol = "TCP"
	UDP  Protocol = "UDP"
	SCTP Protocol = "SCTP"
)

// Pod is what the compiler knows of a pod: identity, labels, its
// pod-network address and its named container ports.
type Pod struct {
	Namespace string
	Name      string
	Labels    map[string]string
	// IP is the pod's address; the zero Addr means none yet (it is no
	// peer of anything).
	IP          netip.Addr
	HostNetwork bool
	Ports       []ContainerPort
}

// Key is "namespace/name".
func (p Pod) Key() string { return p.Namespace + "/" + p.Name }

// ContainerPort is a named port of one of a pod's containers.
type ContainerPort struct {
	Name     string
	Protocol Protocol
	Port     uint16
}

// Cluster is what the API server says, as the node's watches last saw it.
type Cluster struct {
	Policies []*networkingv1.NetworkPolicy
	// Namespaces maps each namespace's name to its labels. A namespace
	// not in the map is matched by no namespaceSelector.
	Namespaces map[string]map[string]string
	// Pods are the cluster's pods that have an address and are not
	// finished: the candidates for pod peers.
	Pods []Pod
	// Generation, when not zero, changes whenever anything above does,
	// so a Compiler can keep what it computed from an unchanged cluster.
	Generation uint64
}

// Local is a pod on this node: a target.
type Local struct {
	Pod Pod
	// Unknown says the agent does not know the pod's labels (the API
	// server has not told it of the pod yet). Under Strict such a pod is
	// isolated both ways with nothing allowed; under Standard it is open.
	Unknown bool
}

// Mode is NETWORK_POLICY_ENFORCING_MODE, with aws-node's values.
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
