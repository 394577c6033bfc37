package agent

import (
	"errors"
	"fmt"

	"github.com/aws/smithy-go"

	"github.com/vpcnet/vpcnet/cloud"
	"github.com/vpcnet/vpcnet/ipam"
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
	EventLeakedENI       = "LeakedENICollected"
)

// podEventReasons maps NoAddressError.Reason to the pod Event's reason.
var podEventReasons = map[string]string{
	ReasonSubnetExhausted: EventSubnetExhausted,
	ReasonENILimit:        EventENILimit,
	ReasonMaxPods:         EventMaxPods,
	ReasonThrottled:       EventThrottled,
	ReasonUnauthorized:    EventUnauthorized,
	ReasonCooldown:        EventCooldown,
	ReasonEC2Error:        EventEC2Error,
	ReasonPending:         EventPending,
	ReasonENIConfig:       EventENIConfig,
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

// recordGrowth tells the Node why the pool could not grow: EC2 refused,
// or pods are waiting and the instance has no room for another ENI.
// Missing IAM permissions are recorded by noteEC2, which sees every call.
func (a *Agent) recordGrowth(growErr error, short ipam.Shortfall, waiting int) {
	a.mu.Lock()
	subnet, itype := a.planCfg.SubnetID, a.self.InstanceType
	a.mu.Unlock()
	var ev Event
	switch {
	case growErr != nil && cloud.IsSubnetExhausted(growErr):
		ev = Event{Reason: EventSubnetExhausted, Message: fmt.Sprintf("subnet %s has no free addresses (%s): pods on this node wait for addresses; add a larger or additional subnet (custom networking ENIConfig), or lower WARM_IP_TARGET/WARM_ENI_TARGET on other nodes", subnet, cloud.ErrorCode(growErr))}
	case growErr != nil && cloud.IsAttachmentLimit(growErr):
		ev = Event{Reason: EventENILimit, Message: fmt.Sprintf("EC2 refused another ENI on this %s (%s); use a larger instance type or enable prefix delegation", itype, cloud.ErrorCode(growErr))}
	case waiting > 0 && short.Short() && short.Limit == ipam.InstanceENILimit:
		ev = Event{Reason: EventENILimit, Message: fmt.Sprintf("pods wait for addresses, and all %d ENIs a %s allows are attached and full; use a larger instance type or enable prefix delegation", short.Max, itype)}
	case waiting > 0 && short.Short() && short.Limit == ipam.MaxENILimit:
		ev = Event{Reason: EventENILimit, Message: fmt.Sprintf("pods wait for addresses, and MAX_ENI=%d ENIs are attached and full; raise MAX_ENI or lower the warm targets", short.Max)}
	default:
		return
	}
	ev.Warning = true
	a.kube.Record(ev)
}

// recordUnauthorized tells the Node which EC2 action its IAM role may not
// call, when err is such a refusal.
func (a *Agent) recordUnauthorized(err error) {
	if err == nil || !cloud.IsUnauthorized(err) {
		return
	}
	action := ec2Action(err)
	msg := fmt.Sprintf("EC2 refused %s (%s): grant the node's IAM role ec2:%s, as deploy/iam-policy.json does", action, cloud.ErrorCode(err), action)
	if action == "" {
		msg = fmt.Sprintf("EC2 refused a call (%s): check the node's IAM role against deploy/iam-policy.json: %v", cloud.ErrorCode(err), err)
	}
	a.kube.Record(Event{Warning: true, Reason: EventUnauthorized, Message: msg})
}

// ec2Action names the EC2 API action that failed with err, or "".
func ec2Action(err error) string {
	var op *smithy.OperationError
	if errors.As(err, &op) {
		return op.Operation()
	}
	return ""
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
