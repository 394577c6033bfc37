package netpol

import (
	"cmp"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strings"

	"go4.org/netipx"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// Compile returns the verdicts of the local pods under the cluster's
// policies. Host-network pods, and those without an address that are
// not Bound, are left out: nothing routes to them through the pod
// network. A Bound pod's verdicts carry no address.
func Compile(c *Cluster, local []Local, mode Mode) Ruleset {
	ix := index(c)
	return compile(local, mode, ix.rulesOf)
}

// Compiler compiles as Compile does, keeping each rule's peers from one
// call to the next while the cluster's Generation stays the same: a new
// pod on the node (an ADD) then costs its own policies' rules, not every
// selector's walk over the cluster's pods. It keeps each local pod's
// verdicts too, handed again while the pod's namespace, labels and named
// ports are unchanged: an ADD compiles its own pod, not the node's
// hundred. The verdicts it hands out are shared from one call to the
// next and must not be changed.
type Compiler struct {
	gen  uint64
	mode Mode
	ix   *indexed
	kept map[podName]keptRules
}

type podName struct{ namespace, name string }

// keptRules are one local pod's verdicts and what they were compiled
// from.
type keptRules struct {
	labels map[string]string
	ports  []ContainerPort
	rules  PodRules
}

// Compile is Compile, with the cache.
func (cc *Compiler) Compile(c *Cluster, local []Local, mode Mode) Ruleset {
	if cc.ix == nil || c.Generation == 0 || c.Generation != cc.gen || mode != cc.mode {
		cc.ix, cc.gen, cc.mode, cc.kept = index(c), c.Generation, mode, nil
	}
	kept := make(map[podName]keptRules, len(local))
	rs := compile(local, mode, func(p Pod) PodRules {
		k := podName{p.Namespace, p.Name}
		if r, ok := cc.kept[k]; ok && maps.Equal(r.labels, p.Labels) && slices.Equal(r.ports, p.Ports) {
			kept[k] = r
			return r.rules
		}
		r := keptRules{labels: p.Labels, ports: p.Ports, rules: cc.ix.rulesOf(p)}
		kept[k] = r
		return r.rules
	})
	cc.kept = kept
	return rs
}

// compile gathers the verdicts of the local pods, rulesOf giving those of
// a pod whose labels are known.
func compile(local []Local, mode Mode, rulesOf func(Pod) PodRules) Ruleset {
	var rs Ruleset
	for _, l := range local {
		p := l.Pod
		if !p.IP.IsValid() && !l.Bound || p.HostNetwork {
			continue
		}
		ref := PodRef{Namespace: p.Namespace, Name: p.Name, IP: p.IP}
		if l.Bound {
			ref.IP = netip.Addr{}
		}
		if l.Unknown {
			if mode == Strict {
				rs.Pods = append(rs.Pods, PodRules{Pod: ref, Ingress: &Isolation{}, Egress: &Isolation{}, EgressV4Veth: l.EgressV4Veth})
			}
			continue
		}
		r := rulesOf(p)
		if r.Ingress == nil && r.Egress == nil {
			continue
		}
		r.Pod = ref
		r.EgressV4Veth = l.EgressV4Veth
		rs.Pods = append(rs.Pods, r)
	}
	slices.SortFunc(rs.Pods, func(a, b PodRules) int {
		return cmp.Or(a.Pod.IP.Compare(b.Pod.IP), strings.Compare(a.Pod.Namespace, b.Pod.Namespace), strings.Compare(a.Pod.Name, b.Pod.Name))
	})
	return rs
}

// indexed is the cluster arranged for lookups: policies and pods by
// namespace, selectors parsed once.
type indexed struct {
	namespaces map[string]labels.Set
	// pods are the cluster's, shared with it, and byNS the indexes of
	// those that can be peers (an address, not host network) by
	// namespace: a copy of every pod was the largest thing the compiler
	// kept between calls.
	pods     []Pod
	byNS     map[string][]int32
	policies map[string][]*policy
	// Per rule, computed once however many pods the policy selects:
	// the peers, and for egress the whole result (its named ports are
	// the peers', not the target's).
	peers  map[ruleRef]peerSet
	egress map[ruleRef][]Allow
}

type ruleRef struct {
	policy string
	egress bool
	index  int
}

type peerSet struct {
	set      *netipx.IPSet // nil: any peer
	prefixes []netip.Prefix
}

type policy struct {
	key      string
	ns       string
	selector labels.Selector // nil: the selector is invalid, selects nothing
	ingress  bool
	egress   bool
	spec     *networkingv1.NetworkPolicySpec
}

func index(c *Cluster) *indexed {
	ix := &indexed{
		namespaces: make(map[string]labels.Set, len(c.Namespaces)),
		pods:       c.Pods,
		byNS:       map[string][]int32{},
		policies:   map[string][]*policy{},
		peers:      map[ruleRef]peerSet{},
		egress:     map[ruleRef][]Allow{},
	}
	for name, l := range c.Namespaces {
		ix.namespaces[name] = labels.Set(l)
	}
	for i, p := range c.Pods {
		if peerCandidate(p) {
			ix.byNS[p.Namespace] = append(ix.byNS[p.Namespace], int32(i))
		}
	}
	for _, np := range c.Policies {
		sel, err := metav1.LabelSelectorAsSelector(&np.Spec.PodSelector)
		if err != nil {
			sel = nil // the API server validates selectors; one that slipped by selects nothing
		}
		ing, eg := policyTypes(&np.Spec)
		ix.policies[np.Namespace] = append(ix.policies[np.Namespace], &policy{
			key: np.Namespace + "/" + np.Name, ns: np.Namespace, selector: sel,
			ingress: ing, egress: eg, spec: &np.Spec,
		})
	}
	for _, ps := range ix.policies {
		slices.SortFunc(ps, func(a, b *policy) int { return cmp.Compare(a.key, b.key) })
	}
	return ix
}

// peerCandidate says whether a pod can be a peer: it has an address of
// its own.
func peerCandidate(p Pod) bool { return p.IP.IsValid() && !p.HostNetwork }

// policyTypes are the directions a policy isolates: those it lists, or
// when it lists none, Ingress and, with egress rules, Egress.
func policyTypes(s *networkingv1.NetworkPolicySpec) (ingress, egress bool) {
	if len(s.PolicyTypes) == 0 {
		return true, len(s.Egress) > 0
	}
	for _, t := range s.PolicyTypes {
		switch t {
		case networkingv1.PolicyTypeIngress:
			ingress = true
		case networkingv1.PolicyTypeEgress:
			egress = true
		}
	}
	return ingress, egress
}

// rulesOf is one pod's verdicts, without its PodRef.
func (ix *indexed) rulesOf(p Pod) PodRules {
	var r PodRules
	set := labels.Set(p.Labels)
	for _, pol := range ix.policies[p.Namespace] {
		if pol.selector == nil || !pol.selector.Matches(set) {
			continue
		}
		if pol.ingress {
			if r.Ingress == nil {
				r.Ingress = &Isolation{}
			}
			r.Ingress.Policies = append(r.Ingress.Policies, pol.key)
			for i, rule := range pol.spec.Ingress {
				where := fmt.Sprintf("%s ingress[%d]", pol.key, i)
				ref := ruleRef{policy: pol.key, index: i}
				r.Ingress.Allows = append(r.Ingress.Allows, ix.allows(ref, where, pol.ns, rule.From, rule.Ports, &p)...)
			}
		}
		if pol.egress {
			if r.Egress == nil {
				r.Egress = &Isolation{}
			}
			r.Egress.Policies = append(r.Egress.Policies, pol.key)
			for i, rule := range pol.spec.Egress {
				ref := ruleRef{policy: pol.key, egress: true, index: i}
				allows, ok := ix.egress[ref]
				if !ok {
					where := fmt.Sprintf("%s egress[%d]", pol.key, i)
					allows = ix.allows(ref, where, pol.ns, rule.To, rule.Ports, nil)
					ix.egress[ref] = allows
				}
				r.Egress.Allows = append(r.Egress.Allows, allows...)
			}
		}
	}
	return r
}

// allows compiles one rule. target is the pod the rule protects for
// ingress, whose container ports resolve named ports; for egress (nil)
// named ports are the peer pods' own, so the rule splits into one Allow
// per port number, each with the peers that name it so.
func (ix *indexed) allows(ref ruleRef, where, ns string, peers []networkingv1.NetworkPolicyPeer, ports []networkingv1.NetworkPolicyPort, target *Pod) []Allow {
	ps, ok := ix.peers[ref]
	if !ok {
		ps = ix.peerSetOf(ns, peers)
		ix.peers[ref] = ps
	}
	anyPeer, peerSet := ps.set == nil, ps.set
	base := Allow{Rule: where, AnyPeer: anyPeer, Peers: ps.prefixes}
	if len(ports) == 0 {
		return []Allow{base}
	}
	var numeric []Port
	var named []networkingv1.NetworkPolicyPort
	for _, pp := range ports {
		proto := protocolOf(pp.Protocol)
		switch {
		case pp.Port == nil:
			numeric = append(numeric, Port{Protocol: proto})
		case pp.Port.Type == intstr.Int:
			first := clampPort(pp.Port.IntVal)
			if first == 0 {
				continue // port 0 is invalid: it allows nothing
			}
			last := first
			if pp.EndPort != nil && clampPort(*pp.EndPort) >= first {
				last = clampPort(*pp.EndPort)
			}
			numeric = append(numeric, Port{Protocol: proto, First: first, Last: last})
		default:
			named = append(named, pp)
		}
	}
	if target != nil {
		for _, pp := range named {
			if port, ok := namedPort(*target, pp.Port.StrVal, protocolOf(pp.Protocol)); ok {
				numeric = append(numeric, Port{Protocol: port.Protocol, First: port.Port, Last: port.Port})
			}
		}
		named = nil
	}
	var out []Allow
	if len(numeric) > 0 {
		a := base
		a.Ports = dedupePorts(numeric)
		out = append(out, a)
	}
	if len(named) > 0 {
		out = append(out, ix.namedEgress(base, peerSet, named)...)
	}
	if len(out) == 0 {
		// Every port named resolved to nothing: the rule allows nothing,
		// which an Allow with no peers says.
		out = append(out, Allow{Rule: where, Peers: []netip.Prefix{}})
	}
	return out
}

// peerSetOf is the addresses a rule's peers name; no peers is any.
func (ix *indexed) peerSetOf(ns string, peers []networkingv1.NetworkPolicyPeer) peerSet {
	if len(peers) == 0 {
		return peerSet{}
	}
	var b netipx.IPSetBuilder
	for _, peer := range peers {
		if peer.IPBlock != nil {
			addBlock(&b, peer.IPBlock)
			continue
		}
		ix.selectPeers(ns, peer, func(p *Pod) { b.Add(p.IP) })
	}
	set, _ := b.IPSet() // errors only for invalid prefixes, which addBlock skips
	return peerSet{set: set, prefixes: set.Prefixes()}
}

// namedEgress resolves egress named ports against the destination pods:
// every known pod within the rule's peers (all pods when it has none)
// that has a container port of that name and protocol.
func (ix *indexed) namedEgress(base Allow, peerSet *netipx.IPSet, named []networkingv1.NetworkPolicyPort) []Allow {
	byPort := map[Port][]netip.Addr{}
	for i := range ix.pods {
		p := &ix.pods[i]
		if !peerCandidate(*p) || !base.AnyPeer && !peerSet.Contains(p.IP) {
			continue
		}
		for _, pp := range named {
			if cp, ok := namedPort(*p, pp.Port.StrVal, protocolOf(pp.Protocol)); ok {
				k := Port{Protocol: cp.Protocol, First: cp.Port, Last: cp.Port}
				byPort[k] = append(byPort[k], p.IP)
			}
		}
	}
	keys := make([]Port, 0, len(byPort))
	for k := range byPort {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, comparePorts)
	out := make([]Allow, 0, len(keys))
	for _, k := range keys {
		var b netipx.IPSetBuilder
		for _, a := range byPort[k] {
			b.Add(a)
		}
		s, _ := b.IPSet()
		out = append(out, Allow{Rule: base.Rule, Peers: s.Prefixes(), Ports: []Port{k}})
	}
	return out
}

// selectPeers calls f with each pod one podSelector/namespaceSelector
// peer names.
func (ix *indexed) selectPeers(policyNS string, peer networkingv1.NetworkPolicyPeer, f func(*Pod)) {
	podSel := labels.Everything()
	if peer.PodSelector != nil {
		s, err := metav1.LabelSelectorAsSelector(peer.PodSelector)
		if err != nil {
			return
		}
		podSel = s
	}
	var namespaces []string
	if peer.NamespaceSelector == nil {
		namespaces = []string{policyNS}
	} else {
		nsSel, err := metav1.LabelSelectorAsSelector(peer.NamespaceSelector)
		if err != nil {
			return
		}
		for name, l := range ix.namespaces {
			if nsSel.Matches(l) {
				namespaces = append(namespaces, name)
			}
		}
	}
	for _, ns := range namespaces {
		for _, i := range ix.byNS[ns] {
			if p := &ix.pods[i]; podSel.Matches(labels.Set(p.Labels)) {
				f(p)
			}
		}
	}
}

// addBlock adds an ipBlock's CIDR less its excepts, of either family:
// the dataplane keeps those of its node's (an IPv4 node's table leaves
// IPv6 blocks out, an IPv6 node's IPv4 ones).
func addBlock(b *netipx.IPSetBuilder, blk *networkingv1.IPBlock) {
	p, err := netip.ParsePrefix(blk.CIDR)
	if err != nil {
		return
	}
	var one netipx.IPSetBuilder
	one.AddPrefix(p.Masked())
	for _, e := range blk.Except {
		if ep, err := netip.ParsePrefix(e); err == nil {
			one.RemovePrefix(ep.Masked())
		}
	}
	s, err := one.IPSet()
	if err != nil {
		return
	}
	b.AddSet(s)
}

func protocolOf(p *corev1.Protocol) Protocol {
	if p == nil {
		return TCP
	}
	return Protocol(*p)
}

func clampPort(v int32) uint16 {
	if v < 1 || v > 65535 {
		return 0
	}
	return uint16(v)
}

func namedPort(p Pod, name string, proto Protocol) (ContainerPort, bool) {
	for _, cp := range p.Ports {
		if cp.Name == name && cp.Protocol == proto && cp.Port != 0 {
			return cp, true
		}
	}
	return ContainerPort{}, false
}

func comparePorts(a, b Port) int {
	return cmp.Or(cmp.Compare(a.Protocol, b.Protocol), cmp.Compare(a.First, b.First), cmp.Compare(a.Last, b.Last))
}

func dedupePorts(ps []Port) []Port {
	slices.SortFunc(ps, comparePorts)
	return slices.Compact(ps)
}
