package kube

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
)

// Core is the part of the Kubernetes API the layer calls: three core/v1
// resources, and of each only the verbs it uses. client-go's typed
// clients satisfy the per-resource interfaces; vpcnetd builds them on one
// REST client with a scheme of core/v1 alone (typed.go), because
// client-go's typed core/v1 client registers every API group of
// Kubernetes in its scheme at start-up, which the agent pays for in memory
// whether it uses them or not.
type Core interface {
	CoreV1() CoreV1
}

// CoreV1 is the core/v1 resources the layer reads and writes.
type CoreV1 interface {
	Nodes() NodeClient
	Pods(namespace string) PodClient
	Events(namespace string) EventClient
}

// NodeClient: the Node is looked up, watched, and patched (its taint).
type NodeClient interface {
	Get(ctx context.Context, name string, opts metav1.GetOptions) (*corev1.Node, error)
	List(ctx context.Context, opts metav1.ListOptions) (*corev1.NodeList, error)
	Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error)
	Patch(ctx context.Context, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions, subresources ...string) (*corev1.Node, error)
}

// PodClient: the node's pods are watched, and one is read for an Event.
type PodClient interface {
	Get(ctx context.Context, name string, opts metav1.GetOptions) (*corev1.Pod, error)
	List(ctx context.Context, opts metav1.ListOptions) (*corev1.PodList, error)
	Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error)
}

// EventClient: Events are created, and patched as they repeat.
type EventClient interface {
	Create(ctx context.Context, e *corev1.Event, opts metav1.CreateOptions) (*corev1.Event, error)
	Patch(ctx context.Context, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions, subresources ...string) (*corev1.Event, error)
}

// newCoreScheme knows the core/v1 kinds and the meta/v1 options that
// requests carry, as client-go's scheme does for every group.
func newCoreScheme() *runtime.Scheme { return schemeOf("core/v1", corev1.AddToScheme) }

// schemeOf is a scheme of one API group version and the meta/v1 options
// requests carry.
func schemeOf(name string, add func(*runtime.Scheme) error) *runtime.Scheme {
	s := runtime.NewScheme()
	metav1.AddToGroupVersion(s, schema.GroupVersion{Version: "v1"})
	if err := add(s); err != nil {
		panic("kube: register " + name + ": " + err.Error()) // generated code; cannot fail
	}
	return s
}

// groupClient is a REST client for group version gv under apiPath ("/api"
// for core, "/apis" for the others) with scheme s alone, built as
// client-go's typed clients build theirs.
func groupClient(rc *rest.Config, gv schema.GroupVersion, apiPath string, s *runtime.Scheme) (rest.Interface, error) {
	cfg := rest.CopyConfig(rc)
	cfg.GroupVersion = &gv
	cfg.APIPath = apiPath
	cfg.NegotiatedSerializer = rest.CodecFactoryForGeneratedClient(s, serializer.NewCodecFactory(s)).WithoutConversion()
	client, err := rest.RESTClientFor(cfg)
	if err != nil {
		return nil, fmt.Errorf("kube: %s client for %s: %w", gv, rc.Host, err)
	}
	return client, nil
}

// restCore is Core over one REST client for /api/v1.
type restCore struct {
	rc     rest.Interface
	params runtime.ParameterCodec
	nodes  NodeClient
}

// newRESTCore builds the core/v1 REST client from rc as client-go's typed
// client does (protobuf preferred where rc asks for it).
func newRESTCore(rc *rest.Config) (*restCore, error) {
	s := newCoreScheme()
	client, err := groupClient(rc, corev1.SchemeGroupVersion, "/api", s)
	if err != nil {
		return nil, err
	}
	c := &restCore{rc: client, params: runtime.NewParameterCodec(s)}
	c.nodes = &typed[*corev1.Node, *corev1.NodeList]{client: client, params: c.params, name: "nodes",
		newObject: func() *corev1.Node { return &corev1.Node{} }, newList: func() *corev1.NodeList { return &corev1.NodeList{} }}
	return c, nil
}

func (c *restCore) CoreV1() CoreV1    { return c }
func (c *restCore) Nodes() NodeClient { return c.nodes }

func (c *restCore) Pods(namespace string) PodClient {
	return &typed[*corev1.Pod, *corev1.PodList]{client: c.rc, params: c.params, name: "pods", namespace: namespace,
		newObject: func() *corev1.Pod { return &corev1.Pod{} }, newList: func() *corev1.PodList { return &corev1.PodList{} }}
}

func (c *restCore) Events(namespace string) EventClient {
	return &typed[*corev1.Event, *corev1.EventList]{client: c.rc, params: c.params, name: "events", namespace: namespace,
		newObject: func() *corev1.Event { return &corev1.Event{} }, newList: func() *corev1.EventList { return &corev1.EventList{} }}
}
