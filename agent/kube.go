package agent

import (
	"context"
	"time"

	"github.com/vpcnet/vpcnet/ipam"
)

// Kube is what the agent asks of the Kubernetes API. The kube package
// implements it with client-go; without an API server (the local cloud)
// the agent runs with NoKube. No method may wait for the API server:
// address management for pods already known goes on while it is away.
type Kube interface {
	// Run finds this instance's Node and watches it, its pods and, with
	// custom networking, its ENIConfig until ctx ends. It calls changed,
	// with no lock held, whenever State may have changed; changed must not
	// block. An unreachable API server is waited out, not returned.
	Run(ctx context.Context, inst Instance, changed func()) error
	// State is what is known now.
	State() KubeState
	// SetReady says whether the agent can serve pods now (every readiness
	// condition holds and the CNI configuration is written). The startup
	// taint is removed only while it can, and never added back.
	SetReady(ready bool)
	// Record queues an Event. Repeats are rate-limited; when the queue is
	// full the Event is dropped rather than waited for.
	Record(e Event)
}

// Instance is what the Kubernetes layer needs to find this node's Node
// when MY_NODE_NAME does not name it: its provider ID is
// aws:///<AvailabilityZone>/<ID>.
type Instance struct {
	ID               string
	AvailabilityZone string
}

// Event is a Kubernetes Event the agent wants recorded.
type Event struct {
	// Pod the Event is about; the zero Pod means this node's Node.
	Pod     ipam.Pod
	Warning bool
	// Reason is one of the Event* constants: operators alert on it.
	Reason  string
	Message string
}

// KubeState is what the Kubernetes layer knows, for /v1/status, the
// diagnostic conditions and custom networking.
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

// NoKube is the Kubernetes layer of an agent that has no API server.
type NoKube struct{}

var _ Kube = NoKube{}

// Run waits for ctx: there is nothing to watch.
func (NoKube) Run(ctx context.Context, _ Instance, _ func()) error {
	<-ctx.Done()
	return nil
}

// State says Kubernetes features are off, and how to turn them on.
func (NoKube) State() KubeState {
	return KubeState{Source: "KUBERNETES_SERVICE_HOST and VPCNET_KUBECONFIG are unset, so node identity, Events, custom networking and the startup taint are off"}
}

// SetReady does nothing: there is no Node to untaint.
func (NoKube) SetReady(bool) {}

// Record drops e: there is nowhere to record it.
func (NoKube) Record(Event) {}
