package kube

import (
	"context"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/vpcnet/vpcnet/agent"
	"github.com/vpcnet/vpcnet/ipam"
)

// clock is a settable clock for the Event rate limit.
type clock struct {
	mu sync.Mutex // guards t
	t  time.Time
}

func (c *clock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// waitEvents waits until the namespace holds an Event with reason, and
// returns all Events there.
func waitEvents(t *testing.T, h *harness, ns, reason string, count int32) []corev1.Event {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		list, err := h.cs.CoreV1().Events(ns).List(context.Background(), metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range list.Items {
			if e.Reason == reason && e.Count >= count {
				return list.Items
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("no Event %s with count %d in namespace %q", reason, count, ns)
	return nil
}

func byReason(events []corev1.Event, reason string) []corev1.Event {
	var out []corev1.Event
	for _, e := range events {
		if e.Reason == reason {
			out = append(out, e)
		}
	}
	return out
}

func TestEventsNameThePodOrTheNodeWithReasonAndRemedy(t *testing.T) {
	const me = "ip-10-0-0-5.us-west-2.compute.internal"
	pod := newPod("shop", "cart-0", me)
	h := start(t, Options{NodeName: me}, fake.NewClientset(newNode(me, ourProviderID), pod), nil)
	h.waitFor(t, "watched the pod", func(st agent.KubeState) bool { return st.Pods == 1 })

	h.c.Record(agent.Event{Pod: ipam.Pod{Namespace: "shop", Name: "cart-0"}, Warning: true, Reason: agent.EventSubnetExhausted,
		Message: "no VPC address for this pod: subnet subnet-a has no free addresses; add a larger subnet"})
	h.c.Record(agent.Event{Pod: ipam.Pod{Namespace: "shop", Name: "gone-1"}, Warning: true, Reason: agent.EventENILimit, Message: "no address"})
	h.c.Record(agent.Event{Reason: agent.EventLeakedENI, Message: "deleted leaked ENI eni-0dead in subnet-a"})

	// The Node's Event was queued last; once it is there, so is the rest.
	nodeEvents := byReason(waitEvents(t, h, metav1.NamespaceDefault, agent.EventLeakedENI, 1), agent.EventLeakedENI)
	podEvents := waitEvents(t, h, "shop", agent.EventSubnetExhausted, 1)

	tests := []struct {
		name   string
		got    []corev1.Event
		object corev1.ObjectReference
		typ    string
		msg    string
	}{
		{"pod", byReason(podEvents, agent.EventSubnetExhausted), corev1.ObjectReference{Kind: "Pod", Namespace: "shop", Name: "cart-0", UID: pod.UID},
			corev1.EventTypeWarning, "no VPC address for this pod: subnet subnet-a has no free addresses; add a larger subnet"},
		{"node", nodeEvents, corev1.ObjectReference{Kind: "Node", Name: me, UID: types.UID(me)},
			corev1.EventTypeNormal, "deleted leaked ENI eni-0dead in subnet-a"},
	}
	for _, tt := range tests {
		if len(tt.got) != 1 {
			t.Errorf("%s: %d Events, want 1", tt.name, len(tt.got))
			continue
		}
		e := tt.got[0]
		o := e.InvolvedObject
		if o.Kind != tt.object.Kind || o.Namespace != tt.object.Namespace || o.Name != tt.object.Name || o.UID != tt.object.UID {
			t.Errorf("%s: Event about %s %s/%s uid %s, want %s %s/%s uid %s", tt.name, o.Kind, o.Namespace, o.Name, o.UID,
				tt.object.Kind, tt.object.Namespace, tt.object.Name, tt.object.UID)
		}
		if e.Type != tt.typ || e.Message != tt.msg {
			t.Errorf("%s: Event %s %q, want %s %q", tt.name, e.Type, e.Message, tt.typ, tt.msg)
		}
		if e.Source.Component != Component || e.Source.Host != me {
			t.Errorf("%s: Event source %+v, want %s on %s", tt.name, e.Source, Component, me)
		}
	}
	if got := byReason(podEvents, agent.EventENILimit); len(got) != 0 {
		t.Errorf("Event recorded about a pod that no longer exists: %+v", got[0].InvolvedObject)
	}
}

func TestAStuckPodsRepeatsAreOneEventWithACount(t *testing.T) {
	clk := &clock{t: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
	h := start(t, Options{NodeName: "n", Now: clk.now, EventInterval: time.Minute},
		fake.NewClientset(newNode("n", ourProviderID), newPod("shop", "cart-0", "n")), nil)
	h.waitFor(t, "watched the pod", func(st agent.KubeState) bool { return st.Pods == 1 })
	stuck := agent.Event{Pod: ipam.Pod{Namespace: "shop", Name: "cart-0"}, Warning: true, Reason: agent.EventENILimit, Message: "no VPC address for this pod: ENI limit"}
	marker := func(msg string) { h.c.Record(agent.Event{Reason: agent.EventLeakedENI, Message: msg}) }

	// kubelet retries ADD many times a minute: one Event.
	for range 20 {
		h.c.Record(stuck)
	}
	marker("first")
	waitEvents(t, h, metav1.NamespaceDefault, agent.EventLeakedENI, 1)
	got := byReason(waitEvents(t, h, "shop", agent.EventENILimit, 1), agent.EventENILimit)
	if len(got) != 1 || got[0].Count != 1 {
		t.Fatalf("20 failures within a minute: %d Events, first count %d; want 1 Event counted once", len(got), got[0].Count)
	}

	// A minute on, still stuck: the same Event, counted again.
	clk.add(time.Minute)
	for range 20 {
		h.c.Record(stuck)
	}
	got = byReason(waitEvents(t, h, "shop", agent.EventENILimit, 2), agent.EventENILimit)
	if len(got) != 1 || got[0].Count != 2 {
		t.Fatalf("after another minute: %d Events, count %d; want the same Event with count 2", len(got), got[0].Count)
	}
}

func TestNodeEventsWaitForTheNodeToBeFound(t *testing.T) {
	cs := fake.NewClientset()
	h := start(t, Options{NodeName: "late"}, cs, nil)
	h.waitFor(t, "looked for the Node", func(st agent.KubeState) bool { return st.NodeProblem != "" })
	h.c.Record(agent.Event{Warning: true, Reason: agent.EventUnauthorized, Message: "EC2 refused CreateNetworkInterface"})
	if _, err := cs.CoreV1().Nodes().Create(context.Background(), newNode("late", ourProviderID), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	e := byReason(waitEvents(t, h, metav1.NamespaceDefault, agent.EventUnauthorized, 1), agent.EventUnauthorized)[0]
	if e.InvolvedObject.Kind != "Node" || e.InvolvedObject.Name != "late" {
		t.Errorf("Event about %s %s, want Node late", e.InvolvedObject.Kind, e.InvolvedObject.Name)
	}
}

func TestRecordNeverWaitsForTheAPIServer(t *testing.T) {
	c, err := New(Options{Client: fakeCore{fake.NewClientset()}})
	if err != nil {
		t.Fatal(err)
	}
	// Nothing consumes the queue, as when the API server is away.
	done := make(chan struct{})
	go func() {
		for i := range eventQueue * 2 {
			c.Record(agent.Event{Reason: agent.EventPending, Message: "x", Pod: ipam.Pod{Namespace: "a", Name: string(rune('a' + i%26))}})
		}
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Record blocked with the queue full")
	}
}
