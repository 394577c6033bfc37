package e2e

import (
	"slices"
	"strings"
	"testing"

	"github.com/vpcnet/vpcnet/doctor"
)

// doctor on two IPv6 nodes of the dual-stack local cloud, each with a
// pod: it reads the /80, the subnet's IPv6 block, IMDS's IPv6 address
// and the egress SNAT from the real sources (the IMDS source names the
// node's IPv6 address), so on the node with
// ENABLE_V4_EGRESS on it finds nothing, and on the one with it off it
// says IPv6 pods cannot reach IPv4 addresses, and nothing else.
func TestDoctorOnIPv6NodesFindsNothingButIPv4EgressTurnedOff(t *testing.T) {
	noEgress := append(slices.Clone(ipv6NodeEnv), "ENABLE_V4_EGRESS=false")
	c := startStory(t, dualStack, map[string][]string{"i-a": ipv6NodeEnv, "i-b": noEgress}, true)
	for _, n := range c.Nodes {
		if _, err := n.AddPod(t.Context(), "v6-doctor-"+n.ID); err != nil {
			t.Fatal(err)
		}
	}
	healthy := runDoctor(t, c.Nodes[0], "--skip", "kubernetes")
	if healthy.code != 0 || len(healthy.report.Findings) != 0 {
		t.Fatalf("doctor on a healthy IPv6 node: exit %d\n%s%s", healthy.code, healthy.out, healthy.stderr)
	}
	// IMDS's IPv6 address is read, not missed: the source says which.
	eni, _ := primaryENI(t, c, c.Nodes[0].ID)
	i := slices.IndexFunc(healthy.report.Sources, func(s doctor.Source) bool { return s.Name == doctor.SourceIMDS })
	if i < 0 || len(eni.IPv6Addresses) == 0 || !strings.Contains(healthy.report.Sources[i].Detail, "IPv6 "+eni.IPv6Addresses[0].String()) {
		t.Errorf("doctor's IMDS source does not name the node's IPv6 address %v:\n%s", eni.IPv6Addresses, healthy.out)
	}
	off := runDoctor(t, c.Nodes[1], "--skip", "kubernetes")
	off.wantFinding(t, "ipv6-pods-no-ipv4", doctor.Warning, "ENABLE_V4_EGRESS=false", "ENABLE_V4_EGRESS=true")
	if len(off.report.Findings) != 1 {
		t.Errorf("doctor on an IPv6 node without IPv4 egress: want only ipv6-pods-no-ipv4\n%s", off.out)
	}
}
