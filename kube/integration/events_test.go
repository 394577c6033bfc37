package integration

import (
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/vpcnet/vpcnet/agent"
	"github.com/vpcnet/vpcnet/ipam"
	"github.com/vpcnet/vpcnet/kube"
)

func TestEventsLandOnThePodAndTheNodeWhereKubectlDescribeShowsThem(t *testing.T) {
	t.Parallel()
	e := setup(t)
	inst := e.instance()
	me := e.name("ip-10-0-0-5")
	e.node(t, me, providerID(inst))
	pod := e.pod(t, "cart-0", me)
	l := startLayer(t, e.agentConfig(t), inst, map[string]string{"MY_NODE_NAME": me}, nil)
	l.waitFor(t, "watched the pod", func(st agent.KubeState) bool { return st.Pods == 1 })

	tests := []struct {
		name  string
		event agent.Event
		about corev1.ObjectReference
	}{
		{
			name: "a pod with no address",
			event: agent.Event{Pod: ipam.Pod{Namespace: pod.Namespace, Name: pod.Name}, Warning: true, Reason: agent.EventENILimit,
				Message: "no VPC address for this pod: all 3 ENIs a t3.medium allows are attached and full; use a larger instance type or enable prefix delegation"},
			about: podRef(pod),
		},
		{
			name: "the subnet exhausted",
			event: agent.Event{Warning: true, Reason: agent.EventSubnetExhausted,
				Message: "subnet subnet-0a has no free addresses (InsufficientFreeAddressesInSubnet): pods on this node wait for addresses; add a larger or additional subnet"},
			about: nodeRef(me),
		},
		{
			name: "a missing IAM permission",
			event: agent.Event{Warning: true, Reason: agent.EventUnauthorized,
				Message: "EC2 refused AssignPrivateIpAddresses (UnauthorizedOperation): grant the node's IAM role ec2:AssignPrivateIpAddresses, as deploy/iam-policy.json does"},
			about: nodeRef(me),
		},
		{
			name:  "a leaked ENI collected",
			event: agent.Event{Reason: agent.EventLeakedENI, Message: "deleted leaked ENI eni-0dead in subnet-0a, left by instance i-0gone"},
			about: nodeRef(me),
		},
	}
	for _, tt := range tests {
		l.Record(tt.event)
	}
	for _, tt := range tests {
		ev := e.waitEvent(t, tt.about, tt.event.Reason, 1)
		wantType := corev1.EventTypeNormal
		if tt.event.Warning {
			wantType = corev1.EventTypeWarning
		}
		if ev.Type != wantType || ev.Message != tt.event.Message || ev.Count != 1 {
			t.Errorf("%s: Event %s %q counted %d, want %s %q once", tt.name, ev.Type, ev.Message, ev.Count, wantType, tt.event.Message)
		}
		if ev.Source.Component != kube.Component || ev.Source.Host != me {
			t.Errorf("%s: Event from %+v, want %s on %s", tt.name, ev.Source, kube.Component, me)
		}
	}
	if st := l.State(); st.LastError != "" {
		t.Errorf("recording Events failed: %s", st.LastError)
	}
}
