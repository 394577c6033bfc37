package kube

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

// newTestRecorder is a recorder on a fake clientset, written to by
// flush, on clk.
func newTestRecorder(t *testing.T, cs *fake.Clientset, clk *clock) *recorder {
	t.Helper()
	c, err := New(Options{Client: fakeCore{cs}, Dynamic: newDynamic(), Logger: testLogger(t), Now: clk.now, NodeName: "n"})
	if err != nil {
		t.Fatal(err)
	}
	r := newRecorder(c, "n")
	r.retry = time.Millisecond
	return r
}

// flush writes what is queued, as run does.
func (r *recorder) flush(ctx context.Context) {
	for len(r.queue) > 0 {
		r.write(ctx, <-r.queue)
	}
}

func listEvents(t *testing.T, cs *fake.Clientset) []corev1.Event {
	t.Helper()
	list, err := cs.CoreV1().Events("shop").List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return list.Items
}

var cart = &corev1.ObjectReference{Kind: "Pod", APIVersion: "v1", Namespace: "shop", Name: "cart-0", UID: "u1"}

func TestTheTenthDifferingMessageOfAReasonIsCombined(t *testing.T) {
	cs := fake.NewClientset()
	r := newTestRecorder(t, cs, &clock{t: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)})
	for i := range 12 {
		r.event(cart, corev1.EventTypeWarning, "ENILimit", fmt.Sprintf("attempt %d", i))
	}
	r.flush(context.Background())
	var plain int
	var combined []corev1.Event
	for _, e := range listEvents(t, cs) {
		if len(e.Message) > len(similarMessagePrefix) && e.Message[:len(similarMessagePrefix)] == similarMessagePrefix {
			combined = append(combined, e)
		} else {
			plain++
		}
	}
	if plain != 9 || len(combined) != 1 || combined[0].Count != 3 || combined[0].Message != similarMessagePrefix+"attempt 11" {
		t.Fatalf("12 messages: %d plain Events and combined %+v; want 9 and one combined, counted 3, with the last message", plain, combined)
	}
}

func TestAnObjectsEventsAreLimitedToABurstThenOnePerFiveMinutes(t *testing.T) {
	cs := fake.NewClientset()
	clk := &clock{t: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
	r := newTestRecorder(t, cs, clk)
	for i := range 30 {
		r.event(cart, corev1.EventTypeWarning, fmt.Sprintf("Reason%d", i), "m")
	}
	r.flush(context.Background())
	if n := len(listEvents(t, cs)); n != spamBurst {
		t.Fatalf("30 Events at once: %d written, want %d", n, spamBurst)
	}
	clk.add(5 * time.Minute)
	for i := range 2 {
		r.event(cart, corev1.EventTypeWarning, fmt.Sprintf("Later%d", i), "m")
	}
	r.flush(context.Background())
	if n := len(listEvents(t, cs)); n != spamBurst+1 {
		t.Fatalf("two more five minutes on: %d written in all, want %d", n, spamBurst+1)
	}
}

func TestAWriteIsRetriedOnlyWhileTheAPIServerDoesNotAnswer(t *testing.T) {
	for _, tc := range []struct {
		name  string
		err   error
		tries int
	}{
		{"unreachable", errors.New("connection refused"), 3},
		{"refused", apierrors.NewForbidden(schema.GroupResource{Resource: "events"}, "x", errors.New("RBAC")), 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cs := fake.NewClientset()
			tries := 0
			cs.PrependReactor("create", "events", func(k8stesting.Action) (bool, runtime.Object, error) {
				tries++
				if tries < 3 {
					return true, nil, tc.err
				}
				return false, nil, nil
			})
			r := newTestRecorder(t, cs, &clock{t: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)})
			r.event(cart, corev1.EventTypeNormal, "Assigned", "m")
			r.flush(context.Background())
			if tries != tc.tries {
				t.Fatalf("create tried %d times, want %d", tries, tc.tries)
			}
		})
	}
}

func TestTheRecorderForgetsTheLeastRecentlyUsed(t *testing.T) {
	l := newLRU[int](2)
	l.add("a", 1)
	l.add("b", 2)
	l.get("a")
	l.add("c", 3)
	if _, ok := l.get("b"); ok {
		t.Fatal("b kept; want it forgotten as the least recently used")
	}
	if v, ok := l.get("a"); !ok || v != 1 {
		t.Fatalf("a = %d, %v; want 1, true", v, ok)
	}
}
