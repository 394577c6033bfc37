package doctor

import (
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/vpcnet/vpcnet/checkpoint"
)

// healthy6 is healthy() as an IPv6 node in aws-node's IPv6 mode: a /80
// on the primary ENI in a dual-stack subnet, the node's own IPv6 address
// in EC2 and IMDS, two IPv6 pods, and IPv4 egress chained with its SNAT.
func healthy6() Facts {
	f := healthy()
	settings := map[string]string{"ENABLE_IPv6": "true", "ENABLE_IPv4": "false", "ENABLE_PREFIX_DELEGATION": "true", "ENABLE_V4_EGRESS": "true"}
	for k, v := range settings {
		f.Agent.Config[k] = v
	}
	pod1, pod2 := netip.MustParseAddr("2600:1f14:abc:de01:1234::1"), netip.MustParseAddr("2600:1f14:abc:de01:1234::2")
	f.Checkpoint.Entries = []checkpoint.Entry{{Addr: pod1}, {Addr: pod2}}
	f.Host.PodRoutes = []PodRoute{{Addr: pod1, Dev: "eni1"}, {Addr: pod2, Dev: "eni2"}}
	f.Host.Chains = append(f.Host.Chains, NFTChain{Family: "ip", Table: egressV4Table, Chain: "nat-postrouting"})
	f.CNI.Plugins = []string{"vpcnet", "vpcnet-egress-v4"}
	eni := &f.EC2.ENIs[0]
	eni.Secondary = nil
	eni.IPv6Addrs = []netip.Addr{netip.MustParseAddr("2600:1f14:abc:de01::4")}
	eni.IPv6Prefixes = []netip.Prefix{netip.MustParsePrefix("2600:1f14:abc:de01:1234::/80")}
	f.EC2.Subnets[0].IPv6CIDRs = []netip.Prefix{netip.MustParsePrefix("2600:1f14:abc:de01::/64")}
	f.IMDS.MAC = "0e:00:00:00:00:01"
	f.IMDS.IPv6s = eni.IPv6Addrs
	f.IMDS.IPv6Prefixes = eni.IPv6Prefixes
	return f
}

func TestHealthyIPv6NodeHasNoFinding(t *testing.T) {
	if r := Diagnose(healthy6()); len(r.Findings) != 0 {
		t.Fatalf("findings on a healthy IPv6 node: %+v", r.Findings)
	}
}

// The same facts on an IPv4 node (ENABLE_IPv6 unset) are no IPv6
// finding: an IPv4 node's primary ENI has no /80 and needs none.
func TestAnIPv4NodeGetsNoIPv6Finding(t *testing.T) {
	f := healthy()
	f.Agent.Config["ENABLE_V4_EGRESS"] = "false"
	if got := ipv6Findings(f); len(got) != 0 {
		t.Fatalf("IPv6 findings on an IPv4 node: %+v", got)
	}
}

func TestEachBrokenIPv6NodeGetsItsFinding(t *testing.T) {
	tests := []struct {
		name   string
		break_ func(f *Facts)
		id     string
		sev    Severity
		// evidence and fix are substrings of the finding's evidence and
		// fix (or what).
		evidence, fix string
	}{
		{"no /80 on the primary ENI", func(f *Facts) {
			f.EC2.ENIs[0].IPv6Prefixes = nil
			f.Agent.Status.LastEC2Error = "AssignIpv6Addresses: UnauthorizedOperation"
		}, "ipv6-prefix-missing", Error, "eni-1 (device 0) has no IPv6 prefix", "ec2:AssignIpv6Addresses"},
		{"IMDS serves no IPv6 for the primary MAC", func(f *Facts) {
			f.IMDS.IPv6s = nil
		}, "imds-no-ipv6", Error, "macs/0e:00:00:00:00:01/ipv6s: none", "assign-ipv6-addresses --network-interface-id eni-1 --ipv6-address-count 1"},
		{"the node's subnet has no IPv6 CIDR", func(f *Facts) {
			f.EC2.Subnets[0].IPv6CIDRs = nil
			f.EC2.ENIs[0].IPv6Prefixes, f.EC2.ENIs[0].IPv6Addrs, f.IMDS.IPv6s = nil, nil, nil
		}, "subnet-no-ipv6", Error, "subnet-a (10.0.0.0/24): no associated IPv6 block", "associate-subnet-cidr-block --subnet-id subnet-a"},
		{"IPv4 egress turned off", func(f *Facts) {
			f.Agent.Config["ENABLE_V4_EGRESS"] = "false"
			f.CNI.Plugins = []string{"vpcnet"}
		}, "ipv6-pods-no-ipv4", Warning, "ENABLE_V4_EGRESS=false", "ENABLE_V4_EGRESS=true"},
		{"IPv4 egress on but not chained", func(f *Facts) {
			f.CNI.Plugins = []string{"vpcnet"}
		}, "ipv6-pods-no-ipv4", Error, "10-vpcnet.conflist chains vpcnet, without vpcnet-egress-v4", "chains it after vpcnet"},
		{"the egress plugin not installed", func(f *Facts) {
			f.CNI.MissingPlugins = []string{"vpcnet-egress-v4"}
		}, "ipv6-pods-no-ipv4", Error, "vpcnet-egress-v4 is not installed in /opt/cni/bin", "init container"},
		{"the egress SNAT table missing", func(f *Facts) {
			f.Host.Chains = slices.DeleteFunc(f.Host.Chains, func(c NFTChain) bool { return c.Table == egressV4Table })
		}, "ipv6-pods-no-ipv4", Error, "no table ip vpcnet-egress-v4", "recreate pods"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := healthy6()
			tt.break_(&f)
			r := Diagnose(f)
			i := slices.IndexFunc(r.Findings, func(x Finding) bool { return x.ID == tt.id })
			if i < 0 {
				t.Fatalf("no finding %s; got %+v", tt.id, r.Findings)
			}
			got := r.Findings[i]
			if got.Severity != tt.sev {
				t.Errorf("severity %s, want %s", got.Severity, tt.sev)
			}
			if ev := strings.Join(got.Evidence, "\n"); !strings.Contains(ev, tt.evidence) {
				t.Errorf("evidence %q lacks %q", ev, tt.evidence)
			}
			if !strings.Contains(got.Fix, tt.fix) && !strings.Contains(got.What, tt.fix) {
				t.Errorf("fix %q (what %q) lacks %q", got.Fix, got.What, tt.fix)
			}
		})
	}
}

// A subnet without IPv6 explains the missing prefix and node address:
// doctor names that cause alone rather than three findings for one fix.
func TestASubnetWithoutIPv6IsTheOnlyFindingForWhatItCauses(t *testing.T) {
	f := healthy6()
	f.EC2.Subnets[0].IPv6CIDRs = nil
	f.EC2.ENIs[0].IPv6Prefixes, f.EC2.ENIs[0].IPv6Addrs, f.IMDS.IPv6s = nil, nil, nil
	var ids []string
	for _, x := range Diagnose(f).Findings {
		ids = append(ids, x.ID)
	}
	if slices.Contains(ids, "ipv6-prefix-missing") || slices.Contains(ids, "imds-no-ipv6") || !slices.Contains(ids, "subnet-no-ipv6") {
		t.Fatalf("findings %v; want subnet-no-ipv6 without ipv6-prefix-missing or imds-no-ipv6", ids)
	}
}

// An IPv6 pod's address lies in the primary ENI's /80, not among its
// secondary addresses: it is attached, and no checkpoint finding says
// otherwise.
func TestIPv6PodsInTheNodesPrefixAreOnAnAttachedENI(t *testing.T) {
	f := healthy6()
	if got := checkpointNotOnENIs(f); len(got) != 0 {
		t.Fatalf("IPv6 pods in the /80 reported as not in EC2: %+v", got)
	}
}
