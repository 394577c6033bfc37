package netpol

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// TestCompiledVerdictsAgreeWithTheSpecOverRandomClusters checks the
// compiler against a deliberately plain reading of the NetworkPolicy
// spec (reference, below: no prefixes, no indexes, no splitting) over
// random clusters, policies and connections.
func TestCompiledVerdictsAgreeWithTheSpecOverRandomClusters(t *testing.T) {
	const clusters, conns = 400, 200
	for seed := range uint64(clusters) {
		r := rand.New(rand.NewPCG(seed, 7))
		c := randomCluster(r)
		var local []Local
		for _, p := range c.Pods {
			local = append(local, Local{Pod: p})
		}
		rs := Compile(c, local, Standard)
		for range conns {
			conn := randomConn(r, c)
			if got, want := rs.Allowed(conn), reference(c, conn); got != want {
				t.Fatalf("seed %d: %+v: compiled says %v, the spec %v\npolicies:\n%s", seed, conn, got, want, describe(c))
			}
		}
	}
}

var (
	vocab     = []string{"a", "b", "c"}
	protos    = []Protocol{TCP, UDP, SCTP}
	portNames = []string{"web", "dns", "admin"}
)

func randomLabels(r *rand.Rand) map[string]string {
	l := map[string]string{}
	for _, k := range []string{"app", "tier"} {
		if r.IntN(3) > 0 {
			l[k] = vocab[r.IntN(len(vocab))]
		}
	}
	return l
}

func randomSelector(r *rand.Rand) *metav1.LabelSelector {
	s := &metav1.LabelSelector{}
	switch r.IntN(4) {
	case 0: // empty: everything
	case 1:
		s.MatchLabels = map[string]string{"app": vocab[r.IntN(len(vocab))]}
	case 2:
		s.MatchExpressions = []metav1.LabelSelectorRequirement{{Key: "tier", Operator: metav1.LabelSelectorOpIn, Values: []string{vocab[r.IntN(3)], vocab[r.IntN(3)]}}}
	default:
		s.MatchExpressions = []metav1.LabelSelectorRequirement{{Key: "app", Operator: metav1.LabelSelectorOpDoesNotExist}}
	}
	return s
}

func randomCluster(r *rand.Rand) *Cluster {
	c := &Cluster{Namespaces: map[string]map[string]string{}}
	for i := range 3 {
		c.Namespaces[fmt.Sprintf("ns%d", i)] = randomLabels(r)
	}
	for i := range 8 {
		p := Pod{Namespace: fmt.Sprintf("ns%d", r.IntN(3)), Name: fmt.Sprintf("p%d", i), Labels: randomLabels(r),
			IP: netip.AddrFrom4([4]byte{10, 0, byte(r.IntN(2)), byte(1 + i)})}
		for _, n := range portNames {
			if r.IntN(2) == 0 {
				p.Ports = append(p.Ports, ContainerPort{Name: n, Protocol: protos[r.IntN(3)], Port: uint16(80 + r.IntN(4))})
			}
		}
		c.Pods = append(c.Pods, p)
	}
	for i := range r.IntN(5) {
		c.Policies = append(c.Policies, randomPolicy(r, fmt.Sprintf("ns%d", r.IntN(3)), fmt.Sprintf("np%d", i)))
	}
	return c
}

func randomPeers(r *rand.Rand) []networkingv1.NetworkPolicyPeer {
	var out []networkingv1.NetworkPolicyPeer
	for range r.IntN(3) {
		var p networkingv1.NetworkPolicyPeer
		switch r.IntN(4) {
		case 0:
			p.PodSelector = randomSelector(r)
		case 1:
			p.NamespaceSelector = randomSelector(r)
		case 2:
			p.PodSelector, p.NamespaceSelector = randomSelector(r), randomSelector(r)
		default:
			blk := &networkingv1.IPBlock{CIDR: []string{"10.0.0.0/16", "10.0.1.0/24", "10.0.0.0/29"}[r.IntN(3)]}
			if r.IntN(2) == 0 {
				blk.Except = []string{[]string{"10.0.1.0/30", "10.0.0.4/30", "10.0.1.4/32"}[r.IntN(3)]}
			}
			p.IPBlock = blk
		}
		out = append(out, p)
	}
	return out
}

func randomPorts(r *rand.Rand) []networkingv1.NetworkPolicyPort {
	var out []networkingv1.NetworkPolicyPort
	for range r.IntN(3) {
		var p networkingv1.NetworkPolicyPort
		if r.IntN(4) > 0 {
			proto := corev1.Protocol(protos[r.IntN(3)])
			p.Protocol = &proto
		}
		switch r.IntN(4) {
		case 0: // every port of the protocol
		case 1:
			v := intstr.FromString(portNames[r.IntN(len(portNames))])
			p.Port = &v
		case 2:
			v, end := intstr.FromInt32(int32(80+r.IntN(4))), int32(81+r.IntN(3))
			p.Port, p.EndPort = &v, &end
		default:
			v := intstr.FromInt32(int32(80 + r.IntN(4)))
			p.Port = &v
		}
		out = append(out, p)
	}
	return out
}

func randomPolicy(r *rand.Rand, ns, name string) *networkingv1.NetworkPolicy {
	np := &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	np.Spec.PodSelector = *randomSelector(r)
	for range r.IntN(3) {
		np.Spec.Ingress = append(np.Spec.Ingress, networkingv1.NetworkPolicyIngressRule{From: randomPeers(r), Ports: randomPorts(r)})
	}
	for range r.IntN(3) {
		np.Spec.Egress = append(np.Spec.Egress, networkingv1.NetworkPolicyEgressRule{To: randomPeers(r), Ports: randomPorts(r)})
	}
	switch r.IntN(4) {
	case 0:
		np.Spec.PolicyTypes = []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}
	case 1:
		np.Spec.PolicyTypes = []networkingv1.PolicyType{networkingv1.PolicyTypeEgress}
	case 2:
		np.Spec.PolicyTypes = []networkingv1.PolicyType{networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress}
	}
	return np
}

func randomConn(r *rand.Rand, c *Cluster) Conn {
	pick := func() netip.Addr {
		if r.IntN(6) == 0 {
			return netip.AddrFrom4([4]byte{10, 0, byte(r.IntN(2)), byte(r.IntN(12))}) // maybe no pod
		}
		return c.Pods[r.IntN(len(c.Pods))].IP
	}
	return Conn{Src: pick(), Dst: pick(), Protocol: protos[r.IntN(3)], Port: uint16(79 + r.IntN(6))}
}

// reference judges conn straight from the spec's words.
func reference(c *Cluster, conn Conn) bool {
	src, srcOK := podAt(c, conn.Src)
	dst, dstOK := podAt(c, conn.Dst)
	if srcOK && !directionAllows(c, src, true, conn, conn.Dst, dst, dstOK) {
		return false
	}
	if dstOK && !directionAllows(c, dst, false, conn, conn.Src, src, srcOK) {
		return false
	}
	return true
}

func podAt(c *Cluster, a netip.Addr) (Pod, bool) {
	for _, p := range c.Pods {
		if p.IP == a {
			return p, true
		}
	}
	return Pod{}, false
}

// directionAllows: subject's egress (egress true) or ingress toward peer.
func directionAllows(c *Cluster, subject Pod, egress bool, conn Conn, peerIP netip.Addr, peer Pod, peerIsPod bool) bool {
	selected := false
	for _, np := range c.Policies {
		if np.Namespace != subject.Namespace || !matches(&np.Spec.PodSelector, subject.Labels) {
			continue
		}
		// The spec: policyTypes as listed; when none is, Ingress, and
		// Egress too if the policy has egress rules.
		in, eg := len(np.Spec.PolicyTypes) == 0, len(np.Spec.PolicyTypes) == 0 && len(np.Spec.Egress) > 0
		for _, pt := range np.Spec.PolicyTypes {
			in = in || pt == networkingv1.PolicyTypeIngress
			eg = eg || pt == networkingv1.PolicyTypeEgress
		}
		if (egress && !eg) || (!egress && !in) {
			continue
		}
		selected = true
		type rule struct {
			peers []networkingv1.NetworkPolicyPeer
			ports []networkingv1.NetworkPolicyPort
		}
		var rules []rule
		if egress {
			for _, r := range np.Spec.Egress {
				rules = append(rules, rule{r.To, r.Ports})
			}
		} else {
			for _, r := range np.Spec.Ingress {
				rules = append(rules, rule{r.From, r.Ports})
			}
		}
		for _, r := range rules {
			if !peerAllowed(c, np.Namespace, r.peers, peerIP, peer, peerIsPod) {
				continue
			}
			// The named port belongs to the destination pod.
			dst, dstIsPod := subject, true
			if egress {
				dst, dstIsPod = peer, peerIsPod
			}
			if portAllowed(r.ports, conn, dst, dstIsPod) {
				return true
			}
		}
	}
	return !selected
}

func matches(s *metav1.LabelSelector, l map[string]string) bool {
	sel, err := metav1.LabelSelectorAsSelector(s)
	return err == nil && sel.Matches(labels.Set(l))
}

func peerAllowed(c *Cluster, ns string, peers []networkingv1.NetworkPolicyPeer, ip netip.Addr, p Pod, isPod bool) bool {
	if len(peers) == 0 {
		return true
	}
	for _, peer := range peers {
		if peer.IPBlock != nil {
			in := netip.MustParsePrefix(peer.IPBlock.CIDR).Contains(ip)
			for _, e := range peer.IPBlock.Except {
				if netip.MustParsePrefix(e).Contains(ip) {
					in = false
				}
			}
			if in {
				return true
			}
			continue
		}
		if !isPod {
			continue
		}
		nsOK := p.Namespace == ns
		if peer.NamespaceSelector != nil {
			nsOK = matches(peer.NamespaceSelector, c.Namespaces[p.Namespace])
		}
		podOK := peer.PodSelector == nil || matches(peer.PodSelector, p.Labels)
		if nsOK && podOK {
			return true
		}
	}
	return false
}

func portAllowed(ports []networkingv1.NetworkPolicyPort, conn Conn, dst Pod, dstIsPod bool) bool {
	if len(ports) == 0 {
		return true
	}
	for _, pp := range ports {
		proto := TCP
		if pp.Protocol != nil {
			proto = Protocol(*pp.Protocol)
		}
		if proto != conn.Protocol {
			continue
		}
		switch {
		case pp.Port == nil:
			return true
		case pp.Port.Type == intstr.String:
			if !dstIsPod {
				continue
			}
			for _, cp := range dst.Ports {
				if cp.Name == pp.Port.StrVal && cp.Protocol == proto && cp.Port == conn.Port {
					return true
				}
			}
		default:
			last := pp.Port.IntVal
			if pp.EndPort != nil && *pp.EndPort >= last {
				last = *pp.EndPort
			}
			if int32(conn.Port) >= pp.Port.IntVal && int32(conn.Port) <= last {
				return true
			}
		}
	}
	return false
}

func describe(c *Cluster) string {
	s := ""
	for _, p := range c.Pods {
		s += fmt.Sprintf("  pod %s %v %s ports %v\n", p.Key(), p.Labels, p.IP, p.Ports)
	}
	for n, l := range c.Namespaces {
		s += fmt.Sprintf("  ns %s %v\n", n, l)
	}
	for _, np := range c.Policies {
		s += fmt.Sprintf("  policy %s/%s %+v\n", np.Namespace, np.Name, np.Spec)
	}
	return s
}

// A Compiler hands a local pod the verdicts it compiled last while the
// cluster is unchanged, and only while the pod's labels and named ports
// are: over random clusters and local pods relabelled, re-ported and
// renamed between calls of one generation, it agrees with Compile.
func TestACompilerAgreesWithCompileAsLocalPodsChangeWithinAGeneration(t *testing.T) {
	for seed := range uint64(300) {
		r := rand.New(rand.NewPCG(seed, 11))
		c := randomCluster(r)
		c.Generation = 1
		var cc Compiler
		local := make([]Local, 0, len(c.Pods))
		for _, p := range c.Pods {
			local = append(local, Local{Pod: p})
		}
		for step := range 6 {
			for i := range local {
				switch r.IntN(4) {
				case 0:
					local[i].Pod.Labels = randomLabels(r)
				case 1:
					local[i].Pod.Ports = append([]ContainerPort(nil), c.Pods[r.IntN(len(c.Pods))].Ports...)
				case 2:
					local[i].Pod.Namespace = fmt.Sprintf("ns%d", r.IntN(3))
				}
			}
			got, want := cc.Compile(c, local, Standard), Compile(c, local, Standard)
			if d := diff(want, got); d != "" {
				t.Fatalf("seed %d, step %d: the Compiler and Compile disagree (-Compile +Compiler):\n%s\npolicies:\n%s", seed, step, d, describe(c))
			}
		}
	}
}
