package agent

import (
	"fmt"

	"github.com/vpcnet/vpcnet/cloud"
)

// Event reasons the agent records, in UpperCamelCase as Kubernetes
// wants. Operators alert on them: add reasons, never rename one.
const (
	EventSubnetExhausted = "SubnetExhausted"
	EventENILimit        = "ENILimitReached"
	EventMaxPods         = "MaxPodsReached"
	EventThrottled       = "EC2Throttled"
	EventUnauthorized    = "MissingIAMPermission"
	EventCooldown        = "AddressesCoolingDown"
	EventEC2Error        = "EC2Error"
	EventPending         = "AddressPending"
	EventENIConfig       = "ENIConfigNotReady"
	// EventCordoned: the node is cordoned, and
	// AWS_MANAGE_ENIS_NON_SCHEDULABLE=false holds its pool.
	EventCordoned  = "NodeCordoned"
	EventLeakedENI = "LeakedENICollected"
	// EventSubnetFragmented: the subnet has free addresses but no free
	// /28 for a prefix; the node falls back to single addresses.
	EventSubnetFragmented = "SubnetFragmented"
)

// podEventReasons maps NoAddressError.Reason to the pod Event's reason.
var podEventReasons = map[string]string{
	ReasonSubnetExhausted:  EventSubnetExhausted,
	ReasonENILimit:         EventENILimit,
	ReasonMaxPods:          EventMaxPods,
	ReasonThrottled:        EventThrottled,
	ReasonUnauthorized:     EventUnauthorized,
	ReasonCooldown:         EventCooldown,
	ReasonEC2Error:         EventEC2Error,
	ReasonPending:          EventPending,
	ReasonENIConfig:        EventENIConfig,
	ReasonCordoned:         EventCordoned,
	ReasonSubnetFragmented: EventSubnetFragmented,
}

// recordNoAddress tells the pod, where kubectl describe shows it, why it
// got no address. The message is the error's detail without the pool's
// counts, so the repeats of a stuck pod are one Event with a count.
func (a *Agent) recordNoAddress(e *NoAddressError) {
	if e.Pod.Name == "" {
		return // the runtime did not say which pod
	}
	reason, ok := podEventReasons[e.Reason]
	if !ok {
		panic("agent: no Event reason for " + e.Reason)
	}
	a.kube.Record(Event{Pod: e.Pod, Warning: true, Reason: reason, Message: "no VPC address for this pod: " + e.Detail})
}

// ENICollected records on the Node that the leaked-ENI collector deleted
// e; leakgc.Options.OnCollected calls it.
func (a *Agent) ENICollected(e cloud.ENI) {
	msg := fmt.Sprintf("deleted leaked ENI %s in %s", e.ID, e.SubnetID)
	if owner := e.Tags[cloud.TagInstanceID]; owner != "" {
		msg += ", left by instance " + owner
	}
	if at := e.Tags[cloud.TagCreatedAt]; at != "" {
		msg += ", created " + at
	}
	a.kube.Record(Event{Reason: EventLeakedENI, Message: msg})
}
