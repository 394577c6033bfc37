package sim

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"slices"
	"time"
)

// maxVPCIPv6Blocks is EC2's default quota of IPv6 CIDR blocks per VPC.
const maxVPCIPv6Blocks = 5

type xmlCIDRState struct {
	State string `xml:"state"`
}

type xmlVPCIPv6Assoc struct {
	AssociationID      string       `xml:"associationId"`
	IPv6CIDRBlock      string       `xml:"ipv6CidrBlock,omitempty"`
	State              xmlCIDRState `xml:"ipv6CidrBlockState"`
	NetworkBorderGroup string       `xml:"networkBorderGroup"`
	IPv6Pool           string       `xml:"ipv6Pool"`
}

type associateVPCCIDRResponse struct {
	RequestID string          `xml:"requestId"`
	Assoc     xmlVPCIPv6Assoc `xml:"ipv6CidrBlockAssociation"`
	VPCID     string          `xml:"vpcId"`
}

// associateVPCCIDRBlock gives the VPC another Amazon-provided IPv6 /56.
// As in EC2, the answer says "associating" and carries no block yet: the
// block is chosen by AWS and shows in DescribeVpcs, where the emulator
// has it associated at once. IPv4 blocks, BYOIP pools and IPAM are not
// emulated.
func (c *Cloud) associateVPCCIDRBlock(r *request) (any, error) {
	p := r.params
	vpcID, err := p.required("VpcId")
	if err != nil {
		return nil, err
	}
	amazon, _, err := p.boolOpt("AmazonProvidedIpv6CidrBlock")
	if err != nil {
		return nil, err
	}
	for _, unsupported := range []string{"CidrBlock", "Ipv4IpamPoolId", "Ipv6CidrBlock", "Ipv6IpamPoolId", "Ipv6Pool"} {
		if p.has(unsupported) {
			return nil, errorf(codeInvalidParameterValue, "Parameter %s is not supported by the emulator: only AmazonProvidedIpv6CidrBlock is.", unsupported)
		}
	}
	if !amazon {
		return nil, errorf(codeMissingParameter, "The request must contain AmazonProvidedIpv6CidrBlock=true (the only kind of block the emulator associates).")
	}
	resp := &associateVPCCIDRResponse{RequestID: r.id, VPCID: vpcID}
	err = c.update(func(time.Time) error {
		if vpcID != c.vpcID {
			return errorf(codeInvalidVPCNotFound, "The vpc ID '%s' does not exist", vpcID)
		}
		if len(c.vpcIPv6) >= maxVPCIPv6Blocks {
			return errorf(codeCidrLimitExceeded, "This network '%s' has met its maximum number of allowed CIDRs: %d IPv6 CIDR blocks.", vpcID, maxVPCIPv6Blocks)
		}
		b := vpcIPv6{assocID: c.ids.resource("vpc-cidr-assoc"), cidr: c.newVPCIPv6BlockLocked()}
		c.vpcIPv6 = append(c.vpcIPv6, b)
		resp.Assoc = xmlVPCIPv6Assoc{
			AssociationID:      b.assocID,
			State:              xmlCIDRState{State: "associating"},
			NetworkBorderGroup: c.region,
			IPv6Pool:           "Amazon",
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return resp, nil
}

// newVPCIPv6BlockLocked picks an unused /56 from 2600:1f14::/32, the kind
// of range Amazon hands out, by the seeded generator.
func (c *Cloud) newVPCIPv6BlockLocked() netip.Prefix {
	for {
		var b [16]byte
		binary.BigEndian.PutUint32(b[:4], 0x26001f14)
		v := c.ids.uint64()
		b[4], b[5], b[6] = byte(v>>16), byte(v>>8), byte(v)
		q := netip.PrefixFrom(netip.AddrFrom16(b), 56)
		if !slices.ContainsFunc(c.vpcIPv6, func(x vpcIPv6) bool { return x.cidr == q }) {
			return q
		}
	}
}

type xmlSubnetIPv6Assoc struct {
	AssociationID        string       `xml:"associationId"`
	IPv6CIDRBlock        string       `xml:"ipv6CidrBlock"`
	State                xmlCIDRState `xml:"ipv6CidrBlockState"`
	IPv6AddressAttribute string       `xml:"ipv6AddressAttribute"`
	IPSource             string       `xml:"ipSource"`
}

func (s *subnetIPv6) xml(state string) xmlSubnetIPv6Assoc {
	return xmlSubnetIPv6Assoc{AssociationID: s.assocID, IPv6CIDRBlock: s.cidr.String(), State: xmlCIDRState{State: state}, IPv6AddressAttribute: "public", IPSource: "amazon"}
}

type associateSubnetCIDRResponse struct {
	RequestID string             `xml:"requestId"`
	SubnetID  string             `xml:"subnetId"`
	Assoc     xmlSubnetIPv6Assoc `xml:"ipv6CidrBlockAssociation"`
}

// associateSubnetCIDRBlock gives a subnet its IPv6 /64, making it dual
// stack. The block must be a /64 inside one of the VPC's /56s, used by no
// other subnet; a subnet holds one.
func (c *Cloud) associateSubnetCIDRBlock(r *request) (any, error) {
	p := r.params
	subnetID, err := p.required("SubnetId")
	if err != nil {
		return nil, err
	}
	if p.has("Ipv6IpamPoolId") {
		return nil, errorf(codeInvalidParameterValue, "Parameter Ipv6IpamPoolId is not supported by the emulator: give Ipv6CidrBlock.")
	}
	s, err := p.required("Ipv6CidrBlock")
	if err != nil {
		return nil, err
	}
	q, perr := netip.ParsePrefix(s)
	if perr != nil || !q.Addr().Is6() || q.Addr().Is4In6() || q.Masked() != q || q.Bits() != 64 {
		return nil, errorf(codeInvalidParameterValue, "invalid value for parameter ipv6-cidr-block: %s (want a /64 of the VPC's IPv6 block)", s)
	}
	resp := &associateSubnetCIDRResponse{RequestID: r.id, SubnetID: subnetID}
	err = c.update(func(time.Time) error {
		sn, ok := c.subnets[subnetID]
		if !ok {
			return errorf(codeInvalidSubnetNotFound, "The subnet ID '%s' does not exist", subnetID)
		}
		if sn.ipv6 != nil {
			return errorf(codeInvalidParameterValue, "The subnet '%s' already has an IPv6 CIDR block (%s); a subnet holds one.", sn.id, sn.ipv6.cidr)
		}
		if !slices.ContainsFunc(c.vpcIPv6, func(b vpcIPv6) bool { return b.cidr.Contains(q.Addr()) }) {
			return errorf(codeInvalidSubnetRange, "The IPv6 CIDR '%s' is invalid.", q)
		}
		for _, o := range c.subnetOrder {
			if o.ipv6 != nil && o.ipv6.cidr == q {
				return errorf(codeInvalidSubnetConflict, "The IPv6 CIDR '%s' conflicts with another subnet", q)
			}
		}
		sn.ipv6 = &subnetIPv6{assocID: c.ids.resource("subnet-cidr-assoc"), cidr: q, pool: newPool6(q, sn.pool.rng)}
		resp.Assoc = sn.ipv6.xml("associating")
		return nil
	})
	if err != nil {
		return nil, err
	}
	return resp, nil
}

type xmlVPCCIDRAssoc struct {
	AssociationID string       `xml:"associationId"`
	CIDRBlock     string       `xml:"cidrBlock"`
	State         xmlCIDRState `xml:"cidrBlockState"`
}

type xmlVPC struct {
	VPCID           string            `xml:"vpcId"`
	State           string            `xml:"state"`
	CIDRBlock       string            `xml:"cidrBlock"`
	CIDRAssocs      []xmlVPCCIDRAssoc `xml:"cidrBlockAssociationSet>item"`
	IPv6Assocs      []xmlVPCIPv6Assoc `xml:"ipv6CidrBlockAssociationSet>item"`
	DHCPOptionsID   string            `xml:"dhcpOptionsId"`
	InstanceTenancy string            `xml:"instanceTenancy"`
	IsDefault       bool              `xml:"isDefault"`
	OwnerID         string            `xml:"ownerId"`
}

type describeVPCsResponse struct {
	RequestID string   `xml:"requestId"`
	VPCs      []xmlVPC `xml:"vpcSet>item"`
}

// describeVPCs answers for the one VPC, so a test can read the /56 that
// AssociateVpcCidrBlock gave it.
func (c *Cloud) describeVPCs(r *request) (any, error) {
	p := r.params
	ids := p.list("VpcId")
	filters, err := p.filters("vpc-id", "state", "cidr", "cidr-block-association.cidr-block", "owner-id", "is-default",
		"ipv6-cidr-block-association.ipv6-cidr-block", "ipv6-cidr-block-association.association-id", "ipv6-cidr-block-association.state")
	if err != nil {
		return nil, err
	}
	resp := &describeVPCsResponse{RequestID: r.id}
	err = c.read(func(time.Time) error {
		for _, id := range ids {
			if id != c.vpcID {
				return errorf(codeInvalidVPCNotFound, "The vpc ID '%s' does not exist", id)
			}
		}
		if !matches(filters, c.vpcAttrLocked, nil) {
			return nil
		}
		x := xmlVPC{VPCID: c.vpcID, State: "available", CIDRBlock: c.vpcCIDRs[0].String(), DHCPOptionsID: "dopt-0sim",
			InstanceTenancy: "default", OwnerID: c.accountID}
		for _, q := range c.vpcCIDRs {
			x.CIDRAssocs = append(x.CIDRAssocs, xmlVPCCIDRAssoc{AssociationID: fmt.Sprintf("vpc-cidr-assoc-0%016x", hashString(q.String())),
				CIDRBlock: q.String(), State: xmlCIDRState{State: "associated"}})
		}
		for _, b := range c.vpcIPv6 {
			x.IPv6Assocs = append(x.IPv6Assocs, xmlVPCIPv6Assoc{AssociationID: b.assocID, IPv6CIDRBlock: b.cidr.String(),
				State: xmlCIDRState{State: "associated"}, NetworkBorderGroup: c.region, IPv6Pool: "Amazon"})
		}
		resp.VPCs = append(resp.VPCs, x)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return resp, nil
}

func (c *Cloud) vpcAttrLocked(name string) []string {
	var out []string
	switch name {
	case "vpc-id":
		out = []string{c.vpcID}
	case "state":
		out = []string{"available"}
	case "cidr":
		out = []string{c.vpcCIDRs[0].String()}
	case "cidr-block-association.cidr-block":
		for _, q := range c.vpcCIDRs {
			out = append(out, q.String())
		}
	case "owner-id":
		out = []string{c.accountID}
	case "is-default":
		out = []string{"false"}
	case "ipv6-cidr-block-association.ipv6-cidr-block":
		for _, b := range c.vpcIPv6 {
			out = append(out, b.cidr.String())
		}
	case "ipv6-cidr-block-association.association-id":
		for _, b := range c.vpcIPv6 {
			out = append(out, b.assocID)
		}
	case "ipv6-cidr-block-association.state":
		if len(c.vpcIPv6) > 0 {
			out = []string{"associated"}
		}
	}
	return out
}
