package netpol

import (
	"fmt"
	"net/netip"
	"runtime"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/vpcnet/vpcnet/internal/heaptest"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// The world of these tests: namespaces x and y, pods a and b in each.
func world(policies ...*networkingv1.NetworkPolicy) *Cluster {
	return &Cluster{
		Policies: policies,
		Namespaces: map[string]map[string]string{
			"x": {"kubernetes.io/metadata.name": "x", "team": "red"},
			"y": {"kubernetes.io/metadata.name": "y", "team": "blue"},
		},
		Pods: []Pod{
			pod("x", "a", "10.0.0.1"), pod("x", "b", "10.0.0.2"),
			pod("y", "a", "10.0.1.1"), pod("y", "b", "10.0.1.2"),
			{Namespace: "y", Name: "host", Labels: map[string]string{"pod": "a"}, IP: netip.MustParseAddr("192.168.0.9"), HostNetwork: true},
		},
	}
}

func pod(ns, name, ip string) Pod {
	return Pod{Namespace: ns, Name: name, Labels: map[string]string{"pod": name}, IP: netip.MustParseAddr(ip),
		Ports: []ContainerPort{{Name: "serve-80-tcp", Protocol: TCP, Port: 80}, {Name: "serve-81-udp", Protocol: UDP, Port: 81}}}
}

func np(ns, name string, mut func(*networkingv1.NetworkPolicySpec)) *networkingv1.NetworkPolicy {
	p := &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	mut(&p.Spec)
	return p
}

func sel(kv ...string) *metav1.LabelSelector {
	s := &metav1.LabelSelector{MatchLabels: map[string]string{}}
	for i := 0; i+1 < len(kv); i += 2 {
		s.MatchLabels[kv[i]] = kv[i+1]
	}
	return s
}

func portN(proto corev1.Protocol, n int32) networkingv1.NetworkPolicyPort {
	v := intstr.FromInt32(n)
	return networkingv1.NetworkPolicyPort{Protocol: &proto, Port: &v}
}

func portName(proto corev1.Protocol, name string) networkingv1.NetworkPolicyPort {
	v := intstr.FromString(name)
	return networkingv1.NetworkPolicyPort{Protocol: &proto, Port: &v}
}

// diff is cmp.Diff that compares netip values by value.
func diff(want, got any) string {
	return cmp.Diff(want, got,
		cmp.Comparer(func(a, b netip.Prefix) bool { return a == b }),
		cmp.Comparer(func(a, b netip.Addr) bool { return a == b }))
}

func pfx(s ...string) []netip.Prefix {
	out := []netip.Prefix{}
	for _, x := range s {
		out = append(out, netip.MustParsePrefix(x))
	}
	return out
}

// compileFor compiles for pod ns/name of the world, the only local pod.
func compileFor(t *testing.T, c *Cluster, ns, name string) PodRules {
	t.Helper()
	for _, p := range c.Pods {
		if p.Namespace == ns && p.Name == name {
			rs := Compile(c, []Local{{Pod: p}}, Standard)
			if len(rs.Pods) == 0 {
				return PodRules{}
			}
			return rs.Pods[0]
		}
	}
	t.Fatalf("no pod %s/%s", ns, name)
	return PodRules{}
}

func TestAPodNoPolicySelectsIsOpenBothWays(t *testing.T) {
	c := world(np("x", "only-b", func(s *networkingv1.NetworkPolicySpec) { s.PodSelector = *sel("pod", "b") }))
	if r := compileFor(t, c, "x", "a"); r.Ingress != nil || r.Egress != nil {
		t.Errorf("x/a is selected by no policy but got %+v", r)
	}
}

func TestDefaultDenyIngressIsolatesIngressOnly(t *testing.T) {
	c := world(np("x", "deny", func(s *networkingv1.NetworkPolicySpec) {}))
	r := compileFor(t, c, "x", "a")
	if r.Ingress == nil || len(r.Ingress.Allows) != 0 {
		t.Errorf("ingress: want isolated with nothing allowed, got %+v", r.Ingress)
	}
	if r.Egress != nil {
		t.Errorf("egress: a policy without egress rules or an Egress type must not isolate egress, got %+v", r.Egress)
	}
	if d := diff([]string{"x/deny"}, r.Ingress.Policies); d != "" {
		t.Errorf("selecting policies (-want +got):\n%s", d)
	}
}

func TestEgressRulesWithoutPolicyTypesIsolateEgressToo(t *testing.T) {
	c := world(np("x", "p", func(s *networkingv1.NetworkPolicySpec) {
		s.Egress = []networkingv1.NetworkPolicyEgressRule{{}}
	}))
	r := compileFor(t, c, "x", "a")
	if r.Ingress == nil || r.Egress == nil {
		t.Fatalf("want both directions isolated, got %+v", r)
	}
	if d := diff([]Allow{{Rule: "x/p egress[0]", AnyPeer: true}}, r.Egress.Allows); d != "" {
		t.Errorf("an empty egress rule allows everything (-want +got):\n%s", d)
	}
}

func TestPodSelectorPeersAreInThePolicysNamespaceOnly(t *testing.T) {
	c := world(np("x", "p", func(s *networkingv1.NetworkPolicySpec) {
		s.Ingress = []networkingv1.NetworkPolicyIngressRule{{From: []networkingv1.NetworkPolicyPeer{{PodSelector: sel("pod", "b")}}}}
	}))
	r := compileFor(t, c, "x", "a")
	if d := diff(pfx("10.0.0.2/32"), r.Ingress.Allows[0].Peers); d != "" {
		t.Errorf("peers (-want +got):\n%s", d)
	}
}

func TestNamespaceSelectorPeersAreEveryPodOfTheMatchingNamespacesButHostNetwork(t *testing.T) {
	c := world(np("x", "p", func(s *networkingv1.NetworkPolicySpec) {
		s.Ingress = []networkingv1.NetworkPolicyIngressRule{{From: []networkingv1.NetworkPolicyPeer{{NamespaceSelector: sel("team", "blue")}}}}
	}))
	r := compileFor(t, c, "x", "a")
	if d := diff(pfx("10.0.1.1/32", "10.0.1.2/32"), r.Ingress.Allows[0].Peers); d != "" {
		t.Errorf("peers (-want +got):\n%s", d)
	}
}

func TestPodAndNamespaceSelectorTogetherAreTheirIntersection(t *testing.T) {
	c := world(np("x", "p", func(s *networkingv1.NetworkPolicySpec) {
		s.Ingress = []networkingv1.NetworkPolicyIngressRule{{From: []networkingv1.NetworkPolicyPeer{
			{NamespaceSelector: &metav1.LabelSelector{}, PodSelector: sel("pod", "b")},
		}}}
	}))
	r := compileFor(t, c, "x", "a")
	if d := diff(pfx("10.0.0.2/32", "10.0.1.2/32"), r.Ingress.Allows[0].Peers); d != "" {
		t.Errorf("peers (-want +got):\n%s", d)
	}
}

func TestIPBlockExceptIsCarvedOut(t *testing.T) {
	c := world(np("x", "p", func(s *networkingv1.NetworkPolicySpec) {
		s.PolicyTypes = []networkingv1.PolicyType{networkingv1.PolicyTypeEgress}
		s.Egress = []networkingv1.NetworkPolicyEgressRule{{To: []networkingv1.NetworkPolicyPeer{
			{IPBlock: &networkingv1.IPBlock{CIDR: "10.0.1.0/24", Except: []string{"10.0.1.0/25"}}},
		}}}
	}))
	r := compileFor(t, c, "x", "a")
	if r.Ingress != nil {
		t.Errorf("policyTypes [Egress] must leave ingress open, got %+v", r.Ingress)
	}
	if d := diff(pfx("10.0.1.128/25"), r.Egress.Allows[0].Peers); d != "" {
		t.Errorf("peers (-want +got):\n%s", d)
	}
}

func TestASelectorMatchingNoPodAllowsNothingRatherThanEverything(t *testing.T) {
	c := world(np("x", "p", func(s *networkingv1.NetworkPolicySpec) {
		s.Ingress = []networkingv1.NetworkPolicyIngressRule{{From: []networkingv1.NetworkPolicyPeer{{PodSelector: sel("pod", "nobody")}}}}
	}))
	a := compileFor(t, c, "x", "a").Ingress.Allows[0]
	if a.AnyPeer || len(a.Peers) != 0 {
		t.Errorf("want no peers, got %+v", a)
	}
}

func TestNumericPortsRangesAndProtocols(t *testing.T) {
	end := int32(90)
	ranged := portN(corev1.ProtocolTCP, 85)
	ranged.EndPort = &end
	sctp := corev1.ProtocolSCTP
	c := world(np("x", "p", func(s *networkingv1.NetworkPolicySpec) {
		s.Ingress = []networkingv1.NetworkPolicyIngressRule{{Ports: []networkingv1.NetworkPolicyPort{
			portN(corev1.ProtocolUDP, 53), ranged, {Protocol: &sctp}, {},
		}}}
	}))
	got := compileFor(t, c, "x", "a").Ingress.Allows[0].Ports
	want := []Port{{Protocol: SCTP}, {Protocol: TCP}, {Protocol: TCP, First: 85, Last: 90}, {Protocol: UDP, First: 53, Last: 53}}
	if d := diff(want, got); d != "" {
		t.Errorf("ports (-want +got):\n%s", d)
	}
}

func TestIngressNamedPortIsTheTargetPodsPort(t *testing.T) {
	c := world(np("x", "p", func(s *networkingv1.NetworkPolicySpec) {
		s.Ingress = []networkingv1.NetworkPolicyIngressRule{{Ports: []networkingv1.NetworkPolicyPort{
			portName(corev1.ProtocolTCP, "serve-80-tcp"),
			portName(corev1.ProtocolTCP, "serve-81-udp"), // right name, wrong protocol: nothing
		}}}
	}))
	got := compileFor(t, c, "x", "a").Ingress.Allows
	if d := diff([]Allow{{Rule: "x/p ingress[0]", AnyPeer: true, Ports: []Port{{Protocol: TCP, First: 80, Last: 80}}}}, got); d != "" {
		t.Errorf("allows (-want +got):\n%s", d)
	}
}

func TestANamedPortNoPodHasAllowsNothing(t *testing.T) {
	c := world(np("x", "p", func(s *networkingv1.NetworkPolicySpec) {
		s.Ingress = []networkingv1.NetworkPolicyIngressRule{{Ports: []networkingv1.NetworkPolicyPort{portName(corev1.ProtocolTCP, "missing")}}}
	}))
	got := compileFor(t, c, "x", "a").Ingress.Allows
	if len(got) != 1 || got[0].AnyPeer || len(got[0].Peers) != 0 {
		t.Errorf("want one Allow that allows nothing, got %+v", got)
	}
}

func TestEgressNamedPortIsEachPeersOwnPort(t *testing.T) {
	c := world(np("x", "p", func(s *networkingv1.NetworkPolicySpec) {
		s.PolicyTypes = []networkingv1.PolicyType{networkingv1.PolicyTypeEgress}
		s.Egress = []networkingv1.NetworkPolicyEgressRule{{
			To:    []networkingv1.NetworkPolicyPeer{{NamespaceSelector: sel("team", "blue")}},
			Ports: []networkingv1.NetworkPolicyPort{portName(corev1.ProtocolTCP, "web")},
		}}
	}))
	// y/a serves "web" on 8080, y/b on 9090; x/b has it too but is not a peer.
	for i := range c.Pods {
		p := &c.Pods[i]
		switch p.Key() {
		case "y/a":
			p.Ports = []ContainerPort{{Name: "web", Protocol: TCP, Port: 8080}}
		case "y/b", "x/b":
			p.Ports = []ContainerPort{{Name: "web", Protocol: TCP, Port: 9090}}
		}
	}
	want := []Allow{
		{Rule: "x/p egress[0]", Peers: pfx("10.0.1.1/32"), Ports: []Port{{Protocol: TCP, First: 8080, Last: 8080}}},
		{Rule: "x/p egress[0]", Peers: pfx("10.0.1.2/32"), Ports: []Port{{Protocol: TCP, First: 9090, Last: 9090}}},
	}
	if d := diff(want, compileFor(t, c, "x", "a").Egress.Allows); d != "" {
		t.Errorf("allows (-want +got):\n%s", d)
	}
}

func TestPoliciesAddUp(t *testing.T) {
	c := world(
		np("x", "deny", func(s *networkingv1.NetworkPolicySpec) {}),
		np("x", "allow-b", func(s *networkingv1.NetworkPolicySpec) {
			s.Ingress = []networkingv1.NetworkPolicyIngressRule{{From: []networkingv1.NetworkPolicyPeer{{PodSelector: sel("pod", "b")}}}}
		}),
	)
	r := compileFor(t, c, "x", "a")
	if d := diff([]string{"x/allow-b", "x/deny"}, r.Ingress.Policies); d != "" {
		t.Errorf("policies (-want +got):\n%s", d)
	}
	if len(r.Ingress.Allows) != 1 {
		t.Errorf("the deny policy adds nothing, allow-b one Allow; got %+v", r.Ingress.Allows)
	}
}

func TestAPolicyInAnotherNamespaceSelectsNothingHere(t *testing.T) {
	c := world(np("y", "deny", func(s *networkingv1.NetworkPolicySpec) {}))
	if r := compileFor(t, c, "x", "a"); r.Ingress != nil {
		t.Errorf("a policy of namespace y isolated x/a: %+v", r)
	}
}

func TestUnknownPodsAreOpenUnderStandardAndSealedUnderStrict(t *testing.T) {
	c := world()
	p := pod("x", "new", "10.0.0.9")
	if rs := Compile(c, []Local{{Pod: p, Unknown: true}}, Standard); len(rs.Pods) != 0 {
		t.Errorf("standard: want the unknown pod open, got %+v", rs)
	}
	rs := Compile(c, []Local{{Pod: p, Unknown: true}}, Strict)
	want := []PodRules{{Pod: PodRef{Namespace: "x", Name: "new", IP: p.IP}, Ingress: &Isolation{}, Egress: &Isolation{}}}
	if d := diff(want, rs.Pods); d != "" {
		t.Errorf("strict (-want +got):\n%s", d)
	}
}

func TestHostNetworkAndAddresslessLocalPodsAreNeverTargets(t *testing.T) {
	c := world(np("y", "deny", func(s *networkingv1.NetworkPolicySpec) {}))
	local := []Local{{Pod: c.Pods[4]}, {Pod: Pod{Namespace: "y", Name: "pending", Labels: map[string]string{"pod": "a"}}}}
	if rs := Compile(c, local, Strict); len(rs.Pods) != 0 {
		t.Errorf("want no verdicts, got %+v", rs)
	}
}

// A pod bound to the node before its Add gets its verdicts with no
// address, whether or not the API server shows one; a host-network
// one gets none.
func TestABoundPodsVerdictsComeBeforeItsAddressAndCarryNone(t *testing.T) {
	c := world(np("y", "deny", func(s *networkingv1.NetworkPolicySpec) {}))
	pending := Pod{Namespace: "y", Name: "pending", Labels: map[string]string{"pod": "a"}}
	stale := pending
	stale.Name, stale.IP = "stale", netip.MustParseAddr("10.0.0.77")
	host := pending
	host.Name, host.HostNetwork = "host", true
	rs := Compile(c, []Local{{Pod: pending, Bound: true}, {Pod: stale, Bound: true}, {Pod: host, Bound: true}}, Standard)
	want := []PodRules{
		{Pod: PodRef{Namespace: "y", Name: "pending"}, Ingress: &Isolation{Policies: []string{"y/deny"}}},
		{Pod: PodRef{Namespace: "y", Name: "stale"}, Ingress: &Isolation{Policies: []string{"y/deny"}}},
	}
	if d := diff(want, rs.Pods); d != "" {
		t.Errorf("bound pods (-want +got):\n%s", d)
	}
}

func TestMatchExpressionsSelectors(t *testing.T) {
	c := world(np("x", "p", func(s *networkingv1.NetworkPolicySpec) {
		s.Ingress = []networkingv1.NetworkPolicyIngressRule{{From: []networkingv1.NetworkPolicyPeer{{
			NamespaceSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
				{Key: "kubernetes.io/metadata.name", Operator: metav1.LabelSelectorOpNotIn, Values: []string{"x"}},
			}},
		}}}}
	}))
	if d := diff(pfx("10.0.1.1/32", "10.0.1.2/32"), compileFor(t, c, "x", "a").Ingress.Allows[0].Peers); d != "" {
		t.Errorf("peers (-want +got):\n%s", d)
	}
}

func TestACompilerReusesRulesOnlyWhileTheClusterIsUnchanged(t *testing.T) {
	c := world(np("x", "p", func(s *networkingv1.NetworkPolicySpec) {
		s.Ingress = []networkingv1.NetworkPolicyIngressRule{{From: []networkingv1.NetworkPolicyPeer{{PodSelector: sel("pod", "b")}}}}
	}))
	c.Generation = 1
	local := []Local{{Pod: c.Pods[0]}}
	var cc Compiler
	first := cc.Compile(c, local, Standard)
	// A new pod b in x: a new generation, a new peer.
	c2 := *c
	c2.Pods = append(append([]Pod{}, c.Pods...), Pod{Namespace: "x", Name: "b2", Labels: map[string]string{"pod": "b"}, IP: netip.MustParseAddr("10.0.0.3")})
	c2.Generation = 2
	second := cc.Compile(&c2, local, Standard)
	if d := diff(pfx("10.0.0.2/32"), first.Pods[0].Ingress.Allows[0].Peers); d != "" {
		t.Errorf("first (-want +got):\n%s", d)
	}
	if d := diff(pfx("10.0.0.2/31"), second.Pods[0].Ingress.Allows[0].Peers); d != "" {
		t.Errorf("after the cluster changed (-want +got):\n%s", d)
	}
	if d := diff(Compile(&c2, local, Standard), second); d != "" {
		t.Errorf("the Compiler and Compile disagree (-Compile +Compiler):\n%s", d)
	}
}

// A Compiler keeps its index of the cluster between calls: each pod's
// place by namespace, not a copy of every pod (some 100 bytes each, half
// a megabyte of the agent's memory at the 5,000 pods).
func TestACompilerKeepsNoCopyOfTheClustersPods(t *testing.T) {
	const n = 5000
	c := &Cluster{Generation: 1, Namespaces: map[string]map[string]string{}}
	for i := range n {
		ns := fmt.Sprintf("ns%d", i%50)
		c.Namespaces[ns] = map[string]string{"kubernetes.io/metadata.name": ns}
		c.Pods = append(c.Pods, Pod{Namespace: ns, Name: fmt.Sprint("p", i), Labels: map[string]string{"app": "a"},
			IP: netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)})})
	}
	var cc Compiler
	before := heaptest.Live()
	cc.Compile(c, nil, Standard)
	kept := int64(heaptest.Live()) - int64(before)
	runtime.KeepAlive(c)
	if cc.ix == nil {
		t.Fatal("the Compiler kept no index")
	}
	if kept > n*24 {
		t.Errorf("the Compiler keeps %d bytes for %d pods (%d each); want no copy of them (under 24 bytes each)", kept, n, kept/n)
	}
}

// An IPv6 cluster (aws-node's IPv6 mode: pods IPv6 only) compiles as an
// IPv4 one: pod peers as /128s, an IPv6 ipBlock less its except, a
// named egress port per peer. Blocks of both families are kept; the
// dataplane keeps its node's.
func TestIPv6PodsAndBlocksCompileAsIPv4Ones(t *testing.T) {
	c := world(np("x", "p", func(s *networkingv1.NetworkPolicySpec) {
		s.PolicyTypes = []networkingv1.PolicyType{networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress}
		s.Ingress = []networkingv1.NetworkPolicyIngressRule{{From: []networkingv1.NetworkPolicyPeer{
			{PodSelector: sel("pod", "b")},
			{IPBlock: &networkingv1.IPBlock{CIDR: "2600:1f14:abc:de01::/64", Except: []string{"2600:1f14:abc:de01::/65"}}},
			{IPBlock: &networkingv1.IPBlock{CIDR: "10.9.0.0/16"}},
		}}}
		s.Egress = []networkingv1.NetworkPolicyEgressRule{{
			To:    []networkingv1.NetworkPolicyPeer{{NamespaceSelector: sel("team", "blue")}},
			Ports: []networkingv1.NetworkPolicyPort{portName(corev1.ProtocolTCP, "serve-80-tcp")},
		}}
	}))
	for i, ip := range []string{"2600:1f14:abc:de01:8000::1", "2600:1f14:abc:de01:8000::2", "2600:1f14:abc:de02::1", "2600:1f14:abc:de02::2"} {
		c.Pods[i].IP = netip.MustParseAddr(ip)
	}
	r := compileFor(t, c, "x", "a")
	wantIn := pfx("10.9.0.0/16", "2600:1f14:abc:de01:8000::/65")
	if d := diff(wantIn, r.Ingress.Allows[0].Peers); d != "" {
		t.Errorf("ingress peers (-want +got):\n%s", d)
	}
	wantOut := []Allow{{Rule: "x/p egress[0]", Peers: pfx("2600:1f14:abc:de02::1/128", "2600:1f14:abc:de02::2/128"), Ports: []Port{{Protocol: TCP, First: 80, Last: 80}}}}
	if d := diff(wantOut, r.Egress.Allows); d != "" {
		t.Errorf("egress allows (-want +got):\n%s", d)
	}
}
