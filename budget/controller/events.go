package controller

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
)

// leaseEvents records the election's Events ("became leader", "stopped
// leading") on the Lease. It only creates: client-go's broadcaster also
// patches repeated Events, which the Role does not grant and two Events a
// term do not need.
type leaseEvents struct {
	events typedcorev1.EventInterface
	pod    string
	now    func() time.Time
	log    *slog.Logger
}

// eventTimeout bounds one Event's creation: the election waits for it.
const eventTimeout = 3 * time.Second

func (r *leaseEvents) Eventf(obj runtime.Object, eventType, reason, message string, args ...any) {
	m, err := meta.Accessor(obj)
	if err != nil {
		r.log.Warn("cannot record an Event on an object without metadata", "reason", reason, "err", err)
		return
	}
	gvk := obj.GetObjectKind().GroupVersionKind()
	now := metav1.NewTime(r.now())
	ev := &corev1.Event{
		ObjectMeta: metav1.ObjectMeta{GenerateName: m.GetName() + ".", Namespace: m.GetNamespace()},
		InvolvedObject: corev1.ObjectReference{
			Kind: gvk.Kind, APIVersion: gvk.GroupVersion().String(),
			Namespace: m.GetNamespace(), Name: m.GetName(), UID: m.GetUID(), ResourceVersion: m.GetResourceVersion(),
		},
		Reason: reason, Message: fmt.Sprintf(message, args...), Type: eventType,
		Source:         corev1.EventSource{Component: "vpcnet-budget", Host: r.pod},
		FirstTimestamp: now, LastTimestamp: now, Count: 1,
		ReportingController: "vpcnet-budget", ReportingInstance: r.pod,
	}
	ctx, cancel := context.WithTimeout(context.Background(), eventTimeout)
	defer cancel()
	if _, err := r.events.Create(ctx, ev, metav1.CreateOptions{}); err != nil {
		r.log.Warn("cannot record an Event", "reason", reason, "message", ev.Message, "err", err)
	}
}
