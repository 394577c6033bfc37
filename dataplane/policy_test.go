package dataplane

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/containernetworking/plugins/pkg/ns"

	"github.com/vpcnet/vpcnet/dataplane/netnstest"
	"github.com/vpcnet/vpcnet/verdicts"
)

// Policy tests: three pods on one node (a and c on the primary ENI, b on
// the second), packets only between the test's namespaces.

type policyPods struct {
	n       *testNode
	a, b, c testPod
}

func newPolicyPods(t *testing.T) policyPods {
	n := newReadyNode(t, nil)
	return policyPods{n: n,
		a: n.addPod(t, "pol-a", "10.0.0.50", 0),
		b: n.addPod(t, "pol-b", "10.0.1.60", 2),
		c: n.addPod(t, "pol-c", "10.0.0.51", 0)}
}

func ref(p testPod, name string) verdicts.PodRef {
	return verdicts.PodRef{Namespace: "default", Name: name, IP: p.cfg.Addr}
}

func only(p testPod) []netip.Prefix {
	return []netip.Prefix{netip.PrefixFrom(p.cfg.Addr, p.cfg.Addr.BitLen())}
}

func (pp policyPods) set(t *testing.T, rs verdicts.Ruleset) {
	t.Helper()
	if err := pp.n.dp.SetPolicy(testContext(t), rs, false); err != nil {
		t.Fatalf("SetPolicy: %v", err)
	}
}

// reaches says whether from gets an echo from to's port.
func reaches(from, to testPod, port uint16) bool {
	return talkTCP(from.ns, netip.AddrPortFrom(to.cfg.Addr, port)) == nil
}

func TestAnIsolatedPodAdmitsOnlyThePeerAndPortAPolicyAllows(t *testing.T) {
	pp := newPolicyPods(t)
	serveTCP(t, pp.b.ns, netip.AddrPortFrom(pp.b.cfg.Addr, 8080))
	serveTCP(t, pp.b.ns, netip.AddrPortFrom(pp.b.cfg.Addr, 9090))
	serveTCP(t, pp.a.ns, netip.AddrPortFrom(pp.a.cfg.Addr, 8080))
	pp.set(t, verdicts.Ruleset{Pods: []verdicts.PodRules{{Pod: ref(pp.b, "pol-b"), Ingress: &verdicts.Isolation{
		Policies: []string{"default/web"},
		Allows:   []verdicts.Allow{{Rule: "default/web ingress[0]", Peers: only(pp.a), Ports: []verdicts.Port{{Protocol: verdicts.TCP, First: 8000, Last: 8080}}}},
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
}

func TestEgressIsolationStillLetsRepliesOfInboundConnectionsOut(t *testing.T) {
	pp := newPolicyPods(t)
	serveTCP(t, pp.a.ns, netip.AddrPortFrom(pp.a.cfg.Addr, 8080))
	serveTCP(t, pp.b.ns, netip.AddrPortFrom(pp.b.cfg.Addr, 8080))
	pp.set(t, verdicts.Ruleset{Pods: []verdicts.PodRules{{Pod: ref(pp.a, "pol-a"), Egress: &verdicts.Isolation{}}}})
	if !reaches(pp.b, pp.a, 8080) {
		t.Error("b cannot reach a: a's ingress is open and its replies must pass its egress isolation")
	}
	if reaches(pp.a, pp.b, 8080) {
		t.Error("a reaches b though a's egress allows nothing")
	}
	node := testPod{ns: pp.n.node, cfg: PodConfig{Addr: netip.MustParseAddr(primaryIP)}}
	serveTCP(t, node.ns, netip.AddrPortFrom(node.cfg.Addr, 8081))
	if !reaches(pp.c, node, 8081) {
		t.Error("c cannot reach its node; the check below would prove nothing")
	}
	if reaches(pp.a, node, 8081) {
		t.Error("a reaches its node though its egress allows nothing")
	}
}

func TestAnEgressAllowStillMeetsTheDestinationsIngress(t *testing.T) {
	pp := newPolicyPods(t)
	serveTCP(t, pp.b.ns, netip.AddrPortFrom(pp.b.cfg.Addr, 8080))
	pp.set(t, verdicts.Ruleset{Pods: []verdicts.PodRules{
		{Pod: ref(pp.a, "pol-a"), Egress: &verdicts.Isolation{Allows: []verdicts.Allow{{AnyPeer: true}}}},
		{Pod: ref(pp.b, "pol-b"), Ingress: &verdicts.Isolation{}},
	}})
	if reaches(pp.a, pp.b, 8080) {
		t.Error("a reaches b: a's egress allows it but b's ingress allows nothing")
	}
}

// echoConn is a TCP connection from one pod to an echo server in another
// that stays open across policy changes.
type echoConn struct {
	c net.Conn
	r *bufio.Reader
}

func openEcho(t *testing.T, from, to testPod, port uint16) *echoConn {
	t.Helper()
	addr := netip.AddrPortFrom(to.cfg.Addr, port)
	var ln net.Listener
	netnstest.Do(t, to.ns, func() error {
		var err error
		ln, err = net.Listen("tcp", addr.String())
		return err
	})
	t.Cleanup(func() { ln.Close() })
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		r := bufio.NewReader(c)
		for {
			line, err := r.ReadString('\n')
			if err != nil {
				return
			}
			fmt.Fprint(c, line)
		}
	}()
	var c net.Conn
	if err := from.ns.Do(func(ns.NetNS) error {
		var err error
		c, err = net.DialTimeout("tcp", addr.String(), 2*time.Second)
		return err
	}); err != nil {
		t.Fatalf("connect %s: %v", addr, err)
	}
	t.Cleanup(func() { c.Close() })
	return &echoConn{c: c, r: bufio.NewReader(c)}
}

// flows says whether a line still comes back within a second.
func (e *echoConn) flows(msg string) bool {
	_ = e.c.SetDeadline(time.Now().Add(time.Second))
	if _, err := fmt.Fprintln(e.c, msg); err != nil {
		return false
	}
	line, err := e.r.ReadString('\n')
	return err == nil && strings.TrimSpace(line) == msg
}

func TestAChangedPolicyKeepsTheConnectionsItStillAllowsAndCutsTheOthers(t *testing.T) {
	pp := newPolicyPods(t)
	allowA := verdicts.Ruleset{Pods: []verdicts.PodRules{{Pod: ref(pp.b, "pol-b"), Ingress: &verdicts.Isolation{
		Allows: []verdicts.Allow{{Rule: "one", Peers: only(pp.a)}}}}}}
	pp.set(t, allowA)
	conn := openEcho(t, pp.a, pp.b, 7070)
	if !conn.flows("first") {
		t.Fatal("the allowed connection does not flow")
	}
	// Another policy, still allowing a: the table is rewritten.
	stillA := verdicts.Ruleset{Pods: []verdicts.PodRules{{Pod: ref(pp.b, "pol-b"), Ingress: &verdicts.Isolation{
		Allows: []verdicts.Allow{{Rule: "two", Peers: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/24")}, Ports: []verdicts.Port{{Protocol: verdicts.TCP}}}}}}}}
	pp.set(t, stillA)
	if !conn.flows("second") {
		t.Error("a rewrite that still allows the connection cut it")
	}
	pp.set(t, verdicts.Ruleset{Pods: []verdicts.PodRules{{Pod: ref(pp.b, "pol-b"), Ingress: &verdicts.Isolation{}}}})
	if conn.flows("third") {
		t.Error("the connection still flows after a policy that no longer allows it")
	}
}

func TestPolicyRulesOutliveTheirWriterAndGoWhenNothingIsIsolated(t *testing.T) {
	pp := newPolicyPods(t)
	serveTCP(t, pp.b.ns, netip.AddrPortFrom(pp.b.cfg.Addr, 8080))
	rs := verdicts.Ruleset{Pods: []verdicts.PodRules{{Pod: ref(pp.b, "pol-b"), Ingress: &verdicts.Isolation{}}}}
	pp.set(t, rs)
	if reaches(pp.a, pp.b, 8080) {
		t.Fatal("b is reached though isolated")
	}
	// A restarted agent: a new Dataplane on the same node, which has
	// written nothing yet. The kernel still holds the verdicts.
	again, err := New(Options{NetNS: pp.n.node.Path(), PollInterval: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if reaches(pp.a, pp.b, 8080) {
		t.Error("b is reached while its agent is away; the last verdicts must hold")
	}
	before, err := again.PolicyDrops(testContext(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := again.SetPolicy(testContext(t), rs, false); err != nil {
		t.Fatal(err)
	}
	after, err := again.PolicyDrops(testContext(t))
	if err != nil {
		t.Fatal(err)
	}
	if after[pp.b.cfg.Addr].Ingress < before[pp.b.cfg.Addr].Ingress || before[pp.b.cfg.Addr].Ingress == 0 {
		t.Errorf("drops before the rewrite %v, after %v; a rewrite must not lose them", before, after)
	}
	if err := again.SetPolicy(testContext(t), verdicts.Ruleset{}, false); err != nil {
		t.Fatal(err)
	}
	if got := listTable(t, pp.n.node, PolicyTable, false); got != nil {
		t.Errorf("table left with nothing isolated:\n%s", strings.Join(got, "\n"))
	}
	if !reaches(pp.a, pp.b, 8080) {
		t.Error("b not reached once nothing isolates it")
	}
}

func TestPolicyTableReadsAsItsComments(t *testing.T) {
	pp := newPolicyPods(t)
	rs := verdicts.Ruleset{Pods: []verdicts.PodRules{
		{Pod: ref(pp.a, "pol-a"), Ingress: &verdicts.Isolation{Allows: []verdicts.Allow{
			{Rule: "default/p ingress[0]", Peers: only(pp.c), Ports: []verdicts.Port{{Protocol: verdicts.UDP, First: 53, Last: 53}, {Protocol: verdicts.SCTP}}},
		}}},
		{Pod: ref(pp.b, "pol-b"), Ingress: &verdicts.Isolation{Allows: []verdicts.Allow{
			{Rule: "default/p ingress[0]", Peers: only(pp.c)},
		}}},
	}}
	if err := pp.n.dp.SetPolicy(testContext(t), rs, true); err != nil {
		t.Fatal(err)
	}
	text := strings.Join(listTable(t, pp.n.node, PolicyTable, false), "\n")
	for _, want := range []string{
		"ct direction reply accept",
		"ip saddr vmap @egress",
		"ip daddr vmap @ingress",
		"10.0.0.50 : jump in-default/pol-a",
		"udp dport 53 return",
		"meta l4proto sctp return",
		`log prefix "vpcnet-policy drop ingress default/pol-a: "`,
		`counter name "drop-in-default/pol-a" drop`,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("table lacks %q:\n%s", want, text)
		}
	}
	// Both pods' rules admit the same peers: one set serves them.
	if strings.Count(text, "set peers-") != 1 {
		t.Errorf("want one shared peer set:\n%s", text)
	}
}

// BenchmarkSetPolicy writes a change to a node's rules: 110 isolated
// pods, each with five allows of ten peers and a port, one pod's chain
// different each time (as an ADD makes it).
func BenchmarkSetPolicy(b *testing.B) {
	netnstest.Require(b)
	n := netnstest.NewNS(b)
	dp, err := New(Options{NetNS: n.Path()})
	if err != nil {
		b.Fatal(err)
	}
	rs := verdicts.Ruleset{}
	// As the compiler hands them: one peer list per rule, shared by the
	// pods the policy selects.
	var peers [5][]netip.Prefix
	for a := range peers {
		for p := range 10 {
			peers[a] = append(peers[a], netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 1, byte(a), byte(p * 7)}), 32))
		}
	}
	for i := range 110 {
		r := verdicts.PodRules{Pod: verdicts.PodRef{Namespace: "bench", Name: fmt.Sprint("p", i), IP: netip.AddrFrom4([4]byte{10, 0, 1, byte(i + 1)})},
			Ingress: &verdicts.Isolation{Policies: []string{"bench/p"}}}
		for a := range 5 {
			r.Ingress.Allows = append(r.Ingress.Allows, verdicts.Allow{Rule: fmt.Sprintf("bench/p ingress[%d]", a), Peers: peers[a],
				Ports: []verdicts.Port{{Protocol: verdicts.TCP, First: uint16(8000 + a), Last: uint16(8000 + a)}}})
		}
		rs.Pods = append(rs.Pods, r)
	}
	ctx := context.Background()
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		// A different last pod each time, so every call rewrites.
		rs.Pods[109].Pod.Name = fmt.Sprint("p", i)
		if err := dp.SetPolicy(ctx, rs, false); err != nil {
			b.Fatal(err)
		}
	}
}

func TestAPolicyChangeRewritesOnlyWhatChangedAndKeepsTheOthersCounters(t *testing.T) {
	pp := newPolicyPods(t)
	serveTCP(t, pp.b.ns, netip.AddrPortFrom(pp.b.cfg.Addr, 8080))
	serveTCP(t, pp.c.ns, netip.AddrPortFrom(pp.c.cfg.Addr, 8080))
	bOnly := verdicts.PodRules{Pod: ref(pp.b, "pol-b"), Ingress: &verdicts.Isolation{}}
	pp.set(t, verdicts.Ruleset{Pods: []verdicts.PodRules{bOnly}})
	if reaches(pp.a, pp.b, 8080) {
		t.Fatal("b reached though isolated")
	}
	// c joins (an ADD): b's chain and its drops stay as they were.
	cAllowsA := verdicts.PodRules{Pod: ref(pp.c, "pol-c"), Ingress: &verdicts.Isolation{Allows: []verdicts.Allow{{Rule: "r", Peers: only(pp.a)}}}}
	pp.set(t, verdicts.Ruleset{Pods: []verdicts.PodRules{bOnly, cAllowsA}})
	drops, err := pp.n.dp.PolicyDrops(testContext(t))
	if err != nil {
		t.Fatal(err)
	}
	if drops[pp.b.cfg.Addr].Ingress == 0 {
		t.Errorf("b's drops were lost when c joined: %v", drops)
	}
	if !reaches(pp.a, pp.c, 8080) || reaches(pp.b, pp.c, 8080) {
		t.Error("c's rules are not what its Allow says")
	}
	// b leaves and c changes to allow b: b's chain, counter and the set
	// of a go; b is open again.
	cAllowsB := verdicts.PodRules{Pod: ref(pp.c, "pol-c"), Ingress: &verdicts.Isolation{Allows: []verdicts.Allow{{Rule: "r", Peers: only(pp.b)}}}}
	pp.set(t, verdicts.Ruleset{Pods: []verdicts.PodRules{cAllowsB}})
	if !reaches(pp.a, pp.b, 8080) {
		t.Error("b still isolated after it left the rules")
	}
	if reaches(pp.a, pp.c, 8080) || !reaches(pp.b, pp.c, 8080) {
		t.Error("c's changed rules are not in force")
	}
	text := strings.Join(listTable(t, pp.n.node, PolicyTable, false), "\n")
	if strings.Contains(text, "in-default/pol-b") || strings.Count(text, "set peers-") != 1 {
		t.Errorf("the table keeps what no pod uses:\n%s", text)
	}
}

func TestLongPolicyAndPodNamesAreWritten(t *testing.T) {
	pp := newPolicyPods(t)
	serveTCP(t, pp.b.ns, netip.AddrPortFrom(pp.b.cfg.Addr, 8080))
	// As long as Kubernetes allows: a 63-byte namespace, 253-byte names.
	ns, name := strings.Repeat("n", 63), strings.Repeat("p", 253)
	rs := verdicts.Ruleset{Pods: []verdicts.PodRules{{
		Pod: verdicts.PodRef{Namespace: ns, Name: name, IP: pp.b.cfg.Addr},
		Ingress: &verdicts.Isolation{Allows: []verdicts.Allow{{Rule: ns + "/" + strings.Repeat("q", 253) + " ingress[0]",
			Peers: only(pp.a), Ports: []verdicts.Port{{Protocol: verdicts.TCP, First: 8080, Last: 8080}}}}},
	}}}
	if err := pp.n.dp.SetPolicy(testContext(t), rs, true); err != nil {
		t.Fatalf("the kernel refused the rules of long names: %v", err)
	}
	if reaches(pp.c, pp.b, 8080) {
		t.Error("c reaches b; only a is allowed")
	}
}

func ingressDrops(t *testing.T, dp *Dataplane, p testPod) uint64 {
	t.Helper()
	drops, err := dp.PolicyDrops(testContext(t))
	if err != nil {
		t.Fatalf("PolicyDrops: %v", err)
	}
	return drops[p.cfg.Addr].Ingress
}

func TestTheSameRulesetTwiceWritesNothingAlsoAfterARestart(t *testing.T) {
	pp := newPolicyPods(t)
	rs := verdicts.Ruleset{Pods: []verdicts.PodRules{
		{Pod: ref(pp.a, "pol-a"), Egress: &verdicts.Isolation{Allows: []verdicts.Allow{{Rule: "dns", AnyPeer: true, Ports: []verdicts.Port{{Protocol: verdicts.UDP, First: 53, Last: 53}}}}}},
		{Pod: ref(pp.b, "pol-b"), Ingress: &verdicts.Isolation{Allows: []verdicts.Allow{
			{Rule: "web", Peers: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/24")}, Ports: []verdicts.Port{{Protocol: verdicts.TCP, First: 8000, Last: 8080}}}}}},
	}}
	for range 2 {
		if err := pp.n.dp.SetPolicy(testContext(t), rs, true); err != nil {
			t.Fatal(err)
		}
	}
	if w := pp.n.dp.policyWrites.Load(); w != 1 {
		t.Errorf("%d writes for the same Ruleset twice, want 1", w)
	}
	handles := listTable(t, pp.n.node, PolicyTable, true)
	// A restarted agent knows nothing of the table: it reads it whole,
	// finds it right, and writes nothing (any write makes new handles).
	again, err := New(Options{NetNS: pp.n.node.Path()})
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := again.SetPolicy(testContext(t), rs, true); err != nil {
			t.Fatal(err)
		}
	}
	if w := again.policyWrites.Load(); w != 0 {
		t.Errorf("a restarted agent wrote the table it found right (%d writes)", w)
	}
	diffLines(t, "policy table after the same Ruleset again", listTable(t, pp.n.node, PolicyTable, true), handles)
}

func TestATamperedPolicyTableIsRepaired(t *testing.T) {
	pp := newPolicyPods(t)
	serveTCP(t, pp.b.ns, netip.AddrPortFrom(pp.b.cfg.Addr, 8080))
	rs := verdicts.Ruleset{Pods: []verdicts.PodRules{{Pod: ref(pp.b, "pol-b"), Ingress: &verdicts.Isolation{}}}}
	pp.set(t, rs)
	want := listTable(t, pp.n.node, PolicyTable, false)
	// Someone empties b's chain: a restarted agent, which compares the
	// whole table, puts it back.
	nft(t, pp.n.node, "flush chain ip "+PolicyTable+" in-default/pol-b")
	if !reaches(pp.a, pp.b, 8080) {
		t.Fatal("the tampering did not open b; the test proves nothing")
	}
	again, err := New(Options{NetNS: pp.n.node.Path()})
	if err != nil {
		t.Fatal(err)
	}
	if err := again.SetPolicy(testContext(t), rs, false); err != nil {
		t.Fatal(err)
	}
	diffLines(t, "policy table repaired at restart", listTable(t, pp.n.node, PolicyTable, false), want)
	if reaches(pp.a, pp.b, 8080) {
		t.Error("b is reached after the repair")
	}
	// Someone adds a chain to our table, or deletes the table: the same
	// agent sees it and writes the table again, though its rules have
	// not changed.
	for _, tamper := range []string{"add chain ip " + PolicyTable + " intruder", "delete table ip " + PolicyTable} {
		nft(t, pp.n.node, tamper)
		if err := again.SetPolicy(testContext(t), rs, false); err != nil {
			t.Fatal(err)
		}
		diffLines(t, "policy table after "+tamper, withoutCounts(listTable(t, pp.n.node, PolicyTable, false)), withoutCounts(want))
	}
}

// withoutCounts is a table listing without its counters' values.
func withoutCounts(lines []string) []string {
	out := make([]string, 0, len(lines))
	for _, l := range lines {
		if !strings.HasPrefix(strings.TrimSpace(l), "packets ") {
			out = append(out, l)
		}
	}
	return out
}

func TestDropsSurviveAWholeRewriteAfterARestart(t *testing.T) {
	pp := newPolicyPods(t)
	serveTCP(t, pp.b.ns, netip.AddrPortFrom(pp.b.cfg.Addr, 8080))
	pp.set(t, verdicts.Ruleset{Pods: []verdicts.PodRules{{Pod: ref(pp.b, "pol-b"), Ingress: &verdicts.Isolation{}}}})
	if reaches(pp.a, pp.b, 8080) {
		t.Fatal("b reached though isolated")
	}
	// The agent restarts while the cluster changes: the new rules are
	// written whole, and b's counter is kept.
	again, err := New(Options{NetNS: pp.n.node.Path()})
	if err != nil {
		t.Fatal(err)
	}
	before := ingressDrops(t, again, pp.b)
	if before == 0 {
		t.Fatal("a new Dataplane reads no drops of b; the kernel's counter holds them")
	}
	changed := verdicts.Ruleset{Pods: []verdicts.PodRules{
		{Pod: ref(pp.b, "pol-b"), Ingress: &verdicts.Isolation{Allows: []verdicts.Allow{{Rule: "c only", Peers: only(pp.c)}}}},
		{Pod: ref(pp.a, "pol-a"), Egress: &verdicts.Isolation{Allows: []verdicts.Allow{{Rule: "any", AnyPeer: true}}}},
	}}
	if err := again.SetPolicy(testContext(t), changed, false); err != nil {
		t.Fatal(err)
	}
	if w := again.policyWrites.Load(); w != 1 {
		t.Fatalf("%d writes; the test needs the table rewritten", w)
	}
	if after := ingressDrops(t, again, pp.b); after < before {
		t.Errorf("b's ingress drops: %d before the rewrite, %d after; a rewrite must not lose them", before, after)
	}
	if !reaches(pp.c, pp.b, 8080) || reaches(pp.a, pp.b, 8080) {
		t.Error("the rewritten rules are not in force")
	}
}

func TestAnAllowedUDPPortPassesAndNoOtherDoes(t *testing.T) {
	pp := newPolicyPods(t)
	for _, port := range []uint16{5353, 5454} {
		serveUDP(t, pp.b.ns, netip.AddrPortFrom(pp.b.cfg.Addr, port))
	}
	pp.set(t, verdicts.Ruleset{Pods: []verdicts.PodRules{{Pod: ref(pp.b, "pol-b"), Ingress: &verdicts.Isolation{
		Allows: []verdicts.Allow{{Rule: "dns", Peers: only(pp.a), Ports: []verdicts.Port{{Protocol: verdicts.UDP, First: 5353, Last: 5353}}}},
	}}}})
	if err := talkUDP(pp.a.ns, netip.AddrPortFrom(pp.b.cfg.Addr, 5353)); err != nil {
		t.Errorf("a cannot reach b on UDP 5353, which the policy allows: %v", err)
	}
	if talkUDP(pp.a.ns, netip.AddrPortFrom(pp.b.cfg.Addr, 5454)) == nil {
		t.Error("a reaches b on UDP 5454; only 5353 is allowed")
	}
	if talkUDP(pp.c.ns, netip.AddrPortFrom(pp.b.cfg.Addr, 5353)) == nil {
		t.Error("c reaches b on UDP 5353; only a is allowed")
	}
	if reaches(pp.a, pp.b, 5353) {
		t.Error("a reaches b on TCP 5353; only UDP is allowed")
	}
}

func TestAFullNodesRulesAreWrittenInOneTransaction(t *testing.T) {
	n := newTestNode(t)
	// 100 pods isolated both ways, 5 Allows of 10 peers each, every
	// peer list distinct: 1,000 sets and 1,400 rules, far past a netlink
	// socket's default buffers.
	rs := benchRuleset(100, 5, 10, true, true, 80)
	if err := n.dp.SetPolicy(testContext(t), rs, true); err != nil {
		t.Fatal(err)
	}
	text := strings.Join(listTable(t, n.node, PolicyTable, false), "\n")
	if sets, chains := strings.Count(text, "set peers-"), strings.Count(text, "\tchain "); sets != 1000 || chains != 202 {
		t.Errorf("table has %d peer sets and %d chains, want 1000 and 202", sets, chains)
	}
	// And the whole of it again, in place, from a restarted agent.
	again, err := New(Options{NetNS: n.node.Path()})
	if err != nil {
		t.Fatal(err)
	}
	if err := again.SetPolicy(testContext(t), benchRuleset(100, 5, 10, true, true, 81), true); err != nil {
		t.Fatal(err)
	}
	if again.policyWrites.Load() != 1 {
		t.Error("the changed rules were not written")
	}
}

// serveUDP echoes every datagram to addr inside n back to its sender.
func serveUDP(t *testing.T, n ns.NetNS, addr netip.AddrPort) {
	t.Helper()
	var c net.PacketConn
	netnstest.Do(t, n, func() error {
		var err error
		c, err = net.ListenPacket("udp", addr.String())
		return err
	})
	t.Cleanup(func() { c.Close() })
	go func() {
		buf := make([]byte, 1500)
		for {
			k, from, err := c.ReadFrom(buf)
			if err != nil {
				return
			}
			_, _ = c.WriteTo(buf[:k], from)
		}
	}()
}

// talkUDP sends a datagram from inside n to addr and waits a second for
// its echo.
func talkUDP(n ns.NetNS, addr netip.AddrPort) error {
	var c net.Conn
	if err := n.Do(func(ns.NetNS) error {
		var err error
		c, err = net.Dial("udp", addr.String())
		return err
	}); err != nil {
		return err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(time.Second))
	if _, err := c.Write([]byte("ping")); err != nil {
		return err
	}
	buf := make([]byte, 16)
	k, err := c.Read(buf)
	if err != nil {
		return fmt.Errorf("read echo: %w", err)
	}
	if string(buf[:k]) != "ping" {
		return fmt.Errorf("echo %q", buf[:k])
	}
	return nil
}

// A pod's chains are written once the API server binds it to the node,
// before it has an address; its Add then adds its map entries and leaves
// the chains, their rules and its counters as they were.
func TestAPodsChainsAreWrittenBeforeItsAddressAndItsAddAddsOnlyMapEntries(t *testing.T) {
	pp := newPolicyPods(t)
	serveTCP(t, pp.b.ns, netip.AddrPortFrom(pp.b.cfg.Addr, 8080))
	iso := &verdicts.Isolation{Allows: []verdicts.Allow{{Rule: "default/web ingress[0]", Peers: only(pp.a)}}}
	bound := ref(pp.b, "pol-b")
	bound.IP = netip.Addr{}
	pp.set(t, verdicts.Ruleset{Pods: []verdicts.PodRules{{Pod: bound, Ingress: iso}}})
	before := withoutCounts(listTable(t, pp.n.node, PolicyTable, true))
	text := strings.Join(before, "\n")
	if !strings.Contains(text, "chain in-default/pol-b") || strings.Contains(text, "jump in-default/pol-b") {
		t.Fatalf("want b's chain written with no map entry before its address:\n%s", text)
	}
	if !reaches(pp.c, pp.b, 8080) {
		t.Error("b is isolated before any map entry sends its address to its chain")
	}
	pp.set(t, verdicts.Ruleset{Pods: []verdicts.PodRules{{Pod: ref(pp.b, "pol-b"), Ingress: iso}}})
	// Counters are left out of both listings: a packet may be counted
	// between them (the last ACK of c's connection, arriving once b is
	// isolated: "packets 1 bytes 52", seen once in CI).
	after := withoutCounts(listTable(t, pp.n.node, PolicyTable, true))
	if reaches(pp.c, pp.b, 8080) || !reaches(pp.a, pp.b, 8080) {
		t.Error("b's verdicts are not in force once its address is")
	}
	var changed []string
	for _, l := range after {
		if !slices.Contains(before, l) {
			changed = append(changed, strings.TrimSpace(l))
		}
	}
	if len(changed) != 1 || !strings.Contains(changed[0], "10.0.1.60 : jump in-default/pol-b") {
		t.Errorf("the Add changed %q; want only b's map entry (its chain's rules keep their handles)", changed)
	}
}

// A pod the runtime gave a second sandbox before the first one's Del has
// two addresses in one chain; an address that moves from one pod to
// another in one write goes to its new pod's chain.
func TestAPodsAddressesShareItsChainAndAnAddressMovesBetweenPods(t *testing.T) {
	pp := newPolicyPods(t)
	serveTCP(t, pp.a.ns, netip.AddrPortFrom(pp.a.cfg.Addr, 8080))
	serveTCP(t, pp.b.ns, netip.AddrPortFrom(pp.b.cfg.Addr, 8080))
	denyAll := &verdicts.Isolation{}
	web := func(p testPod) verdicts.PodRef {
		return verdicts.PodRef{Namespace: "default", Name: "web", IP: p.cfg.Addr}
	}
	pp.set(t, verdicts.Ruleset{Pods: []verdicts.PodRules{{Pod: web(pp.a), Ingress: denyAll}, {Pod: web(pp.b), Ingress: denyAll}}})
	if reaches(pp.c, pp.a, 8080) || reaches(pp.c, pp.b, 8080) {
		t.Error("an address of the pod is open")
	}
	text := strings.Join(listTable(t, pp.n.node, PolicyTable, false), "\n")
	if strings.Count(text, "chain in-default/web {") != 1 {
		t.Errorf("want one chain for the pod's two addresses:\n%s", text)
	}
	// a's address now belongs to another pod, open for ingress but
	// isolated for egress; b's stays web's.
	other := verdicts.PodRef{Namespace: "default", Name: "other", IP: pp.a.cfg.Addr}
	pp.set(t, verdicts.Ruleset{Pods: []verdicts.PodRules{{Pod: other, Egress: denyAll}, {Pod: web(pp.b), Ingress: denyAll}}})
	if !reaches(pp.c, pp.a, 8080) || reaches(pp.c, pp.b, 8080) || reaches(pp.a, pp.b, 8080) {
		t.Error("the moved address does not have its new pod's verdicts")
	}
	drops, err := pp.n.dp.PolicyDrops(testContext(t))
	if err != nil {
		t.Fatal(err)
	}
	if drops[pp.b.cfg.Addr].Ingress == 0 || drops[pp.a.cfg.Addr].Egress == 0 {
		t.Errorf("drops = %v; want b's ingress and a's egress counted by address", drops)
	}
}

// The previous release named a pod's chains and counters by its address.
// An agent upgraded over such a table rewrites it whole with chains named
// by pod, and b stays isolated throughout.
func TestATableOfAddressNamedChainsIsRewrittenWithChainsNamedByPod(t *testing.T) {
	pp := newPolicyPods(t)
	serveTCP(t, pp.b.ns, netip.AddrPortFrom(pp.b.cfg.Addr, 8080))
	nft(t, pp.n.node, `table ip `+PolicyTable+` {
	counter drop-in-10.0.1.60 { }
	map ingress { type ipv4_addr : verdict; }
	map egress { type ipv4_addr : verdict; }
	chain in-10.0.1.60 { counter name "drop-in-10.0.1.60" drop; }
	chain forward { type filter hook forward priority filter; policy accept; ip daddr vmap @ingress; }
}
add element ip `+PolicyTable+` ingress { 10.0.1.60 : jump in-10.0.1.60 }
`)
	if reaches(pp.a, pp.b, 8080) {
		t.Fatal("the old table does not isolate b; the test proves nothing")
	}
	pp.set(t, verdicts.Ruleset{Pods: []verdicts.PodRules{{Pod: ref(pp.b, "pol-b"), Ingress: &verdicts.Isolation{
		Allows: []verdicts.Allow{{Rule: "default/web ingress[0]", Peers: only(pp.a)}}}}}})
	text := strings.Join(listTable(t, pp.n.node, PolicyTable, false), "\n")
	if strings.Contains(text, "in-10.0.1.60") || !strings.Contains(text, "10.0.1.60 : jump in-default/pol-b") {
		t.Errorf("want the address-named chain gone and b's address sent to its pod's chain:\n%s", text)
	}
	if !reaches(pp.a, pp.b, 8080) || reaches(pp.c, pp.b, 8080) {
		t.Error("b's new verdicts are not in force")
	}
}

// An ADD's write and a DEL's change only map entries: they are sent
// without listing the table, and the pod is isolated from the write on.
// When the kernel refuses them because someone removed what they need
// (here the pod's chain and counter), the table is read and repaired in
// the same call: the pod is never left open.
func TestAnAddsMapEntriesAreWrittenWithoutReadingTheTableAndRepairedWhenRefused(t *testing.T) {
	pp := newPolicyPods(t)
	serveTCP(t, pp.b.ns, netip.AddrPortFrom(pp.b.cfg.Addr, 8080))
	iso := &verdicts.Isolation{Allows: []verdicts.Allow{{Rule: "default/web ingress[0]", Peers: only(pp.a)}}}
	bound := ref(pp.b, "pol-b")
	bound.IP = netip.Addr{}
	boundRS := verdicts.Ruleset{Pods: []verdicts.PodRules{{Pod: bound, Ingress: iso}}}
	addedRS := verdicts.Ruleset{Pods: []verdicts.PodRules{{Pod: ref(pp.b, "pol-b"), Ingress: iso}}}
	dp := pp.n.dp
	pp.set(t, boundRS)
	reads, writes := dp.policyReads.Load(), dp.policyWrites.Load()
	pp.set(t, addedRS) // the ADD
	if reaches(pp.c, pp.b, 8080) || !reaches(pp.a, pp.b, 8080) {
		t.Error("b's verdicts are not in force after its Add")
	}
	pp.set(t, boundRS) // the DEL
	if !reaches(pp.c, pp.b, 8080) {
		t.Error("b's map entry stayed after its Del")
	}
	if r, w := dp.policyReads.Load()-reads, dp.policyWrites.Load()-writes; r != 0 || w != 2 {
		t.Errorf("the Add and the Del read the table %d times and wrote %d; want 0 and 2", r, w)
	}
	want := listTable(t, pp.n.node, PolicyTable, false)
	nft(t, pp.n.node, "flush chain ip "+PolicyTable+" in-default/pol-b\n"+
		"delete chain ip "+PolicyTable+" in-default/pol-b\n"+
		"delete counter ip "+PolicyTable+" drop-in-default/pol-b\n")
	pp.set(t, addedRS)
	if reaches(pp.c, pp.b, 8080) || !reaches(pp.a, pp.b, 8080) {
		t.Error("b's verdicts are not in force after an Add whose chain someone had removed")
	}
	if r := dp.policyReads.Load() - reads; r != 1 {
		t.Errorf("the refused Add read the table %d times; want once", r)
	}
	pp.set(t, boundRS)
	// The same lines; a rewritten table lists its chains in another order.
	diffLines(t, "policy table repaired", slices.Sorted(slices.Values(withoutCounts(listTable(t, pp.n.node, PolicyTable, false)))),
		slices.Sorted(slices.Values(withoutCounts(want))))
}
