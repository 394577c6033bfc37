package kube

import (
	"context"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"sync"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"github.com/vpcnet/vpcnet/netpol"
)

// PolicySources are the lists and watches NetworkPolicy enforcement
// reads, and the one read it makes of a pod the watch has not seen yet.
type PolicySources struct {
	NetworkPolicies ListWatch
	Namespaces      ListWatch
	Pods            ListWatch
	GetPod          func(ctx context.Context, namespace, name string) (*corev1.Pod, error)
	// Client tells whether the API server's watch-list semantics may be
	// used (not with the fake clientset); see informer.
	Client any
}

// ListWatch is one resource's list and watch across all namespaces.
type ListWatch struct {
	List  func(context.Context, metav1.ListOptions) (runtime.Object, error)
	Watch func(context.Context, metav1.ListOptions) (watch.Interface, error)
}

// PolicySourcesForConfig builds the sources on REST clients for
// networking.k8s.io/v1 and core/v1, protobuf preferred, as the core/v1
// client of the rest of the layer is built (core.go).
func PolicySourcesForConfig(rc *rest.Config) (PolicySources, error) {
	rc = rest.CopyConfig(rc)
	if rc.UserAgent == "" {
		rc.UserAgent = "vpcnetd"
	}
	rc.ContentType = "application/vnd.kubernetes.protobuf"
	rc.AcceptContentTypes = "application/vnd.kubernetes.protobuf,application/json"
	core, err := newRESTCore(rc)
	if err != nil {
		return PolicySources{}, err
	}
	s := schemeOf("networking.k8s.io/v1", networkingv1.AddToScheme)
	nc, err := groupClient(rc, networkingv1.SchemeGroupVersion, "/apis", s)
	if err != nil {
		return PolicySources{}, err
	}
	nps := &typed[*networkingv1.NetworkPolicy, *networkingv1.NetworkPolicyList]{client: nc, params: runtime.NewParameterCodec(s), name: "networkpolicies",
		newObject: func() *networkingv1.NetworkPolicy { return &networkingv1.NetworkPolicy{} },
		newList:   func() *networkingv1.NetworkPolicyList { return &networkingv1.NetworkPolicyList{} }}
	nss := &typed[*corev1.Namespace, *corev1.NamespaceList]{client: core.rc, params: core.params, name: "namespaces",
		newObject: func() *corev1.Namespace { return &corev1.Namespace{} },
		newList:   func() *corev1.NamespaceList { return &corev1.NamespaceList{} }}
	pods := core.Pods(metav1.NamespaceAll)
	return PolicySources{
		NetworkPolicies: ListWatch{
			List:  func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) { return nps.List(ctx, o) },
			Watch: nps.Watch,
		},
		Namespaces: ListWatch{
			List:  func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) { return nss.List(ctx, o) },
			Watch: nss.Watch,
		},
		Pods: ListWatch{
			List:  func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) { return pods.List(ctx, o) },
			Watch: pods.Watch,
		},
		GetPod: func(ctx context.Context, ns, name string) (*corev1.Pod, error) {
			return core.Pods(ns).Get(ctx, name, metav1.GetOptions{})
		},
		Client: core,
	}, nil
}

// PolicyWatch keeps what NetworkPolicy enforcement needs to know: every
// NetworkPolicy, every namespace's labels, and every pod's labels,
// address and named ports. Pods are kept as netpol.Pod values, a few
// hundred bytes each, whatever their specs hold, and what they have in
// common (label sets, named ports, namespace names) once (podInterner).
type PolicyWatch struct {
	src PolicySources

	mu         sync.Mutex // guards below; never held across I/O
	policies   map[string]*networkingv1.NetworkPolicy
	namespaces map[string]map[string]string
	pods       map[podKey]netpol.Pod
	// shared holds what the pods have in common, once.
	shared  *podInterner
	synced  []cache.InformerSynced
	changed func()
	// gen counts the changes, for netpol.Compiler's cache.
	gen uint64
	// podsListed: the pod reflector has listed once.
	podsListed bool
}

// NewPolicyWatch builds the watch; Run starts it.
func NewPolicyWatch(src PolicySources) *PolicyWatch {
	return &PolicyWatch{src: src, policies: map[string]*networkingv1.NetworkPolicy{},
		namespaces: map[string]map[string]string{}, pods: map[podKey]netpol.Pod{}, shared: newPodInterner()}
}

// podKey names a pod; its namespace is the shared string.
type podKey struct{ namespace, name string }

// Run watches until ctx ends, calling changed (which must not block)
// after every change. An unreachable API server is waited out by the
// informers' own backoff; what was known stays known.
func (w *PolicyWatch) Run(ctx context.Context, changed func()) error {
	mk := func(obj runtime.Object, lw ListWatch) cache.SharedIndexInformer {
		return informer(w.src.Client, obj, "", lw.List, lw.Watch)
	}
	nps := mk(&networkingv1.NetworkPolicy{}, w.src.NetworkPolicies)
	nss := mk(&corev1.Namespace{}, w.src.Namespaces)
	// Pods go straight from a reflector into the watch's map of
	// netpol.Pod values: an informer would keep each pod a second time
	// in its own store, which at thousands of pods was most of the
	// memory enforcement costs.
	podLW := cache.ToListWatcherWithWatchListSemantics(&cache.ListWatch{
		ListWithContextFunc: w.src.Pods.List, WatchFuncWithContext: w.src.Pods.Watch,
	}, w.src.Client)
	pods := cache.NewReflectorWithOptions(podLW, &corev1.Pod{}, podSink{
		put: func(p *corev1.Pod) {
			w.putPod(podKey{p.Namespace, p.Name}, toPolicyPod(p), finished(p))
		},
		remove: func(ns, name string) { w.putPod(podKey{ns, name}, netpol.Pod{}, true) },
		replace: func(all []*corev1.Pod) {
			w.update(func() {
				w.pods = make(map[podKey]netpol.Pod, len(all))
				w.shared = newPodInterner()
				for _, p := range all {
					if !finished(p) {
						pp := w.shared.hold(toPolicyPod(p))
						w.pods[podKey{pp.Namespace, pp.Name}] = pp
					}
				}
				w.podsListed = true
			})
		},
	}, cache.ReflectorOptions{Name: "NetworkPolicy pods"})
	podsSynced := func() bool {
		w.mu.Lock()
		defer w.mu.Unlock()
		return w.podsListed
	}
	if err := nss.SetTransform(slimNamespace); err != nil {
		return fmt.Errorf("kube: namespace transform: %w", err)
	}
	w.mu.Lock()
	w.changed = changed
	w.mu.Unlock()
	npsHandled := handle(nps, func(obj any, gone bool) {
		p, ok := obj.(*networkingv1.NetworkPolicy)
		if !ok {
			return
		}
		w.update(func() {
			if gone {
				delete(w.policies, p.Namespace+"/"+p.Name)
			} else {
				w.policies[p.Namespace+"/"+p.Name] = p
			}
		})
	})
	nssHandled := handle(nss, func(obj any, gone bool) {
		n, ok := obj.(*corev1.Namespace)
		if !ok {
			return
		}
		w.update(func() {
			if gone {
				delete(w.namespaces, n.Name)
			} else {
				w.namespaces[n.Name] = n.Labels
			}
		})
	})
	if err := nps.SetTransform(slimPolicy); err != nil {
		return fmt.Errorf("kube: policy transform: %w", err)
	}
	// Synced is the handlers', not the informers' stores': a store lists
	// before its handler has been told of every object, and a first
	// write then would have left pods open that a policy isolates.
	w.mu.Lock()
	w.synced = []cache.InformerSynced{npsHandled.HasSynced, nssHandled.HasSynced, podsSynced}
	w.mu.Unlock()
	var wg sync.WaitGroup
	for _, inf := range []cache.SharedIndexInformer{nps, nss} {
		wg.Add(1)
		go func() { defer wg.Done(); inf.RunWithContext(ctx) }()
	}
	wg.Add(1)
	go func() { defer wg.Done(); pods.RunWithContext(ctx) }()
	// Once every informer has listed, the first compile may replace
	// the rules the last run left.
	go func() {
		if cache.WaitForCacheSync(ctx.Done(), npsHandled.HasSynced, nssHandled.HasSynced, podsSynced) {
			changed()
		}
	}()
	wg.Wait()
	return nil
}

func handle(inf cache.SharedIndexInformer, f func(obj any, gone bool)) cache.ResourceEventHandlerRegistration {
	reg, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { f(obj, false) },
		UpdateFunc: func(_, obj any) { f(obj, false) },
		DeleteFunc: func(obj any) {
			if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = t.Obj
			}
			f(obj, true)
		},
	})
	mustHandle(reg, err)
	return reg
}

func (w *PolicyWatch) update(f func()) {
	w.mu.Lock()
	f()
	w.gen++
	changed := w.changed
	w.mu.Unlock()
	if changed != nil {
		changed()
	}
}

// putPod records a pod's new state (gone: deleted or finished). Only a
// change to what policies can see of it as a peer (its address, labels,
// named ports; a pod without an address is no peer) starts a new
// generation: a pod just created has none yet, and its ADD must not pay
// for recompiling every rule of the cluster.
func (w *PolicyWatch) putPod(key podKey, p netpol.Pod, gone bool) {
	w.mu.Lock()
	old, had := w.pods[key]
	if gone {
		delete(w.pods, key)
	} else {
		p = w.shared.hold(p)
		w.pods[podKey{p.Namespace, p.Name}] = p
	}
	if had {
		w.shared.release(old)
	}
	seen := func(q netpol.Pod, ok bool) bool { return ok && q.IP.IsValid() && !q.HostNetwork }
	relevant := seen(old, had) || seen(p, !gone)
	if relevant && seen(old, had) && seen(p, !gone) {
		relevant = old.IP != p.IP || !maps.Equal(old.Labels, p.Labels) || !slices.Equal(old.Ports, p.Ports)
	}
	if relevant {
		w.gen++
	}
	changed := w.changed
	w.mu.Unlock()
	if changed != nil {
		changed()
	}
}

// Synced says every watch has listed once.
func (w *PolicyWatch) Synced() bool {
	w.mu.Lock()
	synced := w.synced
	w.mu.Unlock()
	if synced == nil {
		return false
	}
	for _, s := range synced {
		if !s() {
			return false
		}
	}
	return true
}

// Cluster is what the watches know now. The policies and label maps are
// shared, not copied: the informers replace them, never change them.
func (w *PolicyWatch) Cluster() *netpol.Cluster {
	w.mu.Lock()
	defer w.mu.Unlock()
	c := &netpol.Cluster{
		Policies:   make([]*networkingv1.NetworkPolicy, 0, len(w.policies)),
		Namespaces: make(map[string]map[string]string, len(w.namespaces)),
		Pods:       make([]netpol.Pod, 0, len(w.pods)),
		Generation: w.gen + 1, // never zero: zero means "no generation"
	}
	for _, p := range w.policies {
		c.Policies = append(c.Policies, p)
	}
	for k, v := range w.namespaces {
		c.Namespaces[k] = v
	}
	for _, p := range w.pods {
		c.Pods = append(c.Pods, p)
	}
	return c
}

// Generation is the Generation the next Cluster will carry: it changes
// whenever the watches see a change.
func (w *PolicyWatch) Generation() uint64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.gen + 1
}

// Known is what the watch knows of one pod, without asking the API
// server.
func (w *PolicyWatch) Known(namespace, name string) (netpol.Pod, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	p, ok := w.pods[podKey{namespace, name}]
	return p, ok
}

// Policies is how many NetworkPolicy objects the cluster has.
func (w *PolicyWatch) Policies() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.policies)
}

// Pod is what the watch knows of one pod, or, when the watch has not
// seen it yet (a pod bound a moment ago, or the watch not yet listed),
// what the API server says of it now, within ctx.
func (w *PolicyWatch) Pod(ctx context.Context, namespace, name string) (netpol.Pod, error) {
	w.mu.Lock()
	p, ok := w.pods[podKey{namespace, name}]
	w.mu.Unlock()
	if ok {
		return p, nil
	}
	if w.src.GetPod == nil {
		return netpol.Pod{}, fmt.Errorf("pod %s/%s: not seen by the watch", namespace, name)
	}
	got, err := w.src.GetPod(ctx, namespace, name)
	if err != nil {
		return netpol.Pod{}, fmt.Errorf("get pod %s/%s: %w", namespace, name, err)
	}
	return toPolicyPod(got), nil
}

func finished(p *corev1.Pod) bool {
	return p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed
}

// podSink is the pod reflector's store: it hands each pod to the
// watch's map, keeping nothing itself.
type podSink struct {
	put     func(*corev1.Pod)
	remove  func(namespace, name string)
	replace func([]*corev1.Pod)
}

func (s podSink) Add(obj any) error { return s.Update(obj) }
func (s podSink) Resync() error     { return nil }
func (s podSink) Update(obj any) error {
	if p, ok := obj.(*corev1.Pod); ok {
		s.put(p)
	}
	return nil
}

func (s podSink) Delete(obj any) error {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	if p, ok := obj.(*corev1.Pod); ok {
		s.remove(p.Namespace, p.Name)
	}
	return nil
}

func (s podSink) Replace(list []any, _ string) error {
	pods := make([]*corev1.Pod, 0, len(list))
	for _, obj := range list {
		if p, ok := obj.(*corev1.Pod); ok {
			pods = append(pods, p)
		}
	}
	s.replace(pods)
	return nil
}

// slimPolicy drops what the compiler never reads of a policy and what a
// policy applied with kubectl carries twice (its last-applied
// annotation) or in bulk (managed fields).
func slimPolicy(obj any) (any, error) {
	np, ok := obj.(*networkingv1.NetworkPolicy)
	if !ok {
		return obj, nil
	}
	return &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: np.Name, Namespace: np.Namespace, UID: np.UID, ResourceVersion: np.ResourceVersion},
		Spec:       np.Spec,
	}, nil
}

func slimNamespace(obj any) (any, error) {
	n, ok := obj.(*corev1.Namespace)
	if !ok {
		return obj, nil
	}
	return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: n.Name, UID: n.UID, ResourceVersion: n.ResourceVersion, Labels: n.Labels}}, nil
}

// policyPodIP is the pod's address as a peer: its IPv4 one, else its
// IPv6 one (an IPv6 cluster's pods, whose node writes table ip6). A
// dual-stack pod is a peer by its IPv4 address alone.
func policyPodIP(st corev1.PodStatus) netip.Addr {
	var v6 netip.Addr
	for _, ip := range append(st.PodIPs, corev1.PodIP{IP: st.PodIP}) {
		a, err := netip.ParseAddr(ip.IP)
		switch {
		case err != nil:
		case a.Is4():
			return a
		case !v6.IsValid():
			v6 = a
		}
	}
	return v6
}

func toPolicyPod(p *corev1.Pod) netpol.Pod {
	out := netpol.Pod{Namespace: p.Namespace, Name: p.Name, Labels: p.Labels, HostNetwork: p.Spec.HostNetwork}
	out.IP = policyPodIP(p.Status)
	for _, c := range p.Spec.Containers {
		for _, cp := range c.Ports {
			if cp.Name == "" || cp.ContainerPort < 1 || cp.ContainerPort > 65535 {
				continue
			}
			proto := netpol.Protocol(cp.Protocol)
			if proto == "" {
				proto = netpol.TCP
			}
			out.Ports = append(out.Ports, netpol.ContainerPort{Name: cp.Name, Protocol: proto, Port: uint16(cp.ContainerPort)})
		}
	}
	return out
}

// CountNetworkPolicies counts the cluster's NetworkPolicy objects with
// one small list (one item and the API server's count of the rest), for
// an agent that enforces none and must say so.
func (s PolicySources) CountNetworkPolicies(ctx context.Context) (int, error) {
	obj, err := s.NetworkPolicies.List(ctx, metav1.ListOptions{Limit: 1})
	if err != nil {
		return 0, fmt.Errorf("count NetworkPolicies: %w", err)
	}
	l, ok := obj.(*networkingv1.NetworkPolicyList)
	if !ok {
		return 0, fmt.Errorf("count NetworkPolicies: the list is a %T", obj)
	}
	n := len(l.Items)
	if l.RemainingItemCount != nil {
		n += int(*l.RemainingItemCount)
	} else if l.Continue != "" {
		// No count offered: list them all, a page at a time.
		n, err = s.countAll(ctx)
	}
	return n, err
}

func (s PolicySources) countAll(ctx context.Context) (int, error) {
	n, cont := 0, ""
	for {
		obj, err := s.NetworkPolicies.List(ctx, metav1.ListOptions{Limit: 500, Continue: cont})
		if err != nil {
			return 0, fmt.Errorf("count NetworkPolicies: %w", err)
		}
		l, ok := obj.(*networkingv1.NetworkPolicyList)
		if !ok {
			return 0, fmt.Errorf("count NetworkPolicies: the list is a %T", obj)
		}
		n += len(l.Items)
		if cont = l.Continue; cont == "" {
			return n, nil
		}
	}
}
