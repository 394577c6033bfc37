package agent

import (
	"context"
	"github.com/vpcnet/vpcnet/introspect"

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
	// ScheduledPods lists the pods bound to this node that need a
	// pod-network address (not hostNetwork, not finished, not being
	// deleted): Adds on their way. It must not wait for the API server.
	ScheduledPods() []ipam.Pod
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
type KubeState = introspect.KubeState

// ENIConfigState is the node's ENIConfig as the API server has it.
type ENIConfigState = introspect.ENIConfigState

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

// ScheduledPods knows of none: there is no API server to ask.
func (NoKube) ScheduledPods() []ipam.Pod { return nil }

// Record drops e: there is nowhere to record it.
func (NoKube) Record(Event) {}
