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

	"github.com/vpcnet/vpcnet/verdicts"
)

// The verdict types are package verdicts', named here too for the
// compiler's callers.
type (
	Protocol  = verdicts.Protocol
	Mode      = verdicts.Mode
	Ruleset   = verdicts.Ruleset
	PodRef    = verdicts.PodRef
	PodRules  = verdicts.PodRules
	Isolation = verdicts.Isolation
	Allow     = verdicts.Allow
	Port      = verdicts.Port
	Drops     = verdicts.Drops
	Conn      = verdicts.Conn
)

// The protocols and modes, as package verdicts names them.
const (
	TCP      = verdicts.TCP
	UDP      = verdicts.UDP
	SCTP     = verdicts.SCTP
	Standard = verdicts.Standard
	Strict   = verdicts.Strict
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
// Nothing in it may change once it is compiled: a Compiler keeps
// references to its pods, policies and label maps, not copies.
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
	// EgressV4Veth is the host end of the pod's IPv4 egress veth (an
	// IPv6 node with ENABLE_V4_EGRESS), carried into its PodRules.
	EgressV4Veth string
	// Bound says the API server has bound the pod to this node and it
	// has no address here yet: its verdicts are compiled all the same,
	// with no address, so that its rules are in place before its Add.
	Bound bool
}
