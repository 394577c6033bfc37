package dataplane

import (
	"net/netip"
	"strings"
	"testing"
)

func mustPrefix(s string) netip.Prefix { return netip.MustParsePrefix(s) }

func TestEveryHostRuleCarriesAnOwnerCommentThatFitsNftables(t *testing.T) {
	for _, external := range []bool{false, true} {
		chains := desiredChains(hostRules{
			primaryIf: "ens5", primaryIP: netip.MustParseAddr("10.0.0.10"),
			vpcCIDRs: []netip.Prefix{mustPrefix("10.0.0.0/16")}, excluded: []netip.Prefix{mustPrefix("172.16.0.0/12")},
			externalSNAT: external, vethPrefix: "eni", mark: 0x80, denyPodIMDS: true,
		})
		chains = append(chains, podIMDSChains(hostRules{vethPrefix: "eni", denyPodIMDS: true}, imdsV6)...)
		for _, c := range chains {
			for _, r := range c.rules {
				// nft limits a comment to 128 bytes.
				if r.comment == "" || len(ownerComment+r.comment) > 128 {
					t.Errorf("chain %s: comment %q is empty or longer than 128 bytes", c.name, r.comment)
				}
				if len(r.exprs) == 0 {
					t.Errorf("chain %s: rule %q has no expressions", c.name, r.comment)
				}
			}
		}
	}
}

func TestConnmarkWithSeveralBitsRestoresEachBit(t *testing.T) {
	chains := desiredChains(hostRules{
		primaryIf: "eth0", primaryIP: netip.MustParseAddr("10.0.0.10"),
		vpcCIDRs: []netip.Prefix{mustPrefix("10.0.0.0/16")}, vethPrefix: "eni", mark: 0x180,
	})
	var restores []string
	for _, r := range chains[0].rules {
		if strings.HasPrefix(r.comment, "restore mark") {
			restores = append(restores, r.comment)
		}
	}
	want := []string{
		"restore mark 0x80: clear on replies from pods",
		"restore mark 0x80: set on replies from pods",
		"restore mark 0x100: clear on replies from pods",
		"restore mark 0x100: set on replies from pods",
	}
	if strings.Join(restores, "|") != strings.Join(want, "|") {
		t.Errorf("restore rules = %q, want %q", restores, want)
	}
}
