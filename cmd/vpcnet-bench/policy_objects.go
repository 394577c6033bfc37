package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"sync"
	"sync/atomic"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"

	"github.com/vpcnet/vpcnet/simcluster/kubecluster"
)

// The policy scenario's cluster, as the API server holds it before any
// agent is measured: namespaces, pods and NetworkPolicies of the shapes
// real clusters have. Its pods run on nodes that do not exist (no agent
// is asked about them); they are there for selectors to match and for
// their addresses to fill peer sets, as in a cluster of a hundred nodes.

const (
	// policyNamespaces hold the background pods: ns-00 … ns-49.
	policyNamespaces = 50
	policyPods       = 5000
	// policyTemplates is how many policies each namespace but ns-00
	// (the monitoring one) and the bench's own has: 49·20 + 20 = 1,000.
	policyTemplates = 20
	// benchPolNS holds the measured pods that policies select; benchOpenNS
	// those no policy selects, and the client of the TCP measurements.
	benchPolNS  = "bench-pol"
	benchOpenNS = "bench-open"
	// allowClient is the policy of benchPolNS that admits the client,
	// and that the propagation measurement flips.
	allowClient = "allow-client"
	// serverPort is where the measured pods' servers listen.
	serverPort = 8080
	// createWorkers is how many requests the driver keeps in flight
	// while it fills the API server: creation is set-up, not measured.
	createWorkers = 32
)

// The labels of the measured pods. In benchPolNS they are selected by
// five policies for ingress (deny-all, same namespace, monitoring, prod
// namespaces by a matchExpressions selector, and allowClient) and three
// for egress (DNS, HTTPS outside the VPC, a named port); in benchOpenNS by
// none.
var (
	selectedLabels = map[string]string{"app": "web", "tier": "frontend", "version": "v2"}
	clientLabels   = map[string]string{"app": "load", "role": "client"}
	openLabels     = map[string]string{"app": "web", "role": "server"}
)

func policyNS(i int) string { return fmt.Sprintf("ns-%02d", i) }

// namespaceLabels: teams of five namespaces, a third of them prod, and
// ns-00 the monitoring namespace.
func namespaceLabels(i int) map[string]string {
	l := map[string]string{"team": fmt.Sprintf("team-%d", i%10), "env": []string{"prod", "staging", "dev"}[i%3]}
	if i == 0 {
		l["purpose"] = "monitoring"
	}
	return l
}

// backgroundAddr is the i-th background pod's address: spread over
// 10.0.64.0/18 (outside the bench nodes' subnet) in a stride, as pods of
// one namespace land on many nodes and get scattered addresses, so peer
// sets hold many single addresses rather than a few neat blocks.
func backgroundAddr(i int) netip.Addr {
	const size = 1 << 14
	off := (i*7919 + 1) % size // 7919 is prime, so i ↦ off is one to one
	return netip.AddrFrom4([4]byte{10, 0, byte(64 + off>>8), byte(off)})
}

// backgroundPod is the i-th of the policyPods pods.
func backgroundPod(i int) *corev1.Pod {
	ns := i % policyNamespaces
	j := i / policyNamespaces
	labels := map[string]string{
		"app":     fmt.Sprintf("app-%d", j%10),
		"tier":    []string{"frontend", "backend", "db"}[(j/10)%3],
		"version": []string{"v1", "v2"}[j%2],
	}
	if ns == 0 && j < 10 {
		labels["app"] = "prometheus"
	}
	ports := []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}, {Name: "metrics", ContainerPort: 9090}}
	if j%4 == 0 {
		ports = append(ports, corev1.ContainerPort{Name: "grpc", ContainerPort: 9000})
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("p-%04d", i), Namespace: policyNS(ns), Labels: labels},
		Spec: corev1.PodSpec{
			NodeName:   fmt.Sprintf("worker-%02d", i%100),
			Containers: []corev1.Container{{Name: "app", Image: kubecluster.PauseImage, Ports: ports}},
		},
	}
}

// benchPod is a pod the driver will ADD, bound to nodeName.
func benchPod(ns, name, nodeName string, labels map[string]string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: labels},
		Spec: corev1.PodSpec{NodeName: nodeName, Containers: []corev1.Container{{Name: "app", Image: kubecluster.PauseImage,
			Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: serverPort}}}}},
	}
}

// policyTemplate is the k-th policy of namespace ns.
func policyTemplate(ns string, k int) *networkingv1.NetworkPolicy {
	tcp, udp := corev1.ProtocolTCP, corev1.ProtocolUDP
	port := func(p corev1.Protocol, v int) networkingv1.NetworkPolicyPort {
		pv := intstr.FromInt32(int32(v))
		return networkingv1.NetworkPolicyPort{Protocol: &p, Port: &pv}
	}
	named := func(name string) networkingv1.NetworkPolicyPort {
		pv := intstr.FromString(name)
		return networkingv1.NetworkPolicyPort{Protocol: &tcp, Port: &pv}
	}
	sel := func(kv ...string) *metav1.LabelSelector {
		m := map[string]string{}
		for i := 0; i+1 < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return &metav1.LabelSelector{MatchLabels: m}
	}
	ingress, egress := networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress
	np := &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns}}
	s := &np.Spec
	switch {
	case k == 0:
		np.Name = "default-deny-ingress"
		s.PolicyTypes = []networkingv1.PolicyType{ingress}
	case k == 1:
		np.Name = "allow-same-namespace"
		s.Ingress = []networkingv1.NetworkPolicyIngressRule{{From: []networkingv1.NetworkPolicyPeer{{PodSelector: &metav1.LabelSelector{}}}}}
	case k == 2:
		np.Name = "allow-monitoring"
		s.Ingress = []networkingv1.NetworkPolicyIngressRule{{
			From:  []networkingv1.NetworkPolicyPeer{{NamespaceSelector: sel("purpose", "monitoring"), PodSelector: sel("app", "prometheus")}},
			Ports: []networkingv1.NetworkPolicyPort{named("metrics")},
		}}
	case k >= 3 && k <= 12:
		app := fmt.Sprintf("app-%d", k-3)
		team := fmt.Sprintf("team-%d", (k-3)%10)
		np.Name = "allow-" + app
		s.PodSelector = *sel("app", app)
		s.Ingress = []networkingv1.NetworkPolicyIngressRule{{
			From: []networkingv1.NetworkPolicyPeer{
				{PodSelector: sel("tier", "frontend")},
				{NamespaceSelector: sel("team", team), PodSelector: sel("app", app)},
			},
			Ports: []networkingv1.NetworkPolicyPort{port(tcp, 8080), named("http")},
		}}
	case k == 13:
		np.Name = "allow-dns"
		s.PolicyTypes = []networkingv1.PolicyType{egress}
		s.Egress = []networkingv1.NetworkPolicyEgressRule{{
			To:    []networkingv1.NetworkPolicyPeer{{NamespaceSelector: sel("kubernetes.io/metadata.name", "kube-system"), PodSelector: sel("k8s-app", "kube-dns")}},
			Ports: []networkingv1.NetworkPolicyPort{port(udp, 53), port(tcp, 53)},
		}}
	case k == 14:
		np.Name = "frontend-https-out"
		s.PodSelector = *sel("tier", "frontend")
		s.PolicyTypes = []networkingv1.PolicyType{egress}
		s.Egress = []networkingv1.NetworkPolicyEgressRule{{
			To:    []networkingv1.NetworkPolicyPeer{{IPBlock: &networkingv1.IPBlock{CIDR: "0.0.0.0/0", Except: []string{"10.0.0.0/8", "169.254.169.254/32"}}}},
			Ports: []networkingv1.NetworkPolicyPort{port(tcp, 443)},
		}}
	case k == 15:
		np.Name = "backend-to-db"
		s.PodSelector = *sel("tier", "backend")
		s.PolicyTypes = []networkingv1.PolicyType{egress}
		s.Egress = []networkingv1.NetworkPolicyEgressRule{{
			To:    []networkingv1.NetworkPolicyPeer{{PodSelector: sel("tier", "db")}},
			Ports: []networkingv1.NetworkPolicyPort{port(tcp, 5432)},
		}}
	case k == 16:
		np.Name = "db-from-backend"
		end := int32(5440)
		p := port(tcp, 5432)
		p.EndPort = &end
		s.PodSelector = *sel("tier", "db")
		s.Ingress = []networkingv1.NetworkPolicyIngressRule{{
			From:  []networkingv1.NetworkPolicyPeer{{PodSelector: sel("tier", "backend")}},
			Ports: []networkingv1.NetworkPolicyPort{p},
		}}
	case k == 17:
		np.Name = "app-1-from-vpc"
		s.PodSelector = *sel("app", "app-1")
		s.Ingress = []networkingv1.NetworkPolicyIngressRule{{
			From:  []networkingv1.NetworkPolicyPeer{{IPBlock: &networkingv1.IPBlock{CIDR: "10.0.0.0/16", Except: []string{"10.0.32.0/20"}}}},
			Ports: []networkingv1.NetworkPolicyPort{port(tcp, 443)},
		}}
	case k == 18:
		np.Name = "v2-from-prod"
		s.PodSelector = metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "version", Operator: metav1.LabelSelectorOpIn, Values: []string{"v2", "v3"}}}}
		s.Ingress = []networkingv1.NetworkPolicyIngressRule{{From: []networkingv1.NetworkPolicyPeer{{NamespaceSelector: sel("env", "prod")}}}}
	default:
		np.Name = "frontend-to-backend"
		s.PodSelector = *sel("tier", "frontend")
		s.PolicyTypes = []networkingv1.PolicyType{egress}
		s.Egress = []networkingv1.NetworkPolicyEgressRule{{
			To:    []networkingv1.NetworkPolicyPeer{{PodSelector: sel("tier", "backend")}},
			Ports: []networkingv1.NetworkPolicyPort{named("http")},
		}}
	}
	return np
}

// benchPolicy is the k-th policy of benchPolNS: the templates, with
// allowClient in place of the one whose ipBlock would admit every pod of
// the VPC (and so the client) to app-1.
func benchPolicy(k int) *networkingv1.NetworkPolicy {
	if k != 17 {
		return policyTemplate(benchPolNS, k)
	}
	return allowClientPolicy(true)
}

// allowClientPolicy admits clientLabels' pods of benchOpenNS to the
// selected web pods on serverPort; with allow false it names a role no
// pod has, and admits nothing.
func allowClientPolicy(allow bool) *networkingv1.NetworkPolicy {
	role := "client"
	if !allow {
		role = "nobody"
	}
	tcp := corev1.ProtocolTCP
	pv := intstr.FromInt32(serverPort)
	return &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: allowClient, Namespace: benchPolNS},
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			Ingress: []networkingv1.NetworkPolicyIngressRule{{
				From: []networkingv1.NetworkPolicyPeer{{
					NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": benchOpenNS}},
					PodSelector:       &metav1.LabelSelector{MatchLabels: map[string]string{"role": role}},
				}},
				Ports: []networkingv1.NetworkPolicyPort{{Protocol: &tcp, Port: &pv}},
			}},
		},
	}
}

// policies are the scenario's policyCount NetworkPolicies.
func policies() []*networkingv1.NetworkPolicy {
	var out []*networkingv1.NetworkPolicy
	for i := 1; i < policyNamespaces; i++ {
		for k := range policyTemplates {
			out = append(out, policyTemplate(policyNS(i), k))
		}
	}
	for k := range policyTemplates {
		out = append(out, benchPolicy(k))
	}
	return out
}

// populated is what fillCluster made.
type populated struct {
	namespaces, pods, policies int
}

// fillCluster makes the namespaces (with their default ServiceAccounts,
// which pods need and no controller makes here), the background pods with
// their addresses published, and the policies, createWorkers requests at
// a time.
func fillCluster(ctx context.Context, k kubernetes.Interface) (populated, error) {
	var p populated
	type nsSpec struct {
		name   string
		labels map[string]string
	}
	nss := []nsSpec{{benchPolNS, map[string]string{"team": "team-bench", "env": "bench"}}, {benchOpenNS, nil}}
	for i := range policyNamespaces {
		nss = append(nss, nsSpec{policyNS(i), namespaceLabels(i)})
	}
	err := parallel(ctx, len(nss), func(ctx context.Context, i int) error {
		ns := nss[i]
		if _, err := k.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns.name, Labels: ns.labels}}, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("create namespace %s: %w", ns.name, err)
		}
		return createServiceAccount(ctx, k, ns.name)
	})
	if err != nil {
		return p, err
	}
	// kube-system exists already; its DNS pods are the egress policies'
	// peers.
	if err := createServiceAccount(ctx, k, "kube-system"); err != nil {
		return p, err
	}
	p.namespaces = len(nss)
	dns := []*corev1.Pod{}
	for i := range 2 {
		dp := benchPod("kube-system", fmt.Sprintf("coredns-%d", i), fmt.Sprintf("worker-%02d", i), map[string]string{"k8s-app": "kube-dns"})
		dns = append(dns, dp)
	}
	err = parallel(ctx, policyPods+len(dns), func(ctx context.Context, i int) error {
		var pod *corev1.Pod
		var addr netip.Addr
		if i < policyPods {
			pod, addr = backgroundPod(i), backgroundAddr(i)
		} else {
			pod, addr = dns[i-policyPods], netip.AddrFrom4([4]byte{10, 0, 128, byte(10 + i - policyPods)})
		}
		if _, err := k.CoreV1().Pods(pod.Namespace).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("create pod %s/%s: %w", pod.Namespace, pod.Name, err)
		}
		return publishAddr(ctx, k, pod.Namespace, pod.Name, addr)
	})
	if err != nil {
		return p, err
	}
	p.pods = policyPods + len(dns)
	nps := policies()
	err = parallel(ctx, len(nps), func(ctx context.Context, i int) error {
		if _, err := k.NetworkingV1().NetworkPolicies(nps[i].Namespace).Create(ctx, nps[i], metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("create NetworkPolicy %s/%s: %w", nps[i].Namespace, nps[i].Name, err)
		}
		return nil
	})
	p.policies = len(nps)
	return p, err
}

func createServiceAccount(ctx context.Context, k kubernetes.Interface, ns string) error {
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default", Namespace: ns}}
	if _, err := k.CoreV1().ServiceAccounts(ns).Create(ctx, sa, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create service account %s/default: %w", ns, err)
	}
	return nil
}

// publishAddr sets a pod's status as kubelet does once its sandbox has
// an address: running, with status.podIPs. NetworkPolicy peers are pods
// with an address; one without is nobody's peer.
func publishAddr(ctx context.Context, k kubernetes.Interface, ns, name string, addr netip.Addr) error {
	patch, err := json.Marshal(map[string]any{"status": map[string]any{
		"phase": corev1.PodRunning, "podIP": addr.String(), "podIPs": []map[string]string{{"ip": addr.String()}},
	}})
	if err != nil {
		return err
	}
	if _, err := k.CoreV1().Pods(ns).Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{}, "status"); err != nil {
		return fmt.Errorf("publish the address of pod %s/%s: %w", ns, name, err)
	}
	return nil
}

// parallel runs f for 0 … n-1, createWorkers at a time, and stops
// starting new ones after the first error, which it returns: the calls
// it cancels fail only because of it.
func parallel(ctx context.Context, n int, f func(context.Context, int) error) error {
	inner, cancel := context.WithCancel(ctx)
	defer cancel()
	var next atomic.Int64
	var once sync.Once
	var first error
	var wg sync.WaitGroup
	for range min(createWorkers, n) {
		wg.Go(func() {
			for inner.Err() == nil {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				if err := f(inner, i); err != nil {
					once.Do(func() { first = err })
					cancel()
				}
			}
		})
	}
	wg.Wait()
	if first == nil {
		return ctx.Err()
	}
	return first
}
