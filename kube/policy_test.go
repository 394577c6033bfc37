package kube

import (
	"context"
	"net/netip"
	"reflect"
	"strings"
	"testing"
	"time"
	"unsafe"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/vpcnet/vpcnet/netpol"
)

func fakePolicySources(cs *fake.Clientset) PolicySources {
	return PolicySources{
		NetworkPolicies: ListWatch{
			List: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
				return cs.NetworkingV1().NetworkPolicies("").List(ctx, o)
			},
			Watch: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
				return cs.NetworkingV1().NetworkPolicies("").Watch(ctx, o)
			},
		},
		Namespaces: ListWatch{
			List: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
				return cs.CoreV1().Namespaces().List(ctx, o)
			},
			Watch: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
				return cs.CoreV1().Namespaces().Watch(ctx, o)
			},
		},
		Pods: ListWatch{
			List: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
				return cs.CoreV1().Pods("").List(ctx, o)
			},
			Watch: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
				return cs.CoreV1().Pods("").Watch(ctx, o)
			},
		},
		GetPod: func(ctx context.Context, ns, name string) (*corev1.Pod, error) {
			return cs.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		},
		Client: cs,
	}
}

func TestThePolicyWatchKnowsEveryPodsLabelsAddressAndNamedPorts(t *testing.T) {
	web := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "x", Name: "web", Labels: map[string]string{"app": "web"}},
		Spec: corev1.PodSpec{NodeName: "other", Containers: []corev1.Container{{Ports: []corev1.ContainerPort{
			{Name: "http", ContainerPort: 80, Protocol: corev1.ProtocolTCP}, {ContainerPort: 9000}}}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "10.0.0.5", PodIPs: []corev1.PodIP{{IP: "10.0.0.5"}}}}
	done := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "x", Name: "job"}, Status: corev1.PodStatus{Phase: corev1.PodSucceeded, PodIP: "10.0.0.6"}}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "x", Labels: map[string]string{"team": "red"}}}
	np := &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "x", Name: "deny"}}
	cs := fake.NewClientset(web, done, ns, np)
	w := NewPolicyWatch(fakePolicySources(cs))
	changed := make(chan struct{}, 100)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = w.Run(ctx, func() { changed <- struct{}{} }) }()
	waitFor(t, changed, func() bool { return w.Synced() })

	c := w.Cluster()
	if len(c.Policies) != 1 || c.Namespaces["x"]["team"] != "red" {
		t.Fatalf("cluster = %+v; want the policy and namespace x's labels", c)
	}
	if len(c.Pods) != 1 {
		t.Fatalf("pods = %+v; want web only (a finished pod's address may be reused)", c.Pods)
	}
	p := c.Pods[0]
	if p.IP != netip.MustParseAddr("10.0.0.5") || p.Labels["app"] != "web" || len(p.Ports) != 1 || p.Ports[0].Name != "http" || p.Ports[0].Port != 80 {
		t.Errorf("web = %+v", p)
	}

	// A relabelled pod is seen as such.
	web.Labels = map[string]string{"app": "db"}
	if _, err := cs.CoreV1().Pods("x").Update(ctx, web, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, changed, func() bool {
		got, err := w.Pod(ctx, "x", "web")
		return err == nil && got.Labels["app"] == "db"
	})

	// A pod the watch has not seen is read from the API server.
	fresh := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "x", Name: "fresh", Labels: map[string]string{"app": "new"}}}
	if err := cs.Tracker().Add(fresh); err != nil {
		t.Fatal(err)
	}
	got, err := w.Pod(ctx, "x", "fresh")
	if err != nil || got.Labels["app"] != "new" {
		t.Errorf("Pod(x/fresh) = %+v, %v", got, err)
	}
}

// waitFor waits for cond, checking after each change.
func waitFor(t *testing.T, changed chan struct{}, cond func() bool) {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for !cond() {
		select {
		case <-changed:
		case <-deadline:
			t.Fatal("condition not met after 10s of changes")
		}
	}
}

func TestAPodWithoutAnAddressStartsNoNewGeneration(t *testing.T) {
	w := NewPolicyWatch(PolicySources{})
	gen := w.Generation()
	w.putPod(podKey{"x", "new"}, netpol.Pod{Namespace: "x", Name: "new", Labels: map[string]string{"app": "web"}}, false)
	if w.Generation() != gen {
		t.Error("a pod with no address yet (no peer of anything) started a new generation: every ADD would recompile the cluster")
	}
	if _, ok := w.Known("x", "new"); !ok {
		t.Error("the pod is not known for its own ADD")
	}
	w.putPod(podKey{"x", "new"}, netpol.Pod{Namespace: "x", Name: "new", Labels: map[string]string{"app": "web"}, IP: netip.MustParseAddr("10.0.0.9")}, false)
	if w.Generation() == gen {
		t.Error("the pod's address, published, started no new generation: its peers would not see it")
	}
	gen = w.Generation()
	w.putPod(podKey{"x", "new"}, netpol.Pod{Namespace: "x", Name: "new", Labels: map[string]string{"app": "db"}, IP: netip.MustParseAddr("10.0.0.9")}, false)
	if w.Generation() == gen {
		t.Error("a relabelled pod started no new generation")
	}
	gen = w.Generation()
	w.putPod(podKey{"x", "new"}, netpol.Pod{}, true)
	if w.Generation() == gen {
		t.Error("a deleted pod with an address started no new generation")
	}
}

// Pods of one Deployment carry equal labels and named ports, and every
// pod of a namespace its name: the watch keeps each once, shared, and
// lets go of what no pod holds any more.
func TestPodsShareEqualLabelsPortsAndNamespacesAndWhatNoPodHoldsIsLetGo(t *testing.T) {
	w := NewPolicyWatch(PolicySources{})
	mk := func(name, app string) netpol.Pod {
		// Separate maps, slices and strings, as each decoded pod has.
		return netpol.Pod{Namespace: strings.Clone("shop"), Name: name, Labels: map[string]string{"app": app, "tier": "web"},
			IP: netip.MustParseAddr("10.0.0.9"), Ports: []netpol.ContainerPort{{Name: "http", Protocol: netpol.TCP, Port: 80}}}
	}
	for _, name := range []string{"a", "b", "c"} {
		w.putPod(podKey{"shop", name}, mk(name, "web"), false)
	}
	w.putPod(podKey{"shop", "d"}, mk("d", "db"), false)
	a, _ := w.Known("shop", "a")
	b, _ := w.Known("shop", "b")
	d, _ := w.Known("shop", "d")
	if !sameMap(a.Labels, b.Labels) || sameMap(a.Labels, d.Labels) {
		t.Error("pods with equal labels keep a map each, or pods with different labels share one")
	}
	if &a.Ports[0] != &b.Ports[0] || &a.Ports[0] != &d.Ports[0] {
		t.Error("pods with equal named ports keep a copy each")
	}
	if unsafe.StringData(a.Namespace) != unsafe.StringData(d.Namespace) {
		t.Error("pods of one namespace keep its name each")
	}
	if got := len(w.shared.labels); got != 2 {
		t.Errorf("%d label sets kept, want 2", got)
	}

	// Relabelled, deleted: the web set is let go with its last pod.
	w.putPod(podKey{"shop", "a"}, mk("a", "db"), false)
	w.putPod(podKey{"shop", "b"}, netpol.Pod{}, true)
	w.putPod(podKey{"shop", "c"}, netpol.Pod{}, true)
	if a, _ := w.Known("shop", "a"); a.Labels["app"] != "db" || !sameMap(a.Labels, d.Labels) {
		t.Errorf("relabelled pod a = %+v; want the db set, shared with d", a)
	}
	if got := len(w.shared.labels); got != 1 {
		t.Errorf("%d label sets kept with only db pods left, want 1", got)
	}
	w.putPod(podKey{"shop", "a"}, netpol.Pod{}, true)
	w.putPod(podKey{"shop", "d"}, netpol.Pod{}, true)
	if n := len(w.shared.labels) + len(w.shared.ports) + len(w.shared.namespaces); n != 0 {
		t.Errorf("%d shared values kept with no pod left, want none", n)
	}
}

func sameMap(a, b map[string]string) bool {
	return reflect.ValueOf(a).UnsafePointer() == reflect.ValueOf(b).UnsafePointer()
}

// A pod is a peer by its IPv4 address, and by its IPv6 one when it has
// no IPv4 address (an IPv6 cluster's pods): before, IPv6 pods were peers
// without address, which no rule of an IPv6 node's table could admit.
func TestAPolicyPeerIsItsIPv4AddressElseItsIPv6One(t *testing.T) {
	for _, tt := range []struct {
		st   corev1.PodStatus
		want string
	}{
		{corev1.PodStatus{PodIP: "10.0.0.5", PodIPs: []corev1.PodIP{{IP: "10.0.0.5"}}}, "10.0.0.5"},
		{corev1.PodStatus{PodIP: "2600:1f14::5", PodIPs: []corev1.PodIP{{IP: "2600:1f14::5"}}}, "2600:1f14::5"},
		{corev1.PodStatus{PodIP: "2600:1f14::5", PodIPs: []corev1.PodIP{{IP: "2600:1f14::5"}, {IP: "10.0.0.5"}}}, "10.0.0.5"},
		{corev1.PodStatus{PodIP: "2600:1f14::5"}, "2600:1f14::5"},
		{corev1.PodStatus{}, "invalid IP"},
	} {
		if got := toPolicyPod(&corev1.Pod{Status: tt.st}).IP.String(); got != tt.want {
			t.Errorf("%+v: peer address %s, want %s", tt.st, got, tt.want)
		}
	}
}
