package dataplane

import (
	"net/netip"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/google/nftables/expr"

	"github.com/vpcnet/vpcnet/netpol"
)

// Rendering tests: no root, no kernel.

func mustModel(t *testing.T, rs netpol.Ruleset, logDrops bool) *policyModel {
	t.Helper()
	m, err := policyModelOf(rs, logDrops)
	if err != nil {
		t.Fatalf("policyModelOf: %v", err)
	}
	return m
}

func podRef(ip string) netpol.PodRef {
	return netpol.PodRef{Namespace: "shop", Name: "web-" + ip, IP: netip.MustParseAddr(ip)}
}

func prefixes(ss ...string) []netip.Prefix {
	var out []netip.Prefix
	for _, s := range ss {
		out = append(out, netip.MustParsePrefix(s))
	}
	return out
}

func TestTheIPv4TableLeavesIPv6PeersOutAndRefusesIPv6OrSharedPodAddresses(t *testing.T) {
	m := mustModel(t, netpol.Ruleset{Pods: []netpol.PodRules{{Pod: podRef("10.0.0.5"),
		Ingress: &netpol.Isolation{Allows: []netpol.Allow{
			{Rule: "v6 only", Peers: prefixes("fd00::/64")},
			{Rule: "both", Peers: prefixes("fd00::/64", "10.3.0.0/16", "fd01::/64")},
		}}}}}, false)
	c := m.chains["in-10.0.0.5"]
	if len(c.rules) != 2 || c.rules[0].comment != "both" {
		t.Errorf("rules %+v: want the IPv6-only allow left out (it allows nothing here) and the other kept", c.rules)
	}
	if len(m.sets) != 1 {
		t.Errorf("sets %v, want one of 10.3.0.0/16", m.sets)
	}
	for name, elems := range m.sets {
		if len(elems) != 2 || netip.AddrFrom4([4]byte(elems[0].Key)) != netip.MustParseAddr("10.3.0.0") {
			t.Errorf("set %s = %v, want 10.3.0.0/16 alone", name, elems)
		}
	}
	v6 := netpol.Ruleset{Pods: []netpol.PodRules{{Pod: netpol.PodRef{Namespace: "a", Name: "b", IP: netip.MustParseAddr("fd00::5")}, Ingress: &netpol.Isolation{}}}}
	if _, err := policyModelOf(v6, false); err == nil {
		t.Error("an IPv6 pod was rendered into the ip table")
	}
	twice := netpol.Ruleset{Pods: []netpol.PodRules{{Pod: podRef("10.0.0.5"), Ingress: &netpol.Isolation{}}, {Pod: podRef("10.0.0.5"), Egress: &netpol.Isolation{}}}}
	if _, err := policyModelOf(twice, false); err == nil {
		t.Error("two pods at one address were rendered")
	}
}

func TestLongNamesStillFitCommentsAndLogPrefixes(t *testing.T) {
	ns := strings.Repeat("n", 63)
	name := strings.Repeat("p", 250) + "é" // a two-byte character where the cut falls
	rule := ns + "/" + strings.Repeat("q", 253) + " ingress[0]"
	m := mustModel(t, netpol.Ruleset{Pods: []netpol.PodRules{{
		Pod:     netpol.PodRef{Namespace: ns, Name: name, IP: netip.MustParseAddr("10.0.0.5")},
		Ingress: &netpol.Isolation{Allows: []netpol.Allow{{Rule: rule, AnyPeer: true, Ports: []netpol.Port{{Protocol: netpol.TCP, First: 80, Last: 80}}}}},
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
