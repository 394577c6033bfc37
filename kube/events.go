package kube

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/vpcnet/vpcnet/agent"
)

// Component is the Events' source and the patches' field manager.
const Component = "vpcnetd"

// Record queues e for the event loop, or drops it when the queue is full:
// the agent must never wait for the API server.
func (c *Client) Record(e agent.Event) {
	select {
	case c.events <- e:
	default:
		c.log.Warn("Kubernetes Event dropped: the queue is full (the API server is slow or away)", "reason", e.Reason, "pod", e.Pod.String())
	}
}

func ignoreNotFound(err error) error {
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// eventLoop records queued Events, at most one per object and reason per
// EventInterval. Events on the Node wait (a few) until it is found.
func (c *Client) eventLoop(ctx context.Context, rec *recorder) {
	lim := limiter{every: c.o.EventInterval, last: make(map[string]time.Time)}
	var pending []agent.Event
	found := c.nodeFound
	for {
		select {
		case <-ctx.Done():
			return
		case <-found:
			found = nil
			for _, e := range pending {
				c.emit(ctx, rec, e)
			}
			pending = nil
		case e := <-c.events:
			if !lim.allow(eventKey(e), c.now()) {
				continue
			}
			if e.Pod.Name == "" && found != nil {
				if len(pending) < maxPendingNodeEvents {
					pending = append(pending, e)
				}
				continue
			}
			c.emit(ctx, rec, e)
		}
	}
}

// maxPendingNodeEvents bounds the Node Events kept until the Node is found.
const maxPendingNodeEvents = 16

func eventKey(e agent.Event) string {
	obj := "node"
	if e.Pod.Name != "" {
		obj = "pod/" + e.Pod.Namespace + "/" + e.Pod.Name
	}
	return obj + "/" + e.Reason
}

func (c *Client) emit(ctx context.Context, rec *recorder, e agent.Event) {
	obj := c.reference(ctx, e)
	if obj == nil {
		return
	}
	typ := corev1.EventTypeNormal
	if e.Warning {
		typ = corev1.EventTypeWarning
	}
	rec.event(obj, typ, e.Reason, e.Message)
}

// reference is the object an Event is about, with its UID so kubectl
// describe finds it, or nil when the pod is gone. A Node's reference has
// its name as UID, as kubelet's does, which is what kubectl describe
// node looks for.
func (c *Client) reference(ctx context.Context, e agent.Event) *corev1.ObjectReference {
	if e.Pod.Name == "" {
		c.mu.Lock()
		name := c.node.Name
		c.mu.Unlock()
		return &corev1.ObjectReference{Kind: "Node", APIVersion: "v1", Name: name, UID: types.UID(name)}
	}
	c.mu.Lock()
	store := c.pods
	c.mu.Unlock()
	if store != nil {
		if obj, ok, _ := store.GetByKey(e.Pod.Namespace + "/" + e.Pod.Name); ok {
			return podReference(obj.(*corev1.Pod))
		}
	}
	// The watch has not seen the pod yet: it is new, or the API server is
	// away. Ask once, briefly; without an answer, refer to it by name.
	gctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	p, err := c.cs.CoreV1().Pods(e.Pod.Namespace).Get(gctx, e.Pod.Name, metav1.GetOptions{})
	c.noteAPI("get pod", ignoreNotFound(err))
	switch {
	case err == nil:
		return podReference(p)
	case apierrors.IsNotFound(err):
		return nil
	}
	return &corev1.ObjectReference{Kind: "Pod", APIVersion: "v1", Namespace: e.Pod.Namespace, Name: e.Pod.Name}
}

// podReference is what client-go's reference package makes of a pod.
func podReference(p *corev1.Pod) *corev1.ObjectReference {
	return &corev1.ObjectReference{Kind: "Pod", APIVersion: "v1", Namespace: p.Namespace, Name: p.Name, UID: p.UID, ResourceVersion: p.ResourceVersion}
}

// limiter lets one Event per key through per interval. Only the event
// loop uses it.
type limiter struct {
	every time.Duration
	last  map[string]time.Time
}

func (l *limiter) allow(key string, now time.Time) bool {
	if t, ok := l.last[key]; ok && now.Sub(t) < l.every {
		return false
	}
	if len(l.last) >= 1024 {
		for k, t := range l.last {
			if now.Sub(t) >= l.every {
				delete(l.last, k)
			}
		}
	}
	l.last[key] = now
	return true
}
