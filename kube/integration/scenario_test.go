package integration

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"

	"github.com/vpcnet/vpcnet/agent"
	"github.com/vpcnet/vpcnet/ipam"
	"github.com/vpcnet/vpcnet/kube"
)

const (
	zoneLabel    = "topology.kubernetes.io/zone"
	eniAnno      = "k8s.amazonaws.com/eniConfig"
	startupTaint = "vpcnet.io/agent-not-ready"
)

var ourTaint = corev1.Taint{Key: startupTaint, Effect: corev1.TaintEffectNoSchedule}

func providerID(inst agent.Instance) string {
	return "aws:///" + inst.AvailabilityZone + "/" + inst.ID
}

// scenario is a node whose agent uses every feature of the layer, and so
// every permission the ClusterRole grants: it finds its Node by providerID
// (MY_NODE_NAME unset), watches it, its pod and its ENIConfig (custom
// networking), removes the startup taint, and records Events on the Node,
// on its pod, and on a pod the watch does not hold.
type scenario struct {
	e       *env
	node    string
	pod     *corev1.Pod // on the node
	unbound *corev1.Pod // not scheduled yet: not in the node's watch
	l       *layer
}

func startScenario(t *testing.T, e *env, rc *rest.Config) *scenario {
	t.Helper()
	inst := e.instance()
	s := &scenario{e: e, node: e.name("ip-10-0-0-5")}
	zone := e.name("zone")
	e.node(t, s.node, providerID(inst), labeled(zoneLabel, zone), tainted(ourTaint))
	e.eniConfig(t, zone, "subnet-0pods", "sg-0pods")
	s.pod = e.pod(t, "web-0", s.node)
	s.unbound = e.pod(t, "pending-0", "")
	s.l = startLayer(t, rc, inst, map[string]string{
		"AWS_VPC_K8S_CNI_CUSTOM_NETWORK_CFG": "true",
		"VPCNET_STARTUP_TAINT":               startupTaint,
	}, func(o *kube.Options) {
		// The layer's own limit, one Event per pod and reason a minute, is
		// tested apart; here a repeat must reach the recorder.
		o.EventInterval = time.Nanosecond
	})
	return s
}

// Events the scenario records.
func (s *scenario) noAddress() agent.Event {
	return agent.Event{Pod: ipam.Pod{Namespace: s.pod.Namespace, Name: s.pod.Name}, Warning: true, Reason: agent.EventSubnetExhausted,
		Message: "no VPC address for this pod: subnet subnet-0pods has no free addresses (InsufficientFreeAddressesInSubnet); add a larger or additional subnet"}
}

func (s *scenario) pending() agent.Event {
	return agent.Event{Pod: ipam.Pod{Namespace: s.unbound.Namespace, Name: s.unbound.Name}, Warning: true, Reason: agent.EventPending,
		Message: "no VPC address for this pod: an ENI is attaching"}
}

func (s *scenario) unauthorized() agent.Event {
	return agent.Event{Warning: true, Reason: agent.EventUnauthorized,
		Message: "EC2 refused CreateNetworkInterface (UnauthorizedOperation): grant the node's IAM role ec2:CreateNetworkInterface, as deploy/iam-policy.json does"}
}

// drive declares the agent ready and records the scenario's Events, and
// waits for none of it.
func (s *scenario) drive() {
	s.l.SetReady(true)
	s.l.Record(s.noAddress())
	s.l.Record(s.pending())
	s.l.Record(s.unauthorized())
}

// repeat records the pod's Event again once the first is written, which
// makes the recorder patch its count.
func (s *scenario) repeat(t *testing.T) {
	t.Helper()
	s.e.waitEvent(t, podRef(s.pod), agent.EventSubnetExhausted, 1)
	s.l.Record(s.noAddress())
}

func podRef(p *corev1.Pod) corev1.ObjectReference {
	return corev1.ObjectReference{Kind: "Pod", Namespace: p.Namespace, Name: p.Name, UID: p.UID}
}

// nodeRef is how kubectl describe node finds a Node's Events: by its name
// as UID, as kubelet records them.
func nodeRef(name string) corev1.ObjectReference {
	return corev1.ObjectReference{Kind: "Node", Name: name, UID: types.UID(name)}
}

// waitEvent waits for an Event about ref with reason, counted at least
// count times, found the way kubectl describe finds an object's Events:
// by the involved object's kind, name, namespace and UID.
func (e *env) waitEvent(t *testing.T, ref corev1.ObjectReference, reason string, count int32) corev1.Event {
	t.Helper()
	sel := fields.Set{
		"involvedObject.kind": ref.Kind, "involvedObject.name": ref.Name,
		"involvedObject.namespace": ref.Namespace, "involvedObject.uid": string(ref.UID),
		"reason": reason,
	}.AsSelector().String()
	deadline := time.Now().Add(waitTimeout)
	var last []corev1.Event
	for {
		list, err := e.admin.CoreV1().Events(ref.Namespace).List(context.Background(), metav1.ListOptions{FieldSelector: sel})
		if err != nil {
			t.Fatalf("list Events %s: %v", sel, err)
		}
		last = list.Items
		for _, ev := range list.Items {
			if ev.Count >= count {
				return ev
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no Event %s counted %d times within %v; found %+v", sel, count, waitTimeout, last)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
