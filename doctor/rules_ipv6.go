package doctor

import (
	"fmt"
	"slices"
	"strings"

	"github.com/vpcnet/vpcnet/cniconf"
)

// egressV4Table is egressV4Table, the egress plugin's SNAT
// table (family ip); dataplane builds on Linux only, and doctor's rules
// everywhere.
const egressV4Table = "vpcnet-egress-v4"

// ipv6Findings: issue 27. An IPv6 node (ENABLE_IPv6=true) gives every
// pod an address of one /80 on its primary ENI, takes its own IPv6
// address from IMDS, and needs a subnet with an IPv6 block for both;
// its pods reach IPv4 only through the egress plugin and its SNAT.
func ipv6Findings(f Facts) []Finding {
	if !strings.EqualFold(f.setting("ENABLE_IPv6"), "true") {
		return nil
	}
	primary := primaryENI(f)
	// Without an IPv6 block in the subnet neither the prefix nor the
	// node's address can exist: name the cause alone.
	if out := subnetWithoutIPv6(f, primary); out != nil {
		return append(out, ipv4EgressFindings(f)...)
	}
	var out []Finding
	if primary != nil && len(primary.IPv6Prefixes) == 0 {
		ev := []string{fmt.Sprintf("%s (device 0) has no IPv6 prefix in EC2; IPv6 addresses: %s", primary.ID, addrsOrNone(primary.IPv6Addrs))}
		if e := f.Agent.Status.LastEC2Error; e != "" {
			ev = append(ev, "agent's last EC2 error: "+e)
		}
		out = append(out, Finding{
			ID: "ipv6-prefix-missing", Severity: Error,
			What:     "ENABLE_IPv6=true but the primary ENI " + primary.ID + " holds no IPv6 /80 prefix, so no pod on this node gets an address",
			Evidence: ev,
			Fix: "vpcnetd asks for it when it starts (AssignIpv6Addresses with Ipv6PrefixCount=1): check that the node's role may call ec2:AssignIpv6Addresses (deploy/iam-policy.json), that the instance type is Nitro, then restart vpcnetd; " +
				"or assign it by hand: aws ec2 assign-ipv6-addresses --network-interface-id " + primary.ID + " --ipv6-prefix-count 1",
		})
	}
	if m := f.IMDS; m != nil && m.MAC != "" && m.IPv6Err == "" && len(m.IPv6s) == 0 {
		eni := "the primary ENI"
		if primary != nil {
			eni = primary.ID
		}
		out = append(out, Finding{
			ID: "imds-no-ipv6", Severity: Error,
			What:     "ENABLE_IPv6=true but IMDS serves no IPv6 address for the primary interface " + m.MAC + ", so the node has no IPv6 address of its own to route its pods' traffic from",
			Evidence: []string{fmt.Sprintf("IMDS network/interfaces/macs/%s/ipv6s: none; ipv6-prefix: %s", m.MAC, addrsOrNone(m.IPv6Prefixes))},
			Fix: "give " + eni + " an IPv6 address: aws ec2 assign-ipv6-addresses --network-interface-id " + eni + " --ipv6-address-count 1 " +
				"(and turn on the subnet's AssignIpv6AddressOnCreation so new nodes get one), then restart vpcnetd; IMDS shows EC2's change within seconds",
		})
	}
	return append(out, ipv4EgressFindings(f)...)
}

// subnetWithoutIPv6 is the finding for a primary ENI in a subnet that
// EC2 describes with no IPv6 block.
func subnetWithoutIPv6(f Facts, primary *ENIFact) []Finding {
	if primary == nil {
		return nil
	}
	i := slices.IndexFunc(f.EC2.Subnets, func(s SubnetFact) bool { return s.ID == primary.SubnetID })
	if i < 0 || len(f.EC2.Subnets[i].IPv6CIDRs) > 0 {
		return nil
	}
	s := f.EC2.Subnets[i]
	return []Finding{{
		ID: "subnet-no-ipv6", Severity: Error,
		What:     fmt.Sprintf("ENABLE_IPv6=true but the node's subnet %s has no IPv6 CIDR, so EC2 can give neither the node an IPv6 address nor its pods a /80", s.ID),
		Evidence: []string{fmt.Sprintf("%s (%s): no associated IPv6 block; primary ENI %s", s.ID, s.CIDR, primary.ID)},
		Fix: "associate an IPv6 /64 with the subnet (aws ec2 associate-subnet-cidr-block --subnet-id " + s.ID + " --ipv6-cidr-block BLOCK, after aws ec2 associate-vpc-cidr-block --amazon-provided-ipv6-cidr-block if the VPC has none) " +
			"or launch the node in a dual-stack subnet; or set ENABLE_IPv6=false and ENABLE_IPv4=true for IPv4 pods",
	}}
}

// ipv4EgressFindings: IPv6 pods reach IPv4 addresses only through the
// egress plugin (ENABLE_V4_EGRESS), which SNATs in table ip
// vpcnet-egress-v4.
func ipv4EgressFindings(f Facts) []Finding {
	if strings.EqualFold(f.setting("ENABLE_V4_EGRESS"), "false") {
		return []Finding{{
			ID: "ipv6-pods-no-ipv4", Severity: Warning,
			What:     "IPv6 pods on this node cannot reach IPv4 addresses: ENABLE_V4_EGRESS=false, so no egress plugin is chained",
			Evidence: []string{"setting ENABLE_V4_EGRESS=false"},
			Fix:      "none if pods need only IPv6; otherwise set ENABLE_V4_EGRESS=true (the default, as in aws-node) on the vpcnet DaemonSet; pods started after vpcnetd rewrites the CNI configuration get IPv4 egress",
		}}
	}
	var ev []string
	if c := f.CNI; c != nil && c.Ours != "" && len(c.Plugins) > 0 && !slices.Contains(c.Plugins, cniconf.EgressV4Type) {
		ev = append(ev, fmt.Sprintf("%s chains %s, without %s", c.Ours, strings.Join(c.Plugins, ", "), cniconf.EgressV4Type))
	}
	if c := f.CNI; c != nil && slices.Contains(c.MissingPlugins, cniconf.EgressV4Type) {
		ev = append(ev, fmt.Sprintf("%s is not installed in %s", cniconf.EgressV4Type, c.BinDir))
	}
	if h := f.Host; h != nil && hasIPv6Pod(h) && !slices.ContainsFunc(h.Chains, func(c NFTChain) bool {
		return c.Family == "ip" && c.Table == egressV4Table
	}) {
		ev = append(ev, fmt.Sprintf("IPv6 pods run here but there is no table ip %s, whose chain SNATs their IPv4 traffic to the node's address", egressV4Table))
	}
	if len(ev) == 0 {
		return nil
	}
	return []Finding{{
		ID: "ipv6-pods-no-ipv4", Severity: Error,
		What:     "IPv6 pods on this node cannot reach IPv4 addresses although ENABLE_V4_EGRESS is on",
		Evidence: ev,
		Fix: "the DaemonSet's init container copies " + cniconf.EgressV4Type + " and host-local into /opt/cni/bin and vpcnetd chains it after vpcnet: check the init container's log and that vpcnetd is the one writing " +
			"the CNI configuration; each pod's ADD writes its SNAT, so recreate pods started while it was missing",
	}}
}

// primaryENI is the attached ENI at device 0 of network card 0, nil when
// EC2 was not read or shows none.
func primaryENI(f Facts) *ENIFact {
	if f.EC2 == nil {
		return nil
	}
	for i, e := range f.EC2.ENIs {
		if e.DeviceIndex == 0 && e.NetworkCard == 0 {
			return &f.EC2.ENIs[i]
		}
	}
	return nil
}

func hasIPv6Pod(h *HostFacts) bool {
	return slices.ContainsFunc(h.PodRoutes, func(r PodRoute) bool { return r.Addr.Is6() })
}

func addrsOrNone[T fmt.Stringer](as []T) string {
	if len(as) == 0 {
		return "none"
	}
	var s []string
	for _, a := range as {
		s = append(s, a.String())
	}
	return strings.Join(s, ", ")
}
