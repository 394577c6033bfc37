package kube

import (
	"cmp"
	"context"
	"slices"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"

	"github.com/vpcnet/vpcnet/ipam"
)

// informer is a shared informer on one resource whose list and watch
// carry selector, built as client-go's generated and dynamic informers
// build theirs (k8s.io/client-go/informers), whose packages take the whole
// clientset and register every API group. client tells whether the API server's watch-list semantics
// may be used (not with the fake clientset).
func informer(client any, obj runtime.Object, selector string,
	list func(context.Context, metav1.ListOptions) (runtime.Object, error),
	watchFn func(context.Context, metav1.ListOptions) (watch.Interface, error),
) cache.SharedIndexInformer {
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			o.FieldSelector = selector
			return list(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.FieldSelector = selector
			return watchFn(ctx, o)
		},
	}
	return cache.NewSharedIndexInformer(cache.ToListWatcherWithWatchListSemantics(lw, client), obj, 0, cache.Indexers{})
}

// watch starts the informers on this Node and on its pods. Each is
// filtered by a field selector, so the API server sends only this node's
// objects.
func (c *Client) watch(ctx context.Context, wg *sync.WaitGroup, name string) {
	core := c.cs.CoreV1()
	nodes := informer(c.cs, &corev1.Node{}, fields.OneTermEqualSelector("metadata.name", name).String(),
		func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			return core.Nodes().List(ctx, o)
		},
		func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			return core.Nodes().Watch(ctx, o)
		})
	c.watchErrors(nodes, "watch Node "+name, nil)
	// The field selector is the API server's promise; checking the name
	// too costs nothing and keeps another Node's labels or taints from
	// ever being taken for this one's.
	onNode := func(obj any) {
		if n, ok := obj.(*corev1.Node); ok && n.Name == name {
			c.onNode(n)
		}
	}
	mustHandle(nodes.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    onNode,
		UpdateFunc: func(_, n any) { onNode(n) },
	}))

	pods := informer(c.cs, &corev1.Pod{}, fields.OneTermEqualSelector("spec.nodeName", name).String(),
		func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			return core.Pods(metav1.NamespaceAll).List(ctx, o)
		},
		func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			return core.Pods(metav1.NamespaceAll).Watch(ctx, o)
		})
	if err := pods.SetTransform(slimPod); err != nil {
		panic("kube: pod transform set after the informer started: " + err.Error())
	}
	c.watchErrors(pods, "watch pods on "+name, nil)
	notify := func(any) { c.notify() }
	mustHandle(pods.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    notify,
		DeleteFunc: notify,
		// Status changes come often and matter only when they change
		// whether the pod still needs an address.
		UpdateFunc: func(old, cur any) {
			o, ok1 := old.(*corev1.Pod)
			n, ok2 := cur.(*corev1.Pod)
			if !ok1 || !ok2 || needsAddress(o) != needsAddress(n) {
				c.notify()
			}
		},
	}))
	c.mu.Lock()
	c.pods = pods.GetStore()
	c.mu.Unlock()

	wg.Add(2)
	go func() { defer wg.Done(); nodes.RunWithContext(ctx) }()
	go func() { defer wg.Done(); pods.RunWithContext(ctx) }()
}

func mustHandle(_ cache.ResourceEventHandlerRegistration, err error) {
	if err != nil {
		panic("kube: event handler added to a stopped informer: " + err.Error())
	}
}

// onNode takes a new version of this Node: its names, its ENIConfig and
// its taints may have changed.
func (c *Client) onNode(n *corev1.Node) {
	c.mu.Lock()
	c.node = n
	before := c.mismatch
	c.mismatch = c.mismatchLocked()
	after := c.mismatch
	c.mu.Unlock()
	if after != before && after != "" {
		c.log.Warn("this node's names disagree", "node", n.Name, "mismatch", after)
	}
	if c.o.CustomNetwork {
		name, from := eniConfigName(n, c.o.ENIConfigAnnotation, c.o.ENIConfigLabel)
		c.followENIConfig(name, from)
	}
	c.poke()
	c.notify()
}

// slimPod keeps what Events need of a pod (its identity) and what says
// whether it needs an address, so the watch costs a few hundred bytes a
// pod whatever the pods' specs hold.
func slimPod(obj any) (any, error) {
	p, ok := obj.(*corev1.Pod)
	if !ok {
		return obj, nil // a tombstone: the informer handles it
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: p.Namespace, UID: p.UID, ResourceVersion: p.ResourceVersion,
			DeletionTimestamp: p.DeletionTimestamp},
		Spec:   corev1.PodSpec{NodeName: p.Spec.NodeName, HostNetwork: p.Spec.HostNetwork},
		Status: corev1.PodStatus{Phase: p.Status.Phase},
	}, nil
}

// needsAddress: the pod uses the pod network and may still run. A
// finished pod's sandbox is gone or going; a deleted one's DEL is due.
func needsAddress(p *corev1.Pod) bool {
	return !p.Spec.HostNetwork && p.DeletionTimestamp == nil &&
		p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed
}

// ScheduledPods lists the pods bound to this Node that need a pod-network
// address, sorted; none until the pods are listed.
func (c *Client) ScheduledPods() []ipam.Pod {
	c.mu.Lock()
	store, node := c.pods, c.node
	c.mu.Unlock()
	if store == nil || node == nil {
		return nil
	}
	var out []ipam.Pod
	for _, obj := range store.List() {
		// The field selector is the API server's promise; as for the
		// Node, checking costs nothing.
		if p, ok := obj.(*corev1.Pod); ok && p.Spec.NodeName == node.Name && needsAddress(p) {
			out = append(out, ipam.Pod{Namespace: p.Namespace, Name: p.Name})
		}
	}
	slices.SortFunc(out, func(a, b ipam.Pod) int {
		return cmp.Or(strings.Compare(a.Namespace, b.Namespace), strings.Compare(a.Name, b.Name))
	})
	return out
}
