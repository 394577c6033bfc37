package kube

import (
	"context"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
)

// typed is one core/v1 resource over the REST client, the requests
// built as client-go's generic client (gentype) builds them, protobuf
// preferred. It replaces gentype, which imports client-go's fake clients
// (k8s.io/client-go/testing) and with them managed fields and
// structured-merge-diff, whose start-up parses a YAML schema: memory and
// executable pages the agent paid for without ever calling them.
type typed[T, L runtime.Object] struct {
	client    rest.Interface
	params    runtime.ParameterCodec
	name      string // nodes, pods, events
	namespace string // "" for a cluster-scoped resource or all namespaces
	newObject func() T
	newList   func() L
}

func (r *typed[T, L]) request(verb func() *rest.Request) *rest.Request {
	return verb().
		UseProtobufAsDefaultIfPreferred(true).
		NamespaceIfScoped(r.namespace, r.namespace != "").
		Resource(r.name)
}

func (r *typed[T, L]) Get(ctx context.Context, name string, opts metav1.GetOptions) (T, error) {
	out := r.newObject()
	err := r.request(r.client.Get).Name(name).VersionedParams(&opts, r.params).Do(ctx).Into(out)
	return out, err
}

func (r *typed[T, L]) List(ctx context.Context, opts metav1.ListOptions) (L, error) {
	out := r.newList()
	err := r.request(r.client.Get).VersionedParams(&opts, r.params).Timeout(timeout(opts)).Do(ctx).Into(out)
	return out, err
}

func (r *typed[T, L]) Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	opts.Watch = true
	return r.request(r.client.Get).VersionedParams(&opts, r.params).Timeout(timeout(opts)).Watch(ctx)
}

func (r *typed[T, L]) Create(ctx context.Context, obj T, opts metav1.CreateOptions) (T, error) {
	out := r.newObject()
	err := r.request(r.client.Post).VersionedParams(&opts, r.params).Body(obj).Do(ctx).Into(out)
	return out, err
}

func (r *typed[T, L]) Patch(ctx context.Context, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions, subresources ...string) (T, error) {
	out := r.newObject()
	patch := func() *rest.Request { return r.client.Patch(pt) }
	err := r.request(patch).Name(name).SubResource(subresources...).VersionedParams(&opts, r.params).Body(data).Do(ctx).Into(out)
	return out, err
}

// timeout is the request's deadline when a list or watch names one.
func timeout(opts metav1.ListOptions) time.Duration {
	if opts.TimeoutSeconds == nil {
		return 0
	}
	return time.Duration(*opts.TimeoutSeconds) * time.Second
}
