package introspect

import (
	"context"
	"net/url"
	"time"
)

// PolicyStatus is the node's NetworkPolicy enforcement, from /v1/policy.
type PolicyStatus struct {
	// Enabled is false when VPCNET_NETWORK_POLICY is off (or the agent has
	// no API server); Source then says why and what to do.
	Enabled bool   `json:"enabled"`
	Source  string `json:"source,omitempty"`
	// Mode is NETWORK_POLICY_ENFORCING_MODE: standard or strict.
	Mode string `json:"mode"`
	// Synced says the watches of NetworkPolicies, namespaces and pods
	// have listed once: until then the rules are the last run's.
	Synced bool `json:"synced"`
	// Policies is how many NetworkPolicy objects the cluster has.
	Policies int `json:"policies"`
	// Isolated is how many of this node's pods some policy isolates.
	Isolated int `json:"isolated"`
	// Applied is when the rules last matched what the watches knew;
	// PendingSince, when set, is the oldest change the rules do not show
	// yet (the node's lag behind the API server), and LastError why the
	// last write failed.
	Applied      time.Time  `json:"applied"`
	PendingSince *time.Time `json:"pendingSince,omitempty"`
	LastError    string     `json:"lastError,omitempty"`
	// Pods is filled for /v1/policy?pod=namespace/name: that pod's
	// verdicts (none when it is not on this node).
	Pods []PolicyPod `json:"pods,omitempty"`
}

// PolicyPod is one pod's verdicts.
type PolicyPod struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	IP        string `json:"ip"`
	// Known is false when the agent does not know the pod's labels yet;
	// under strict mode such a pod is isolated with nothing allowed.
	Known bool `json:"known"`
	// Ingress and Egress are nil when the pod is open in that direction.
	Ingress *PolicyDirection `json:"ingress,omitempty"`
	Egress  *PolicyDirection `json:"egress,omitempty"`
	// Dropped counts the packets dropped to and from the pod.
	DroppedIngress uint64 `json:"droppedIngress"`
	DroppedEgress  uint64 `json:"droppedEgress"`
}

// PolicyDirection is what one isolated direction allows.
type PolicyDirection struct {
	// Policies select the pod for this direction, "namespace/name".
	Policies []string      `json:"policies"`
	Allows   []PolicyAllow `json:"allows"`
}

// PolicyAllow is one rule's allowance: peers (CIDRs) and ports.
type PolicyAllow struct {
	Rule    string   `json:"rule"`
	AnyPeer bool     `json:"anyPeer,omitempty"`
	Peers   []string `json:"peers,omitempty"`
	// Ports empty means every port of every protocol; each entry is
	// "TCP/80", "UDP/5000-5010" or "SCTP" (every port).
	Ports []string `json:"ports,omitempty"`
}

// Policy reads /v1/policy; pod, when not empty ("namespace/name"), asks
// for that pod's verdicts too.
func (c *Client) Policy(ctx context.Context, pod string) (PolicyStatus, error) {
	path := "/v1/policy"
	if pod != "" {
		path += "?pod=" + url.QueryEscape(pod)
	}
	return getJSON[PolicyStatus](ctx, c, path)
}
