package dataplane

import (
	"fmt"
	"net/netip"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"

	"github.com/vpcnet/vpcnet/internal/heaptest"
	"github.com/vpcnet/vpcnet/verdicts"
)

// Rendering tests: no root, no kernel.

func mustModel(t *testing.T, rs verdicts.Ruleset, logDrops bool) *policyModel {
	t.Helper()
	m, err := policyModelOf(rs, logDrops)
	if err != nil {
		t.Fatalf("policyModelOf: %v", err)
	}
	return m
}

func podRef(ip string) verdicts.PodRef {
	return verdicts.PodRef{Namespace: "shop", Name: "web-" + ip, IP: netip.MustParseAddr(ip)}
}

func prefixes(ss ...string) []netip.Prefix {
	var out []netip.Prefix
	for _, s := range ss {
		out = append(out, netip.MustParsePrefix(s))
	}
	return out
}

func TestTheIPv4TableLeavesIPv6PeersOutAndRefusesIPv6OrSharedPodAddresses(t *testing.T) {
	m := mustModel(t, verdicts.Ruleset{Pods: []verdicts.PodRules{{Pod: podRef("10.0.0.5"),
		Ingress: &verdicts.Isolation{Allows: []verdicts.Allow{
			{Rule: "v6 only", Peers: prefixes("fd00::/64")},
			{Rule: "both", Peers: prefixes("fd00::/64", "10.3.0.0/16", "fd01::/64")},
		}}}}}, false)
	c := m.chains["in-shop/web-10.0.0.5"]
	if len(c.rules) != 2 || c.rules[0].comment != "both" {
		t.Errorf("rules %+v: want the IPv6-only allow left out (it allows nothing here) and the other kept", c.rules)
	}
	if len(m.sets) != 1 {
		t.Errorf("sets %v, want one of 10.3.0.0/16", m.sets)
	}
	for name, ranges := range m.sets {
		if elems := setElements(policyIPv4, ranges); len(elems) != 2 || netip.AddrFrom4([4]byte(elems[0].Key)) != netip.MustParseAddr("10.3.0.0") {
			t.Errorf("set %s = %v, want 10.3.0.0/16 alone", name, elems)
		}
	}
	v6 := verdicts.Ruleset{Pods: []verdicts.PodRules{{Pod: verdicts.PodRef{Namespace: "a", Name: "b", IP: netip.MustParseAddr("fd00::5")}, Ingress: &verdicts.Isolation{}}}}
	if _, err := policyModelOf(v6, false); err == nil {
		t.Error("an IPv6 pod was rendered into the ip table")
	}
	twice := verdicts.Ruleset{Pods: []verdicts.PodRules{{Pod: podRef("10.0.0.5"), Ingress: &verdicts.Isolation{}}, {Pod: podRef("10.0.0.5"), Egress: &verdicts.Isolation{}}}}
	if _, err := policyModelOf(twice, false); err == nil {
		t.Error("two pods at one address were rendered")
	}
}

func TestLongNamesStillFitCommentsAndLogPrefixes(t *testing.T) {
	ns := strings.Repeat("n", 63)
	name := strings.Repeat("p", 250) + "é" // a two-byte character where the cut falls
	rule := ns + "/" + strings.Repeat("q", 253) + " ingress[0]"
	m := mustModel(t, verdicts.Ruleset{Pods: []verdicts.PodRules{{
		Pod:     verdicts.PodRef{Namespace: ns, Name: name, IP: netip.MustParseAddr("10.0.0.5")},
		Ingress: &verdicts.Isolation{Allows: []verdicts.Allow{{Rule: rule, AnyPeer: true, Ports: []verdicts.Port{{Protocol: verdicts.TCP, First: 80, Last: 80}}}}},
	}}}, true)
	for name, c := range m.chains {
		for _, r := range c.rules {
			if full := ownerComment + r.comment; len(full) > commentMax || !utf8.ValidString(full) || r.comment == "" {
				t.Errorf("chain %s: comment of %d bytes (valid UTF-8: %v): %q", name, len(full), utf8.ValidString(full), full)
			}
			for _, e := range r.exprs {
				if l, ok := e.(*expr.Log); ok {
					p := string(l.Data)
					if len(p) > logPrefixMax || !utf8.ValidString(p) || !strings.HasPrefix(p, "vpcnet-policy drop ingress "+ns+"/") || !strings.HasSuffix(p, ": ") {
						t.Errorf("log prefix of %d bytes: %q", len(p), p)
					}
				}
			}
		}
	}
	if got := truncateUTF8("aé", 2); got != "a" {
		t.Errorf("truncateUTF8 cut a character: %q", got)
	}
	if got := logPrefix("vpcnet-policy drop ingress default/web"); got != "vpcnet-policy drop ingress default/web: " {
		t.Errorf("short prefix changed: %q", got)
	}
}

func chainNamed(t *testing.T, spec tableSpec, name string) chainSpec {
	t.Helper()
	for _, c := range spec.chains {
		if c.name == name {
			return c
		}
	}
	t.Fatalf("no chain %s", name)
	return chainSpec{}
}

func setNamed(spec tableSpec, name string) (setSpec, bool) {
	for _, s := range spec.sets {
		if s.name == name {
			return s, true
		}
	}
	return setSpec{}, false
}

func TestRepliesPassBeforeAnyVerdictMapIsConsulted(t *testing.T) {
	spec := mustModel(t, verdicts.Ruleset{Pods: []verdicts.PodRules{{Pod: podRef("10.0.0.5"), Ingress: &verdicts.Isolation{}, Egress: &verdicts.Isolation{}}}}, false).spec()
	for _, tc := range []struct {
		chain    string
		hook     *nftables.ChainHook
		comments []string
	}{
		{"forward", nftables.ChainHookForward, []string{"replies of allowed connections", "ICMP errors of allowed connections", "a pod's egress", "a pod's ingress"}},
		// A pod's packets to its own node: egress only.
		{"input", nftables.ChainHookInput, []string{"replies of allowed connections", "ICMP errors of allowed connections", "a pod's egress"}},
	} {
		c := chainNamed(t, spec, tc.chain)
		if c.hook != tc.hook || c.priority != *nftables.ChainPriorityFilter || c.typ != nftables.ChainTypeFilter {
			t.Errorf("chain %s: hook %v priority %v type %v", c.name, c.hook, c.priority, c.typ)
		}
		var got []string
		for _, r := range c.rules {
			got = append(got, r.comment)
		}
		if strings.Join(got, "|") != strings.Join(tc.comments, "|") {
			t.Errorf("chain %s rules %q, want %q", tc.chain, got, tc.comments)
		}
	}
	for _, c := range spec.chains {
		if c.hook == nftables.ChainHookOutput {
			t.Errorf("chain %s hooks output: traffic from the node to its pods must never be judged", c.name)
		}
	}
}

func TestEachIsolatedDirectionGetsAChainAMapEntryAndACountedDrop(t *testing.T) {
	model := mustModel(t, verdicts.Ruleset{Pods: []verdicts.PodRules{
		{Pod: podRef("10.0.0.5"), Ingress: &verdicts.Isolation{}},
		{Pod: podRef("10.0.0.6"), Egress: &verdicts.Isolation{}},
	}}, false)
	spec := model.spec()
	want := map[string]string{
		policyMapIngress: "0a000005 : -3 in-shop/web-10.0.0.5",
		policyMapEgress:  "0a000006 : -3 out-shop/web-10.0.0.6",
	}
	for name, elems := range want {
		m, ok := setNamed(spec, name)
		if !ok || !m.isMap {
			t.Fatalf("no verdict map %s", name)
		}
		var got []string
		for _, e := range m.elems {
			got = append(got, elementKey(e, true))
		}
		if strings.Join(got, ",") != elems {
			t.Errorf("map %s = %q, want %q", name, got, elems)
		}
	}
	if strings.Join(spec.counters, ",") != "drop-in-shop/web-10.0.0.5,drop-out-shop/web-10.0.0.6" {
		t.Errorf("counters %q", spec.counters)
	}
	if spec.use() != 2+2+2+2 || model.use() != spec.use() {
		t.Errorf("use %d (the model says %d), want 8: two pod chains, two base chains, two maps, two counters", spec.use(), model.use())
	}
	for _, name := range []string{"in-shop/web-10.0.0.5", "out-shop/web-10.0.0.6"} {
		c := chainNamed(t, spec, name)
		if len(c.rules) != 1 {
			t.Fatalf("chain %s: %d rules, want only the drop (nothing allowed)", name, len(c.rules))
		}
		last := c.rules[0].exprs
		ref, ok := last[0].(*expr.Objref)
		if v, isV := last[len(last)-1].(*expr.Verdict); !ok || !isV || v.Kind != expr.VerdictDrop || ref.Name != "drop-"+name {
			t.Errorf("chain %s ends with %v, want counter drop-%s then drop", name, last, name)
		}
	}
}

func TestAnAllowReturnsSoThatTheDestinationsIngressStillJudges(t *testing.T) {
	m := mustModel(t, verdicts.Ruleset{Pods: []verdicts.PodRules{{Pod: podRef("10.0.0.5"),
		Egress: &verdicts.Isolation{Allows: []verdicts.Allow{{Rule: "shop/p egress[0]", AnyPeer: true}}}}}}, false)
	c := m.chains["out-shop/web-10.0.0.5"]
	// AnyPeer and every port: nothing to match, just return.
	if len(c.rules[0].exprs) != 1 || c.rules[0].exprs[0].(*expr.Verdict).Kind != expr.VerdictReturn {
		t.Errorf("allow of every peer on every port = %v, want a bare return", c.rules[0].exprs)
	}
}

func TestPortsMatchProtocolAndDestinationPortOrRange(t *testing.T) {
	m := mustModel(t, verdicts.Ruleset{Pods: []verdicts.PodRules{{Pod: podRef("10.0.0.5"),
		Ingress: &verdicts.Isolation{Allows: []verdicts.Allow{{AnyPeer: true, Ports: []verdicts.Port{
			{Protocol: verdicts.TCP, First: 80, Last: 80},
			{Protocol: verdicts.UDP, First: 5000, Last: 5100},
			{Protocol: verdicts.SCTP},
		}}}}}}}, false)
	c := m.chains["in-shop/web-10.0.0.5"]
	want := []string{"Meta Cmp Payload Cmp Verdict", "Meta Cmp Payload Range Verdict", "Meta Cmp Verdict"}
	for i, w := range want {
		var kinds []string
		for _, e := range c.rules[i].exprs {
			kinds = append(kinds, strings.TrimPrefix(fmt.Sprintf("%T", e), "*expr."))
		}
		if got := strings.Join(kinds, " "); got != w {
			t.Errorf("port rule %d = %s, want %s", i, got, w)
		}
	}
}

func TestPodsUnderOnePolicyShareOnePeerSetNamedByItsContent(t *testing.T) {
	var rs verdicts.Ruleset
	for i := range 100 {
		// Each pod its own slice, as from separate compilations.
		rs.Pods = append(rs.Pods, verdicts.PodRules{Pod: podRef(fmt.Sprintf("10.0.0.%d", i+1)),
			Ingress: &verdicts.Isolation{Allows: []verdicts.Allow{{Rule: "shop/p ingress[0]", Peers: prefixes("10.1.0.0/24", "10.2.0.7/32")}}}})
	}
	m := mustModel(t, rs, false)
	if len(m.sets) != 1 {
		t.Fatalf("%d peer sets for 100 pods under one policy, want 1", len(m.sets))
	}
	for name, ranges := range m.sets {
		var got []string
		for _, e := range setElements(policyIPv4, ranges) {
			got = append(got, elementKey(e, false))
		}
		if strings.Join(got, ",") != "0a010000,0a010100 end,0a020007,0a020008 end" {
			t.Errorf("set %s elements %q", name, got)
		}
		// The same peers beside another pod's: the same name, so that
		// a change elsewhere keeps the set.
		other := mustModel(t, verdicts.Ruleset{Pods: []verdicts.PodRules{
			{Pod: podRef("10.0.9.9"), Ingress: &verdicts.Isolation{Allows: []verdicts.Allow{{Peers: prefixes("10.9.9.9/32")}}}},
			{Pod: podRef("10.0.9.10"), Ingress: &verdicts.Isolation{Allows: []verdicts.Allow{{Peers: prefixes("10.1.0.0/25", "10.1.0.128/25", "10.2.0.7/32")}}}},
		}}, false)
		if _, ok := other.sets[name]; !ok {
			t.Errorf("the same peers in another Ruleset are not in set %s: %v", name, other.sets)
		}
	}
}

func TestAPeerListTheCompilerHandsAgainIsRenderedOnce(t *testing.T) {
	peers := []netip.Prefix{netip.MustParsePrefix("10.1.0.0/24"), netip.MustParsePrefix("10.2.0.7/32")}
	rs := verdicts.Ruleset{Pods: []verdicts.PodRules{{Pod: verdicts.PodRef{Namespace: "a", Name: "p", IP: netip.MustParseAddr("10.0.0.5")},
		Ingress: &verdicts.Isolation{Allows: []verdicts.Allow{{Rule: "r", Peers: peers}}}}}}
	var pr peerRenders
	first, err := pr.model(rs, false)
	if err != nil {
		t.Fatal(err)
	}
	second, err := pr.model(rs, false)
	if err != nil {
		t.Fatal(err)
	}
	if len(first.sets) != 1 || len(second.sets) != 1 {
		t.Fatalf("sets %v then %v; want one", first.sets, second.sets)
	}
	for name, ranges := range second.sets {
		if &ranges[0] != &first.sets[name][0] {
			t.Error("the same peer list was rendered again on the second write")
		}
	}
	// A different list with the same content is rendered, and named alike.
	again := append([]netip.Prefix(nil), peers...)
	rs.Pods[0].Ingress = &verdicts.Isolation{Allows: []verdicts.Allow{{Rule: "r", Peers: again}}}
	third, err := pr.model(rs, false)
	if err != nil {
		t.Fatal(err)
	}
	for name := range third.sets {
		if _, ok := first.sets[name]; !ok {
			t.Errorf("equal peers got another set name %s", name)
		}
	}
	if len(pr.last) != 1 {
		t.Errorf("the cache keeps %d lists; want only the one last used", len(pr.last))
	}
}

// Peer sets are kept between writes as address ranges, 8 bytes each,
// and become set elements only when written: at the scale the
// elements of the sets kept were half a megabyte of the agent's heap.
func TestAPeerSetIsKeptAsRangesAndWrittenAsIntervals(t *testing.T) {
	m := mustModel(t, verdicts.Ruleset{Pods: []verdicts.PodRules{{Pod: podRef("10.0.0.5"),
		Ingress: &verdicts.Isolation{Allows: []verdicts.Allow{{Rule: "r", Peers: prefixes("10.1.0.0/24", "10.2.0.7/32", "255.255.255.0/24")}}}}}}, false)
	for name, ranges := range m.sets {
		var got []string
		for _, e := range setElements(policyIPv4, ranges) {
			got = append(got, elementKey(e, false))
		}
		// The last range ends the address space: no interval end.
		if strings.Join(got, ",") != "0a010000,0a010100 end,0a020007,0a020008 end,ffffff00" {
			t.Errorf("set %s elements %q", name, got)
		}
	}
	if m.use() != m.spec().use() {
		t.Errorf("the model's use count %d is not its table's, %d", m.use(), m.spec().use())
	}

	const n = 4000
	var peers []netip.Prefix
	for i := range n {
		peers = append(peers, netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 1, byte(i >> 7), byte(i<<1) & 0xfe}), 32))
	}
	rs := verdicts.Ruleset{Pods: []verdicts.PodRules{{Pod: podRef("10.0.0.5"), Ingress: &verdicts.Isolation{Allows: []verdicts.Allow{{Rule: "r", Peers: peers}}}}}}
	var pr peerRenders
	before := heaptest.Live()
	m, err := pr.model(rs, false)
	if err != nil {
		t.Fatal(err)
	}
	kept := int64(heaptest.Live()) - int64(before)
	runtime.KeepAlive(m)
	runtime.KeepAlive(rs)
	if len(m.sets) != 1 {
		t.Fatalf("%d sets, want 1", len(m.sets))
	}
	if kept > n*24 {
		t.Errorf("a model and its renders keep %d bytes for a set of %d ranges (%d each); want them kept as ranges", kept, n, kept/n)
	}
}

// A write renders the chains whose rules changed and takes the others
// from the last model: an ADD renders its own pod's, not every pod's.
func TestAWriteRendersOnlyTheChainsThatChanged(t *testing.T) {
	iso := func(port uint16) *verdicts.Isolation {
		return &verdicts.Isolation{Allows: []verdicts.Allow{{Rule: "shop/p ingress[0]", Peers: prefixes("10.1.0.0/24"),
			Ports: []verdicts.Port{{Protocol: verdicts.TCP, First: port, Last: port}}}}}
	}
	rs := func(port uint16, name string) verdicts.Ruleset {
		second := podRef("10.0.0.6")
		second.Name = name
		return verdicts.Ruleset{Pods: []verdicts.PodRules{{Pod: podRef("10.0.0.5"), Ingress: iso(80)}, {Pod: second, Ingress: iso(port)}}}
	}
	var pr peerRenders
	first, err := pr.model(rs(80, "b"), true)
	if err != nil {
		t.Fatal(err)
	}
	last := first
	lastChain := "in-shop/b"
	for _, next := range []struct {
		what, chain string
		rs          verdicts.Ruleset
	}{
		{"a port changed", "in-shop/b", rs(443, "b")},
		{"the pod renamed", "in-shop/c", rs(443, "c")},
	} {
		m, err := pr.model(next.rs, true)
		if err != nil {
			t.Fatal(err)
		}
		if &m.chains["in-shop/web-10.0.0.5"].rules[0] != &first.chains["in-shop/web-10.0.0.5"].rules[0] {
			t.Errorf("%s: the unchanged pod's chain was rendered again", next.what)
		}
		fresh := mustModel(t, next.rs, true).chains[next.chain]
		got := m.chains[next.chain]
		if got.digest == last.chains[lastChain].digest {
			t.Errorf("%s: the changed pod's chain has its last digest", next.what)
		}
		if got.digest != fresh.digest || !reflect.DeepEqual(got.rules, fresh.rules) {
			t.Errorf("%s: the changed pod's chain is not what a fresh render makes", next.what)
		}
		last, lastChain = m, next.chain
	}
}

// The compiler hands a pod's verdicts again, the same Isolation, while
// nothing they depend on changes: a write then takes the pod's chain from
// the last model without hashing it. Only its address (an ADD, a DEL)
// may differ. A new Isolation is hashed, and one that says the same
// keeps the rules rendered before.
func TestAnIsolationHandedAgainIsNotHashedAgain(t *testing.T) {
	iso := &verdicts.Isolation{Allows: []verdicts.Allow{{Rule: "shop/p ingress[0]", Peers: prefixes("10.1.0.0/24"),
		Ports: []verdicts.Port{{Protocol: verdicts.TCP, First: 80, Last: 80}}}}}
	bound := podRef("10.0.0.5")
	bound.IP = netip.Addr{}
	var pr peerRenders
	first, err := pr.model(verdicts.Ruleset{Pods: []verdicts.PodRules{{Pod: bound, Ingress: iso, Egress: &verdicts.Isolation{}}}}, false)
	if err != nil {
		t.Fatal(err)
	}
	if pr.hashed != 2 {
		t.Fatalf("the first model hashed %d chains, want 2", pr.hashed)
	}
	egress := first.chains["out-shop/web-10.0.0.5"].from
	added, err := pr.model(verdicts.Ruleset{Pods: []verdicts.PodRules{{Pod: podRef("10.0.0.5"), Ingress: iso, Egress: egress}}}, false)
	if err != nil {
		t.Fatal(err)
	}
	if pr.hashed != 2 {
		t.Errorf("the pod's Add hashed %d chains again", pr.hashed-2)
	}
	fresh := mustModel(t, verdicts.Ruleset{Pods: []verdicts.PodRules{{Pod: podRef("10.0.0.5"), Ingress: iso, Egress: &verdicts.Isolation{}}}}, false)
	if !reflect.DeepEqual(withoutFrom(added), withoutFrom(fresh)) {
		t.Errorf("the model that reused the chains is not what a fresh one makes:\n%+v\n%+v", added, fresh)
	}
	if !added.onlyAddressesDiffer(first) || first.onlyAddressesDiffer(first) {
		t.Error("onlyAddressesDiffer does not tell the Add's model from the bound pod's")
	}
	same := &verdicts.Isolation{Allows: slices.Clone(iso.Allows)}
	again, err := pr.model(verdicts.Ruleset{Pods: []verdicts.PodRules{{Pod: podRef("10.0.0.5"), Ingress: same, Egress: egress}}}, false)
	if err != nil {
		t.Fatal(err)
	}
	if pr.hashed != 3 {
		t.Errorf("a new Isolation: %d chains hashed, want 1", pr.hashed-2)
	}
	if &again.chains["in-shop/web-10.0.0.5"].rules[0] != &first.chains["in-shop/web-10.0.0.5"].rules[0] {
		t.Error("an Isolation that says the same was rendered again")
	}
	if !again.same(added) {
		t.Error("the same verdicts in a new Isolation make another table")
	}
}

// withoutFrom is m's chains without what they were rendered from.
func withoutFrom(m *policyModel) map[string]podChain {
	out := map[string]podChain{}
	for name, ch := range m.chains {
		ch.from = nil
		out[name] = ch
	}
	return out
}

// A peer set's name is its content's: an IPv4 node's names are those
// the previous release wrote (so its first write after the upgrade finds
// the table as it wants it), and an IPv6 node keeps its ranges as
// 32 bytes each and writes them as ipv6_addr intervals.
func TestPeerSetNamesOutliveTheUpgradeAndIPv6SetsAreIntervalsToo(t *testing.T) {
	ps := prefixes("10.1.0.0/24", "10.2.0.7/32", "255.255.255.0/24", "fd00::/64")
	if got := renderPeers(policyIPv4, ps).name; got != "peers-54f279cfa84f839b" {
		t.Errorf("IPv4 set name %s, want the previous release's peers-54f279cfa84f839b", got)
	}
	r := renderPeers(policyIPv6, append(ps, netip.MustParsePrefix("ffff::/16")))
	if len(r.ranges) != 2*2*16 {
		t.Fatalf("IPv6 ranges %d bytes, want two ranges of 32", len(r.ranges))
	}
	var got []string
	for _, e := range setElements(policyIPv6, r.ranges) {
		got = append(got, elementKey(e, false))
	}
	want := "fd000000000000000000000000000000,fd000000000000010000000000000000 end,ffff0000000000000000000000000000"
	if strings.Join(got, ",") != want {
		t.Errorf("IPv6 set elements %q, want %s (the last range ends the address space: no interval end)", got, want)
	}
	m := (&peerRenders{fam: policyIPv6}).mustModel(t, verdicts.Ruleset{Pods: []verdicts.PodRules{{
		Pod: verdicts.PodRef{Namespace: "a", Name: "b", IP: netip.MustParseAddr("fd00::5")}, Ingress: &verdicts.Isolation{}}}})
	for _, s := range m.spec().sets {
		if s.keyType() != nftables.TypeIP6Addr {
			t.Errorf("set %s keyed by %s in table ip6", s.name, s.keyType().Name)
		}
	}
}

func (pr *peerRenders) mustModel(t *testing.T, rs verdicts.Ruleset) *policyModel {
	t.Helper()
	m, err := pr.model(rs, false)
	if err != nil {
		t.Fatal(err)
	}
	return m
}
