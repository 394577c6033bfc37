package kube

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	"golang.org/x/time/rate"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
)

// recorder writes the agent's Events as client-go's record package (its
// broadcaster, correlator and sink) does, with the same limits: a queue
// that drops when full, a spam filter per object, ten differing messages
// of one reason within ten minutes folded into one Event, a repeat
// counted on the Event it repeats, and a write retried while the API
// server is away. client-go's computes the repeat's patch with its
// strategic merge patch package, which links kube-openapi and gnostic;
// their init builds OpenAPI and protobuf descriptor tables (200 KB and
// their code's pages) in an agent that only ever patches three fields.
type recorder struct {
	c      *Client
	source corev1.EventSource
	queue  chan *corev1.Event
	// retry is the wait between tries of one write; the first is a random
	// part of it, so that agents do not all retry together.
	retry time.Duration

	// Only run's goroutine uses the caches.
	spam    *lruOf[*rate.Limiter]
	similar *lruOf[*similarEvents]
	seen    *lruOf[seenEvent]
}

// The limits of client-go's record package.
const (
	recorderQueue        = 1000
	recorderCacheSize    = 4096
	recorderTries        = 12
	recorderRetry        = 10 * time.Second
	spamBurst            = 25
	spamRefill           = rate.Limit(1. / 300)
	similarMax           = 10
	similarInterval      = 10 * time.Minute
	similarMessagePrefix = "(combined from similar events): "
)

// similarEvents is the messages of one object's Events with one reason.
type similarEvents struct {
	messages map[string]struct{}
	last     time.Time
}

// seenEvent is an Event written, so that a repeat patches it.
type seenEvent struct {
	name, resourceVersion string
	count                 int32
	first                 metav1.Time
}

func newRecorder(c *Client, host string) *recorder {
	return &recorder{
		c:       c,
		source:  corev1.EventSource{Component: Component, Host: host},
		queue:   make(chan *corev1.Event, recorderQueue),
		retry:   recorderRetry,
		spam:    newLRU[*rate.Limiter](recorderCacheSize),
		similar: newLRU[*similarEvents](recorderCacheSize),
		seen:    newLRU[seenEvent](recorderCacheSize),
	}
}

// event queues an Event about ref, or drops it when the queue is full.
// Its name and timestamps are the wall clock's, as client-go's are: its
// name is unique by the nanosecond, which a test's clock is not.
func (r *recorder) event(ref *corev1.ObjectReference, typ, reason, message string) {
	t := metav1.NewTime(time.Now())
	ns := ref.Namespace
	if ns == "" {
		ns = metav1.NamespaceDefault
	}
	e := &corev1.Event{
		ObjectMeta:          metav1.ObjectMeta{Name: eventName(ref.Name, t), Namespace: ns},
		InvolvedObject:      *ref,
		Reason:              reason,
		Message:             message,
		FirstTimestamp:      t,
		LastTimestamp:       t,
		Count:               1,
		Type:                typ,
		Source:              r.source,
		ReportingController: r.source.Component,
		ReportingInstance:   r.source.Host,
	}
	select {
	case r.queue <- e:
	default:
		r.c.log.Warn("Kubernetes Event dropped: too many queued", "reason", reason, "object", ref.Name)
	}
}

func eventName(object string, t metav1.Time) string {
	return fmt.Sprintf("%v.%x", object, t.UnixNano())
}

// run writes queued Events until ctx ends.
func (r *recorder) run(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case e := <-r.queue:
			r.write(ctx, e)
		}
	}
}

// write correlates e with the Events before it and writes it, retrying
// while the API server does not answer.
func (r *recorder) write(ctx context.Context, e *corev1.Event) {
	e, key := r.aggregate(e)
	patch := r.observe(e, key)
	if !r.allow(e) {
		return
	}
	for try := 1; ; try++ {
		if r.send(e, key, patch) {
			return
		}
		if try >= recorderTries {
			r.c.log.Error("Kubernetes Event not written: retry limit reached", "reason", e.Reason, "object", e.InvolvedObject.Name)
			return
		}
		wait := r.retry
		if try == 1 {
			wait = time.Duration(rand.Float64() * float64(wait))
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
	}
}

// aggregate folds the tenth differing message of one object's Events with
// one reason within ten minutes, and those after it, into one Event; the
// key names the Event a repeat counts on.
func (r *recorder) aggregate(e *corev1.Event) (*corev1.Event, string) {
	now := r.c.now()
	akey := similarKey(e)
	s, ok := r.similar.get(akey)
	if !ok || now.Sub(s.last) > similarInterval {
		s = &similarEvents{messages: map[string]struct{}{}}
		r.similar.add(akey, s)
	}
	s.messages[e.Message] = struct{}{}
	s.last = now
	if len(s.messages) < similarMax {
		return e, akey + e.Message
	}
	for m := range s.messages { // keep the set at its bound
		delete(s.messages, m)
		break
	}
	t := metav1.NewTime(time.Now())
	return &corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{Name: eventName(e.InvolvedObject.Name, t), Namespace: e.Namespace},
		InvolvedObject: e.InvolvedObject,
		Reason:         e.Reason,
		Message:        similarMessagePrefix + e.Message,
		FirstTimestamp: t,
		LastTimestamp:  t,
		Count:          1,
		Type:           e.Type,
		Source:         e.Source,
	}, akey
}

// observe makes e a repeat of the Event last written under key, if any,
// and returns the patch that counts it; nil for a new Event.
func (r *recorder) observe(e *corev1.Event, key string) []byte {
	var patch []byte
	if last, ok := r.seen.get(key); ok {
		e.Name, e.ResourceVersion, e.FirstTimestamp = last.name, last.resourceVersion, last.first
		e.Count = last.count + 1
		// What client-go's strategic merge patch of these fields comes to.
		patch, _ = json.Marshal(struct {
			Count         int32       `json:"count"`
			LastTimestamp metav1.Time `json:"lastTimestamp"`
			Message       string      `json:"message"`
		}{e.Count, e.LastTimestamp, e.Message}) // cannot fail
	}
	r.remember(key, e)
	return patch
}

func (r *recorder) remember(key string, e *corev1.Event) {
	r.seen.add(key, seenEvent{name: e.Name, resourceVersion: e.ResourceVersion, count: e.Count, first: e.FirstTimestamp})
}

// allow is the spam filter: per object and type, a burst of 25 Events,
// then one per five minutes.
func (r *recorder) allow(e *corev1.Event) bool {
	key := spamKey(e)
	l, ok := r.spam.get(key)
	if !ok {
		l = rate.NewLimiter(spamRefill, spamBurst)
		r.spam.add(key, l)
	}
	return l.AllowN(r.c.now(), 1)
}

// send patches the Event a repeat counts on, or creates e when it is new
// or gone; false means try again.
func (r *recorder) send(e *corev1.Event, key string, patch []byte) bool {
	events := r.c.cs.CoreV1().Events(e.Namespace)
	var out *corev1.Event
	var err error
	if e.Count > 1 {
		// The writes have no context: an Event being written when the
		// agent stops is written (as with client-go's sink).
		out, err = events.Patch(context.Background(), e.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{})
		r.c.noteAPI("patch Event", ignoreNotFound(err)) // created anew below
	}
	if e.Count <= 1 || apierrors.IsNotFound(err) {
		e.ResourceVersion = ""
		out, err = events.Create(context.Background(), e, metav1.CreateOptions{})
		r.c.noteAPI("create Event", err)
	}
	if err == nil {
		r.remember(key, out)
		return true
	}
	// Only an API server that did not answer is worth asking again.
	var construct *rest.RequestConstructionError
	var status *apierrors.StatusError
	if errors.As(err, &construct) || errors.As(err, &status) {
		r.c.log.Warn("Kubernetes Event refused", "reason", e.Reason, "object", e.InvolvedObject.Name, "error", err)
		return true
	}
	r.c.log.Warn("Kubernetes Event not written yet; will retry", "reason", e.Reason, "object", e.InvolvedObject.Name, "error", err)
	return false
}

func objectKey(e *corev1.Event) []string {
	o := e.InvolvedObject
	return []string{e.Source.Component, e.Source.Host, o.Kind, o.Namespace, o.Name, string(o.UID), o.APIVersion, e.Type}
}

func spamKey(e *corev1.Event) string { return strings.Join(objectKey(e), "") }

func similarKey(e *corev1.Event) string {
	return strings.Join(append(objectKey(e), e.Reason, e.ReportingController, e.ReportingInstance), "")
}
