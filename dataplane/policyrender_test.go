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

func TestLongNamesStillFitCommentsAndLogPrefixes(t *testing.T) {
	ns := strings.Repeat("n", 63)
	name := strings.Repeat("p", 250) + "é" // a two-byte character where the cut falls
	rule := ns + "/" + strings.Repeat("q", 253) + " ingress[0]"
	m := policyModelOf(netpol.Ruleset{Pods: []netpol.PodRules{{
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
