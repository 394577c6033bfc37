package dataplane

import (
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go4.org/netipx"

	"github.com/vpcnet/vpcnet/dataplane/netnstest"
	"github.com/vpcnet/vpcnet/verdicts"
)

// IPv4 egress of IPv6 pods under NetworkPolicy: the IPv6 policy tests'
// pods, a and b each with an egress veth (169.254.172.x, SNATed to the
// node's 10.0.0.10) as vpcnet-egress-v4 wires it; the world namespace
// plays two internet hosts. Packets only between the test's namespaces.

const (
	internetIP2 = "198.51.100.2"
	egressGW    = "169.254.172.1"
)

type v4EgressPods struct {
	policyPods
	// veths are a's and b's host veths, as EgressV4VethName names them.
	vethA, vethB string
	// a4, b4 are a and b as IPv4 peers: their egress addresses.
	a4, b4 testPod
}

// newV4EgressNode is the IPv6 policy tests' node and pods, its
// Dataplane judging IPv4 egress too (ENABLE_V4_EGRESS).
func newV4EgressNode(t *testing.T) v4EgressPods {
	t.Helper()
	pp := v4EgressPods{policyPods: newIPv6PolicyPods(t)}
	dp, err := New(Options{NetNS: pp.n.node.Path(), PollInterval: 20 * time.Millisecond, IPv6Policy: true, EgressV4Policy: true})
	if err != nil {
		t.Fatal(err)
	}
	pp.n.dp = dp
	return pp
}

func newV4EgressPods(t *testing.T) v4EgressPods {
	t.Helper()
	pp := newV4EgressNode(t)
	netnstest.Do(t, pp.n.world, func() error { return upWithAddrs("wan0", internetIP2+"/32") })
	wire := func(p testPod, container, addr string) (string, testPod) {
		veth := EgressV4VethName("vpcnet", container, "eth0")
		cfg := EgressV4Config{
			NetNS: p.ns.Path(), IfName: "v4if0", HostVethName: veth,
			Addr: netip.MustParsePrefix(addr + "/22"), Gateway: netip.MustParseAddr(egressGW),
			Routes: []netip.Prefix{netip.MustParsePrefix("0.0.0.0/0")},
			SNAT:   EgressSNAT{NodeIP: netip.MustParseAddr(primaryIP)}, Owner: EgressV4Owner("vpcnet", container, "eth0"),
		}
		if _, err := pp.n.dp.AddEgressV4(testContext(t), cfg); err != nil {
			t.Fatalf("AddEgressV4 %s: %v", container, err)
		}
		return veth, testPod{ns: p.ns, cfg: PodConfig{Addr: cfg.Addr.Addr()}}
	}
	pp.vethA, pp.a4 = wire(pp.a, "ctr-a", "169.254.172.10")
	pp.vethB, pp.b4 = wire(pp.b, "ctr-b", "169.254.172.11")
	return pp
}

// host is an IPv4 address of the world namespace, or of the node, as a
// peer.
func (pp v4EgressPods) host(addr string) testPod {
	n := pp.n.world
	if addr == primaryIP {
		n = pp.n.node
	}
	return testPod{ns: n, cfg: PodConfig{Addr: netip.MustParseAddr(addr)}}
}

// rules is a's egress isolation, with a's and b's egress veths known.
func (pp v4EgressPods) rules(aEgress *verdicts.Isolation) verdicts.Ruleset {
	return verdicts.Ruleset{Pods: []verdicts.PodRules{
		{Pod: ref(pp.a, "pol-a"), Egress: aEgress, EgressV4Veth: pp.vethA},
	}}
}

func TestAnEgressIsolatedIPv6PodReachesOnlyTheIPv4DestinationsItsPoliciesAllow(t *testing.T) {
	pp := newV4EgressPods(t)
	for _, addr := range []string{internetIP, internetIP2} {
		for _, port := range []uint16{8080, 9090} {
			serveTCP(t, pp.n.world, netip.AddrPortFrom(netip.MustParseAddr(addr), port))
		}
	}
	serveTCP(t, pp.n.node, netip.AddrPortFrom(netip.MustParseAddr(primaryIP), 8081))
	serveTCP(t, pp.c.ns, netip.AddrPortFrom(pp.c.cfg.Addr, 8080))
	// An ipBlock 198.51.100.0/24 except 198.51.100.2, TCP 8000-8080, as
	// the compiler hands it: the block less the except, with c (a pod
	// peer, IPv6) in another Allow that no IPv4 destination can match.
	var sb netipx.IPSetBuilder
	sb.AddPrefix(netip.MustParsePrefix("198.51.100.0/24"))
	sb.Remove(netip.MustParseAddr(internetIP2))
	block, _ := sb.IPSet()
	pp.set(t, pp.rules(&verdicts.Isolation{Policies: []string{"default/out"}, Allows: []verdicts.Allow{
		{Rule: "default/out egress[0]", Peers: block.Prefixes(), Ports: []verdicts.Port{{Protocol: verdicts.TCP, First: 8000, Last: 8080}}},
		{Rule: "default/out egress[1]", Peers: only(pp.c)},
	}}))
	if !reaches(pp.a, pp.host(internetIP), 8080) {
		t.Error("a cannot reach 198.51.100.1:8080 through its egress veth, which the ipBlock allows")
	}
	if reaches(pp.a, pp.host(internetIP), 9090) {
		t.Error("a reaches 198.51.100.1:9090; only 8000-8080 is allowed")
	}
	if reaches(pp.a, pp.host(internetIP2), 8080) {
		t.Error("a reaches 198.51.100.2, the ipBlock's except")
	}
	if reaches(pp.a, pp.host(primaryIP), 8081) {
		t.Error("a reaches its node's IPv4 address, which no policy allows")
	}
	if !reaches(pp.a, pp.c, 8080) {
		t.Error("a cannot reach pod c over IPv6, which its egress allows")
	}
	// b has an egress veth too and no egress policy: open.
	for _, to := range []testPod{pp.host(internetIP2), pp.host(primaryIP)} {
		port := uint16(8080)
		if to.ns == pp.n.node {
			port = 8081
		}
		if !reaches(pp.b, to, port) {
			t.Errorf("b, not egress-isolated, cannot reach %s:%d", to.cfg.Addr, port)
		}
	}
	drops, err := pp.n.dp.PolicyDrops(testContext(t))
	if err != nil {
		t.Fatal(err)
	}
	if drops[pp.a.cfg.Addr].Egress == 0 {
		t.Errorf("drops = %v; want a's IPv4 egress drops counted as its egress drops", drops)
	}
}

// A policy whose only peers are pods (IPv6) allows no IPv4 destination:
// the pod is egress-isolated and nothing of IPv4 is named.
func TestAPodSelectorPeerAllowsNoIPv4Destination(t *testing.T) {
	pp := newV4EgressPods(t)
	serveTCP(t, pp.n.world, netip.AddrPortFrom(netip.MustParseAddr(internetIP), 8080))
	pp.set(t, pp.rules(&verdicts.Isolation{Allows: []verdicts.Allow{{Rule: "to c", Peers: only(pp.c)}}}))
	if reaches(pp.a, pp.host(internetIP), 8080) {
		t.Error("a reaches an IPv4 host though its egress allows pod c alone")
	}
	// Any peer (a rule with ports and no peers) is every IPv4 address too.
	pp.set(t, pp.rules(&verdicts.Isolation{Allows: []verdicts.Allow{{Rule: "any", AnyPeer: true, Ports: []verdicts.Port{{Protocol: verdicts.TCP, First: 8080, Last: 8080}}}}}))
	if !reaches(pp.a, pp.host(internetIP), 8080) {
		t.Error("a cannot reach an IPv4 host on the port an any-peer rule allows")
	}
}

// Replies leave through the egress veth: the node connects to an
// egress-isolated pod's 169.254.172.x address, and the pod's answers
// (judged at the node's input hook) pass.
func TestIPv4RepliesOfAnEgressIsolatedPodPass(t *testing.T) {
	pp := newV4EgressPods(t)
	serveTCP(t, pp.a.ns, netip.AddrPortFrom(pp.a4.cfg.Addr, 8080))
	pp.set(t, pp.rules(&verdicts.Isolation{}))
	if !reaches(pp.host(primaryIP), pp.a4, 8080) {
		t.Error("the node cannot reach a's egress address: a's replies must pass its egress isolation")
	}
	serveTCP(t, pp.n.world, netip.AddrPortFrom(netip.MustParseAddr(internetIP), 8080))
	if reaches(pp.a, pp.host(internetIP), 8080) {
		t.Error("a reaches an IPv4 host though its egress allows nothing")
	}
}

func TestAChangedPolicyCutsAnEstablishedIPv4EgressConnectionItNoLongerAllows(t *testing.T) {
	pp := newV4EgressPods(t)
	pp.set(t, pp.rules(&verdicts.Isolation{Allows: []verdicts.Allow{{Rule: "one", Peers: []netip.Prefix{netip.MustParsePrefix(internetIP + "/32")}}}}))
	conn := openEcho(t, pp.a, pp.host(internetIP), 7070)
	if !conn.flows("first") {
		t.Fatal("the allowed IPv4 connection does not flow")
	}
	pp.set(t, pp.rules(&verdicts.Isolation{Allows: []verdicts.Allow{{Rule: "two",
		Peers: []netip.Prefix{netip.MustParsePrefix("198.51.100.0/24")}, Ports: []verdicts.Port{{Protocol: verdicts.TCP}}}}}))
	if !conn.flows("second") {
		t.Error("a rewrite that still allows the IPv4 connection cut it")
	}
	pp.set(t, pp.rules(&verdicts.Isolation{Allows: []verdicts.Allow{{Rule: "three", Peers: []netip.Prefix{netip.MustParsePrefix(internetIP2 + "/32")}}}}))
	if conn.flows("third") {
		t.Error("the IPv4 connection still flows after a policy that no longer allows it")
	}
}

// The entry is written before the veth exists (the agent writes it during
// vpcnet's part of the ADD, before the egress plugin runs): the pod's
// first IPv4 packet meets its verdicts.
func TestAnEgressVethsVerdictsAreInForceBeforeItExists(t *testing.T) {
	pp := newV4EgressNode(t)
	pp.vethA = EgressV4VethName("vpcnet", "ctr-late", "eth0")
	pp.set(t, pp.rules(&verdicts.Isolation{}))
	serveTCP(t, pp.n.world, netip.AddrPortFrom(netip.MustParseAddr(internetIP), 8080))
	if _, err := pp.n.dp.AddEgressV4(testContext(t), EgressV4Config{
		NetNS: pp.a.ns.Path(), IfName: "v4if0", HostVethName: pp.vethA,
		Addr: netip.MustParsePrefix("169.254.172.20/22"), Gateway: netip.MustParseAddr(egressGW),
		Routes: []netip.Prefix{netip.MustParsePrefix("0.0.0.0/0")},
		SNAT:   EgressSNAT{NodeIP: netip.MustParseAddr(primaryIP)}, Owner: EgressV4Owner("vpcnet", "ctr-late", "eth0"),
	}); err != nil {
		t.Fatal(err)
	}
	if reaches(pp.a, pp.host(internetIP), 8080) {
		t.Error("a's first IPv4 connection passed: its egress veth's entry, written before the veth, did not hold")
	}
}

// Table ip of an IPv6 node reads back as written; a restarted agent's
// Dataplane finds it holds the rules and writes nothing; nothing
// isolated removes it.
func TestTheIPv4EgressPolicyTableSurvivesARestartAndGoesWhenNothingIsIsolated(t *testing.T) {
	pp := newV4EgressPods(t)
	rs := pp.rules(&verdicts.Isolation{Allows: []verdicts.Allow{{Rule: "default/p egress[0]",
		Peers: []netip.Prefix{netip.MustParsePrefix("203.0.113.0/24"), netip.MustParsePrefix("2600:1f14::/32")},
		Ports: []verdicts.Port{{Protocol: verdicts.UDP, First: 53, Last: 53}}}}})
	if err := pp.n.dp.SetPolicy(testContext(t), rs, true); err != nil {
		t.Fatal(err)
	}
	text := strings.Join(listFamilyTable(t, pp.n.node, "ip", PolicyTable, false), "\n")
	for _, want := range []string{
		"ct direction reply accept",
		"iifname vmap @egress-v4",
		`"` + pp.vethA + `" : jump out-default/pol-a`,
		"ip daddr @peers-",
		"203.0.113.0/24",
		"udp dport 53 return",
		`counter name "drop-out-default/pol-a" drop`,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("table ip %s lacks %q:\n%s", PolicyTable, want, text)
		}
	}
	if strings.Contains(text, "2600:1f14") {
		t.Errorf("table ip holds an IPv6 peer:\n%s", text)
	}
	again, err := New(Options{NetNS: pp.n.node.Path(), IPv6Policy: true, EgressV4Policy: true, PollInterval: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if err := again.SetPolicy(testContext(t), rs, true); err != nil {
		t.Fatal(err)
	}
	if w := again.policyWrites.Load(); w != 0 {
		t.Errorf("a restarted Dataplane wrote %d times over tables that hold its rules", w)
	}
	// The pod's egress opens: its IPv6 chain stays (ingress), the IPv4
	// table goes; so it does on a node without IPv4 egress.
	without, err := New(Options{NetNS: pp.n.node.Path(), IPv6Policy: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := without.SetPolicy(testContext(t), rs, true); err != nil {
		t.Fatal(err)
	}
	if got := listFamilyTable(t, pp.n.node, "ip", PolicyTable, false); len(got) != 0 {
		t.Errorf("a node without IPv4 egress left table ip %s:\n%s", PolicyTable, strings.Join(got, "\n"))
	}
	if err := again.SetPolicy(testContext(t), rs, true); err != nil {
		t.Fatal(err)
	}
	open := verdicts.Ruleset{Pods: []verdicts.PodRules{{Pod: ref(pp.a, "pol-a"), Ingress: &verdicts.Isolation{}, EgressV4Veth: pp.vethA}}}
	if err := again.SetPolicy(testContext(t), open, false); err != nil {
		t.Fatal(err)
	}
	if got := listFamilyTable(t, pp.n.node, "ip", PolicyTable, false); len(got) != 0 {
		t.Errorf("no pod egress-isolated, yet table ip %s is left:\n%s", PolicyTable, strings.Join(got, "\n"))
	}
}

// The ADD's fast path: a pod bound to the node has its chain before its
// Add (no veth yet), and the Add adds its veth's map entry alone,
// without rewriting the table.
func TestAnAddOfABoundPodAddsOnlyItsEgressVethsMapEntry(t *testing.T) {
	pp := newV4EgressPods(t)
	serveTCP(t, pp.n.world, netip.AddrPortFrom(netip.MustParseAddr(internetIP), 8080))
	iso := &verdicts.Isolation{Allows: []verdicts.Allow{{Rule: "default/out egress[0]", Peers: []netip.Prefix{netip.MustParsePrefix(internetIP2 + "/32")}}}}
	bound := ref(pp.a, "pol-a")
	bound.IP = netip.Addr{}
	pp.set(t, verdicts.Ruleset{Pods: []verdicts.PodRules{{Pod: bound, Egress: iso}}})
	if !reaches(pp.a, pp.host(internetIP), 8080) {
		t.Fatal("a is judged before its veth is in the map")
	}
	rewrites, writes := pp.n.dp.policyV4Rewrites.Load(), pp.n.dp.policyWrites.Load()
	pp.set(t, pp.rules(iso))
	if got := pp.n.dp.policyV4Rewrites.Load(); got != rewrites {
		t.Errorf("the ADD's write rewrote table ip whole (%d rewrites, want %d)", got, rewrites)
	}
	if got := pp.n.dp.policyWrites.Load(); got != writes+1 {
		t.Errorf("the ADD made %d writes, want 1", got-writes)
	}
	if reaches(pp.a, pp.host(internetIP), 8080) {
		t.Error("a reaches 198.51.100.1 after its Add; its egress allows 198.51.100.2 alone")
	}
	// Its Del: the entry goes, the chain stays while the pod is bound.
	pp.set(t, verdicts.Ruleset{Pods: []verdicts.PodRules{{Pod: bound, Egress: iso}}})
	if got := pp.n.dp.policyV4Rewrites.Load(); got != rewrites {
		t.Errorf("the DEL's write rewrote table ip whole")
	}
	if !reaches(pp.a, pp.host(internetIP), 8080) {
		t.Error("a's veth is still judged after its entry went")
	}
}

// Someone deletes the table (or a chain) between two writes: the ADD's
// map entry, sent without reading the table, is refused, and the table is
// read and written whole; the pod is judged.
func TestAnAddAfterTheIPv4EgressTableWasDeletedRepairsIt(t *testing.T) {
	pp := newV4EgressPods(t)
	serveTCP(t, pp.n.world, netip.AddrPortFrom(netip.MustParseAddr(internetIP), 8080))
	iso := &verdicts.Isolation{}
	bound := ref(pp.a, "pol-a")
	bound.IP = netip.Addr{}
	pp.set(t, verdicts.Ruleset{Pods: []verdicts.PodRules{{Pod: bound, Egress: iso}}})
	nft(t, pp.n.node, "delete table ip "+PolicyTable+"\n")
	pp.set(t, pp.rules(iso))
	if reaches(pp.a, pp.host(internetIP), 8080) {
		t.Error("a reaches an IPv4 host after its Add over a deleted table; its egress allows nothing")
	}
}

// A pod aws-node's egress-cni wired before a switch-over has a veth of a
// random name: host-local's allocation and the node's route to its
// address find it by sandbox, and its IPv4 egress is judged by its
// verdicts as a pod vpcnet wired.
func TestAnEgressVethAWSNodeNamedIsFoundByItsSandboxAndJudged(t *testing.T) {
	pp := newV4EgressNode(t)
	const old, sandbox = "veth1f2e3d4c", "0123456789abcdef"
	if _, err := pp.n.dp.AddEgressV4(testContext(t), EgressV4Config{
		NetNS: pp.a.ns.Path(), IfName: "v4if0", HostVethName: old,
		Addr: netip.MustParsePrefix("169.254.172.30/22"), Gateway: netip.MustParseAddr(egressGW),
		Routes: []netip.Prefix{netip.MustParsePrefix("0.0.0.0/0")},
		SNAT:   EgressSNAT{NodeIP: netip.MustParseAddr(primaryIP)}, Owner: "aws-cni/" + sandbox + "/eth0",
	}); err != nil {
		t.Fatal(err)
	}
	// host-local's files as it writes them: "ID\r\nifname" per address.
	dir := t.TempDir()
	files := map[string]string{
		"aws-cni/169.254.172.30":     sandbox + "\r\neth0",
		"aws-cni/169.254.172.31":     "gone-sandbox\r\neth0", // no route: its pod is gone
		"aws-cni/last_reserved_ip.0": "169.254.172.31",
		"aws-cni/lock":               "",
	}
	for name, content := range files {
		if err := os.MkdirAll(filepath.Join(dir, filepath.Dir(name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := pp.n.dp.EgressV4VethsByContainer(testContext(t), dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[sandbox] != old {
		t.Fatalf("egress veths by sandbox %v, want %s: %s alone", got, sandbox, old)
	}
	if none, err := pp.n.dp.EgressV4VethsByContainer(testContext(t), filepath.Join(dir, "missing")); err != nil || len(none) != 0 {
		t.Errorf("a missing directory: %v, %v; want nothing and no error", none, err)
	}
	serveTCP(t, pp.n.world, netip.AddrPortFrom(netip.MustParseAddr(internetIP), 8080))
	if !reaches(pp.a, pp.host(internetIP), 8080) {
		t.Fatal("the pod aws-node wired cannot reach the internet host; the check below would prove nothing")
	}
	pp.vethA = got[sandbox]
	pp.set(t, pp.rules(&verdicts.Isolation{}))
	if reaches(pp.a, pp.host(internetIP), 8080) {
		t.Error("the egress-isolated pod aws-node wired reaches an IPv4 host through its randomly named veth")
	}
}
