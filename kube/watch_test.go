package kube

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/vpcnet/vpcnet/agent"
)

// listWatches returns the list and watch requests for resource, with
// their field selectors.
func listWatches(actions []k8stesting.Action, resource string) (selectors []string) {
	for _, a := range actions {
		if a.GetResource().Resource != resource {
			continue
		}
		switch a := a.(type) {
		case k8stesting.ListActionImpl:
			selectors = append(selectors, "list "+a.ListOptions.FieldSelector)
		case k8stesting.WatchActionImpl:
			selectors = append(selectors, "watch "+a.WatchRestrictions.Fields.String())
		}
	}
	return selectors
}

func TestEveryWatchIsScopedToThisNode(t *testing.T) {
	const me = "ip-10-0-0-5.us-west-2.compute.internal"
	cs := fake.NewClientset(
		newNode(me, ourProviderID, labeled("topology.kubernetes.io/zone", "us-west-2a")),
		newPod("default", "web-1", me),
	)
	dyn := newDynamic(eniConfig("us-west-2a", "subnet-pods"))
	h := start(t, Options{NodeName: me, CustomNetwork: true}, cs, dyn)
	h.waitFor(t, "read the ENIConfig and the pods", func(st agent.KubeState) bool { return st.ENIConfig.Found && st.Pods > 0 })

	want := map[string][]string{
		"pods":       {"list spec.nodeName=" + me, "watch spec.nodeName=" + me},
		"nodes":      {"list metadata.name=" + me, "watch metadata.name=" + me},
		"eniconfigs": {"list metadata.name=us-west-2a", "watch metadata.name=us-west-2a"},
	}
	got := map[string][]string{
		"pods":       listWatches(h.cs.Actions(), "pods"),
		"nodes":      listWatches(h.cs.Actions(), "nodes"),
		"eniconfigs": listWatches(h.dyn.Actions(), "eniconfigs"),
	}
	for res, sels := range want {
		seen := map[string]bool{}
		for _, s := range got[res] {
			seen[s] = true
		}
		for _, s := range sels {
			if !seen[s] {
				t.Errorf("%s: no request %q; requests: %q", res, s, got[res])
			}
		}
		if len(seen) != len(sels) {
			t.Errorf("%s: requests %q, want only %q: anything unscoped grows with the cluster", res, got[res], sels)
		}
	}
}

func TestPodsAreKeptAsTheirIdentityOnly(t *testing.T) {
	const me = "node-a"
	big := newPod("shop", "cart-7d9", me)
	big.Annotations = map[string]string{"kubectl.kubernetes.io/last-applied-configuration": string(make([]byte, 4096))}
	big.Spec.Containers = []corev1.Container{{Name: "cart", Image: "registry.example/cart:1", Env: []corev1.EnvVar{{Name: "A", Value: "b"}}}}
	big.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "kubectl"}}
	h := start(t, Options{NodeName: me}, fake.NewClientset(newNode(me, ourProviderID), big), nil)
	h.waitFor(t, "saw the pod", func(st agent.KubeState) bool { return st.Pods == 1 })

	h.c.mu.Lock()
	obj, ok, _ := h.c.pods.GetByKey("shop/cart-7d9")
	h.c.mu.Unlock()
	if !ok {
		t.Fatal("pod not in the watch cache")
	}
	p := obj.(*corev1.Pod)
	if p.UID != big.UID || p.Name != big.Name || p.Namespace != big.Namespace {
		t.Errorf("cached pod %s/%s uid %s lost its identity", p.Namespace, p.Name, p.UID)
	}
	if len(p.Annotations) != 0 || len(p.Spec.Containers) != 0 || len(p.ManagedFields) != 0 {
		t.Errorf("cached pod keeps annotations %d, containers %d, managed fields %d: memory grows with pod specs",
			len(p.Annotations), len(p.Spec.Containers), len(p.ManagedFields))
	}
}

func TestAnotherNodeSeenByTheWatchIsIgnored(t *testing.T) {
	// A fake API server ignores field selectors, as a buggy one might: the
	// other Node's label must not be taken for this one's.
	const me = "node-a"
	mine := newNode(me, ourProviderID, labeled("topology.kubernetes.io/zone", "us-west-2a"))
	other := newNode("node-b", "aws:///us-west-2a/i-0b", labeled("topology.kubernetes.io/zone", "us-west-2b"))
	h := start(t, Options{NodeName: me, CustomNetwork: true, StartupTaint: "vpcnet.io/agent-not-ready"}, fake.NewClientset(mine, other),
		newDynamic(eniConfig("us-west-2a", "subnet-a"), eniConfig("us-west-2b", "subnet-b")))
	h.waitFor(t, "read the ENIConfig", func(st agent.KubeState) bool { return st.ENIConfig.Found })
	// The other Node changes, then ours: one watch delivers both in order,
	// so once ours is seen, the other's has been handled.
	ctx := context.Background()
	other.Labels["touched"] = "yes"
	if _, err := h.cs.CoreV1().Nodes().Update(ctx, other, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	mine.Spec.Taints = []corev1.Taint{{Key: "vpcnet.io/agent-not-ready", Effect: corev1.TaintEffectNoSchedule}}
	if _, err := h.cs.CoreV1().Nodes().Update(ctx, mine, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	st := h.waitFor(t, "saw this Node's update", func(st agent.KubeState) bool { return strings.Contains(st.StartupTaint, "until the agent is ready") })
	if st.Node != me || st.ENIConfig.Name != "us-west-2a" || st.ENIConfig.Subnet != "subnet-a" {
		t.Fatalf("state follows another Node: node %s, ENIConfig %s (%s)", st.Node, st.ENIConfig.Name, st.ENIConfig.Subnet)
	}
}

func TestTheKubeletsMaxPodsIsReadFromTheNodeAndFollowed(t *testing.T) {
	const me = "ip-10-0-0-5.us-west-2.compute.internal"
	cs := fake.NewClientset(newNode(me, ourProviderID, withPods(29)))
	h := start(t, Options{NodeName: me}, cs, nil)
	h.waitFor(t, "the kubelet's max pods", func(st agent.KubeState) bool { return st.MaxPods == 29 })

	// The kubelet restarted with prefix delegation's value.
	n, err := cs.CoreV1().Nodes().Get(context.Background(), me, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	withPods(110)(n)
	if _, err := cs.CoreV1().Nodes().UpdateStatus(context.Background(), n, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	h.waitFor(t, "the kubelet's new max pods", func(st agent.KubeState) bool { return st.MaxPods == 110 })
}

func withPods(n int64) func(*corev1.Node) {
	return func(node *corev1.Node) {
		node.Status.Capacity = corev1.ResourceList{corev1.ResourcePods: *resource.NewQuantity(n, resource.DecimalSI)}
	}
}

// Issue 16: the pods bound to the node that need an address are the Adds
// about to come; hostNetwork, finished and deleting pods are not, and a
// pod that finishes stops counting as its status changes.
func TestScheduledPodsAreTheBoundPodsThatNeedAnAddress(t *testing.T) {
	const me = "node-a"
	hostNet := newPod("kube-system", "proxy", me)
	hostNet.Spec.HostNetwork = true
	done := newPod("batch", "job-1", me)
	done.Status.Phase = corev1.PodSucceeded
	going := newPod("shop", "old", me)
	now := metav1.Now()
	going.DeletionTimestamp = &now
	running := newPod("shop", "cart", me)
	running.Status.Phase = corev1.PodRunning
	cs := fake.NewClientset(newNode(me, ourProviderID), hostNet, done, going, running, newPod("shop", "web", me), newPod("shop", "elsewhere", "node-b"))
	h := start(t, Options{NodeName: me}, cs, nil)
	h.waitFor(t, "saw the pods", func(st agent.KubeState) bool { return st.Pods == 6 }) // the fake ignores field selectors

	names := func() []string {
		var out []string
		for _, p := range h.c.ScheduledPods() {
			out = append(out, p.String())
		}
		return out
	}
	if got, want := names(), []string{"shop/cart", "shop/web"}; !slices.Equal(got, want) {
		t.Fatalf("ScheduledPods = %v, want %v", got, want)
	}
	running.Status.Phase = corev1.PodFailed
	if _, err := cs.CoreV1().Pods("shop").UpdateStatus(context.Background(), running, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for !slices.Equal(names(), []string{"shop/web"}) {
		if time.Now().After(deadline) {
			t.Fatalf("after shop/cart failed, ScheduledPods = %v, want only shop/web", names())
		}
		time.Sleep(5 * time.Millisecond)
	}
}
