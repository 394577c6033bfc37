package dataplane

import (
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/google/nftables"
	"go4.org/netipx"

	"github.com/vpcnet/vpcnet/dataplane/netnstest"
	"github.com/vpcnet/vpcnet/verdicts"
)

// IPv6 policy tests: the IPv4 ones' three pods, with IPv6 addresses from
// the node's /80 on an IPv6 node whose Dataplane writes table ip6
// vpcnet-policy. Packets only between the test's namespaces.

func newIPv6PolicyPods(t *testing.T) policyPods {
	t.Helper()
	n := newIPv6Node(t)
	dp, err := New(Options{NetNS: n.node.Path(), PollInterval: 20 * time.Millisecond, IPv6Policy: true})
	if err != nil {
		t.Fatal(err)
	}
	n.dp = dp
	return policyPods{n: n,
		a: n.addPod6(t, "pol-a", "2600:1f14:abc:de01:12::a"),
		b: n.addPod6(t, "pol-b", "2600:1f14:abc:de01:12::b"),
		c: n.addPod6(t, "pol-c", "2600:1f14:abc:de01:12::c")}
}

// node6 is the node as a peer: its own IPv6 address, as kubelet probes
// come from it.
func (pp policyPods) node6() testPod {
	return testPod{ns: pp.n.node, cfg: PodConfig{Addr: netip.MustParseAddr(nodeIPv6)}}
}

func TestAnIsolatedIPv6PodAdmitsOnlyThePeerAndPortAPolicyAllows(t *testing.T) {
	pp := newIPv6PolicyPods(t)
	for _, port := range []uint16{8080, 9090} {
		serveTCP(t, pp.b.ns, netip.AddrPortFrom(pp.b.cfg.Addr, port))
	}
	serveTCP(t, pp.a.ns, netip.AddrPortFrom(pp.a.cfg.Addr, 8080))
	serveUDP(t, pp.b.ns, netip.AddrPortFrom(pp.b.cfg.Addr, 5353))
	serveUDP(t, pp.b.ns, netip.AddrPortFrom(pp.b.cfg.Addr, 5454))
	pp.set(t, verdicts.Ruleset{Pods: []verdicts.PodRules{{Pod: ref(pp.b, "pol-b"), Ingress: &verdicts.Isolation{
		Policies: []string{"default/web"},
		Allows: []verdicts.Allow{{Rule: "default/web ingress[0]", Peers: only(pp.a), Ports: []verdicts.Port{
			{Protocol: verdicts.TCP, First: 8000, Last: 8080}, {Protocol: verdicts.UDP, First: 5353, Last: 5353}}}},
	}}}})
	if !reaches(pp.a, pp.b, 8080) {
		t.Error("a cannot reach b:8080, which the policy allows")
	}
	if reaches(pp.c, pp.b, 8080) {
		t.Error("c reaches b:8080; only a is allowed")
	}
	if reaches(pp.a, pp.b, 9090) {
		t.Error("a reaches b:9090; only 8000-8080 is allowed")
	}
	if err := talkUDP(pp.a.ns, netip.AddrPortFrom(pp.b.cfg.Addr, 5353)); err != nil {
		t.Errorf("a cannot reach b:5353/udp, which the policy allows: %v", err)
	}
	if err := talkUDP(pp.a.ns, netip.AddrPortFrom(pp.b.cfg.Addr, 5454)); err == nil {
		t.Error("a reaches b:5454/udp; only 5353 is allowed")
	}
	// The kubelet's probe: node-local, never judged, on any port.
	if !reaches(pp.node6(), pp.b, 9090) {
		t.Error("the node cannot reach b:9090: node-local probes must pass")
	}
	if !reaches(pp.b, pp.a, 8080) {
		t.Error("b cannot reach a: b's egress and a's ingress are open")
	}
	drops, err := pp.n.dp.PolicyDrops(testContext(t))
	if err != nil {
		t.Fatal(err)
	}
	if drops[pp.b.cfg.Addr].Ingress == 0 {
		t.Errorf("drops = %v; want b's ingress drops counted", drops)
	}
	var tables []string
	netnstest.Do(t, pp.n.node, func() error {
		c, err := nftables.New()
		if err != nil {
			return err
		}
		defer c.CloseLasting()
		ts, err := c.ListTables()
		for _, tb := range ts {
			if tb.Name == PolicyTable {
				tables = append(tables, map[nftables.TableFamily]string{nftables.TableFamilyIPv4: "ip", nftables.TableFamilyIPv6: "ip6"}[tb.Family])
			}
		}
		return err
	})
	if strings.Join(tables, ",") != "ip6" {
		t.Errorf("policy tables of families %v, want ip6 alone", tables)
	}
}

// An ipBlock with an except, in IPv6: the compiler hands the block less
// the except as prefixes; the interval set must keep the hole.
func TestAnIPv6IPBlockExceptKeepsItsHole(t *testing.T) {
	pp := newIPv6PolicyPods(t)
	serveTCP(t, pp.b.ns, netip.AddrPortFrom(pp.b.cfg.Addr, 8080))
	var sb netipx.IPSetBuilder
	sb.AddPrefix(netip.MustParsePrefix("2600:1f14:abc:de01::/64"))
	sb.Remove(pp.c.cfg.Addr)
	sb.AddPrefix(netip.MustParsePrefix("10.0.0.0/8")) // the other family: left out
	set, _ := sb.IPSet()
	pp.set(t, verdicts.Ruleset{Pods: []verdicts.PodRules{{Pod: ref(pp.b, "pol-b"), Ingress: &verdicts.Isolation{
		Allows: []verdicts.Allow{{Rule: "block", Peers: set.Prefixes()}}}}}})
	if !reaches(pp.a, pp.b, 8080) {
		t.Error("a, inside the block, cannot reach b")
	}
	if reaches(pp.c, pp.b, 8080) {
		t.Error("c, the block's except, reaches b")
	}
}

func TestIPv6EgressIsolationStillLetsRepliesOut(t *testing.T) {
	pp := newIPv6PolicyPods(t)
	serveTCP(t, pp.a.ns, netip.AddrPortFrom(pp.a.cfg.Addr, 8080))
	serveTCP(t, pp.b.ns, netip.AddrPortFrom(pp.b.cfg.Addr, 8080))
	serveTCP(t, pp.c.ns, netip.AddrPortFrom(pp.c.cfg.Addr, 8080))
	serveTCP(t, pp.c.ns, netip.AddrPortFrom(pp.c.cfg.Addr, 9090))
	node := pp.node6()
	serveTCP(t, node.ns, netip.AddrPortFrom(node.cfg.Addr, 8081))
	pp.set(t, verdicts.Ruleset{Pods: []verdicts.PodRules{{Pod: ref(pp.a, "pol-a"), Egress: &verdicts.Isolation{
		Allows: []verdicts.Allow{{Rule: "to c", Peers: only(pp.c), Ports: []verdicts.Port{{Protocol: verdicts.TCP, First: 8080, Last: 8080}}}}}}}})
	if !reaches(pp.b, pp.a, 8080) {
		t.Error("b cannot reach a: a's ingress is open and its replies must pass its egress isolation")
	}
	if !reaches(pp.node6(), pp.a, 8080) {
		t.Error("the node cannot probe a: its replies must pass a's egress isolation")
	}
	if reaches(pp.a, pp.b, 8080) {
		t.Error("a reaches b though its egress allows c alone")
	}
	if !reaches(pp.a, pp.c, 8080) {
		t.Error("a cannot reach c:8080, which its egress allows")
	}
	if reaches(pp.a, pp.c, 9090) {
		t.Error("a reaches c:9090; its egress allows 8080 alone")
	}
	if !reaches(pp.c, node, 8081) {
		t.Error("c cannot reach its node; the check below would prove nothing")
	}
	if reaches(pp.a, node, 8081) {
		t.Error("a reaches its node though its egress does not allow it")
	}
}

func TestAChangedIPv6PolicyKeepsTheConnectionsItStillAllowsAndCutsTheOthers(t *testing.T) {
	pp := newIPv6PolicyPods(t)
	pp.set(t, verdicts.Ruleset{Pods: []verdicts.PodRules{{Pod: ref(pp.b, "pol-b"), Ingress: &verdicts.Isolation{
		Allows: []verdicts.Allow{{Rule: "one", Peers: only(pp.a)}}}}}})
	conn := openEcho(t, pp.a, pp.b, 7070)
	if !conn.flows("first") {
		t.Fatal("the allowed connection does not flow")
	}
	pp.set(t, verdicts.Ruleset{Pods: []verdicts.PodRules{{Pod: ref(pp.b, "pol-b"), Ingress: &verdicts.Isolation{
		Allows: []verdicts.Allow{{Rule: "two", Peers: []netip.Prefix{netip.MustParsePrefix("2600:1f14:abc:de01:12::/80")}, Ports: []verdicts.Port{{Protocol: verdicts.TCP}}}}}}}})
	if !conn.flows("second") {
		t.Error("a rewrite that still allows the connection cut it")
	}
	pp.set(t, verdicts.Ruleset{Pods: []verdicts.PodRules{{Pod: ref(pp.b, "pol-b"), Ingress: &verdicts.Isolation{}}}})
	if conn.flows("third") {
		t.Error("the connection still flows after a policy that no longer allows it")
	}
}

// The ADD's fast path on an IPv6 node: chains written when the pod is
// bound, its Add then map entries alone, without reading the table.
func TestAnIPv6PodsAddAddsOnlyMapEntries(t *testing.T) {
	pp := newIPv6PolicyPods(t)
	serveTCP(t, pp.b.ns, netip.AddrPortFrom(pp.b.cfg.Addr, 8080))
	iso := &verdicts.Isolation{Allows: []verdicts.Allow{{Rule: "default/web ingress[0]", Peers: only(pp.a)}}}
	bound := ref(pp.b, "pol-b")
	bound.IP = netip.Addr{}
	pp.set(t, verdicts.Ruleset{Pods: []verdicts.PodRules{{Pod: bound, Ingress: iso}}})
	if !reaches(pp.c, pp.b, 8080) {
		t.Fatal("b is isolated before its address is in the map")
	}
	reads, writes := pp.n.dp.policyReads.Load(), pp.n.dp.policyWrites.Load()
	pp.set(t, verdicts.Ruleset{Pods: []verdicts.PodRules{{Pod: ref(pp.b, "pol-b"), Ingress: iso}}})
	if got := pp.n.dp.policyReads.Load(); got != reads {
		t.Errorf("the ADD's write read the table (%d reads, want %d)", got, reads)
	}
	if got := pp.n.dp.policyWrites.Load(); got != writes+1 {
		t.Errorf("the ADD made %d writes, want 1", got-writes)
	}
	if reaches(pp.c, pp.b, 8080) {
		t.Error("c reaches b after b's Add")
	}
	if !reaches(pp.a, pp.b, 8080) {
		t.Error("a cannot reach b after b's Add")
	}
}

// An IPv4 address has no place in table ip6, as an IPv6 one has none in
// table ip.
func TestTheIPv6TableRefusesIPv4PodAddresses(t *testing.T) {
	pr := peerRenders{fam: policyIPv6}
	rs := verdicts.Ruleset{Pods: []verdicts.PodRules{{Pod: podRef("10.0.0.5"), Ingress: &verdicts.Isolation{}}}}
	if _, err := pr.model(rs, false); err == nil {
		t.Error("an IPv4 pod was rendered into the ip6 table")
	}
}

// Table ip6 reads back as written (nft lists it as its comments say),
// and a restarted agent's Dataplane, reading it whole, finds it holds
// the rules and writes nothing.
func TestTheIPv6PolicyTableReadsAsItsCommentsAndSurvivesARestart(t *testing.T) {
	pp := newIPv6PolicyPods(t)
	rs := verdicts.Ruleset{Pods: []verdicts.PodRules{
		{Pod: ref(pp.a, "pol-a"), Ingress: &verdicts.Isolation{Allows: []verdicts.Allow{
			{Rule: "default/p ingress[0]", Peers: append(only(pp.c), netip.MustParsePrefix("fd00:ec2::/120")), Ports: []verdicts.Port{{Protocol: verdicts.UDP, First: 53, Last: 53}, {Protocol: verdicts.SCTP}}},
		}}, Egress: &verdicts.Isolation{}},
	}}
	if err := pp.n.dp.SetPolicy(testContext(t), rs, true); err != nil {
		t.Fatal(err)
	}
	text := strings.Join(listFamilyTable(t, pp.n.node, "ip6", PolicyTable, false), "\n")
	for _, want := range []string{
		"ct direction reply accept",
		"icmpv6 type 133-137 accept",
		"ip6 saddr vmap @egress",
		"ip6 daddr vmap @ingress",
		"2600:1f14:abc:de01:12::a : jump in-default/pol-a",
		"2600:1f14:abc:de01:12::a : jump out-default/pol-a",
		"ip6 saddr @peers-",
		"udp dport 53 return",
		"fd00:ec2::/120",
		`counter name "drop-in-default/pol-a" drop`,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("table lacks %q:\n%s", want, text)
		}
	}
	again, err := New(Options{NetNS: pp.n.node.Path(), IPv6Policy: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := again.SetPolicy(testContext(t), rs, true); err != nil {
		t.Fatal(err)
	}
	if w := again.policyWrites.Load(); w != 0 {
		t.Errorf("a restarted Dataplane wrote %d times over a table that holds its rules", w)
	}
	if err := again.SetPolicy(testContext(t), verdicts.Ruleset{}, false); err != nil {
		t.Fatal(err)
	}
	if got := listFamilyTable(t, pp.n.node, "ip6", PolicyTable, false); len(got) != 0 {
		t.Errorf("nothing isolated, yet table ip6 %s is left:\n%s", PolicyTable, strings.Join(got, "\n"))
	}
}
