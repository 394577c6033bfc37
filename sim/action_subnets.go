package sim

import (
	"strconv"
	"time"
)

type xmlSubnet struct {
	SubnetID                string   `xml:"subnetId"`
	SubnetArn               string   `xml:"subnetArn"`
	State                   string   `xml:"state"`
	VPCID                   string   `xml:"vpcId"`
	OwnerID                 string   `xml:"ownerId"`
	CIDRBlock               string   `xml:"cidrBlock"`
	AvailableIPAddressCount int      `xml:"availableIpAddressCount"`
	AvailabilityZone        string   `xml:"availabilityZone"`
	DefaultForAZ            bool     `xml:"defaultForAz"`
	MapPublicIPOnLaunch     bool     `xml:"mapPublicIpOnLaunch"`
	Tags                    []xmlTag `xml:"tagSet>item"`
	// IPv6Assocs is empty for an IPv4-only subnet, as in EC2.
	IPv6Assocs                  []xmlSubnetIPv6Assoc `xml:"ipv6CidrBlockAssociationSet>item"`
	AssignIPv6AddressOnCreation bool                 `xml:"assignIpv6AddressOnCreation"`
	IPv6Native                  bool                 `xml:"ipv6Native"`
}

type describeSubnetsResponse struct {
	RequestID string      `xml:"requestId"`
	Subnets   []xmlSubnet `xml:"subnetSet>item"`
	NextToken string      `xml:"nextToken,omitempty"`
}

func (c *Cloud) describeSubnets(r *request) (any, error) {
	p := r.params
	ids := p.list("SubnetId")
	filters, err := p.filters("subnet-id", "vpc-id", "availability-zone", "cidr-block", "cidr", "state", "available-ip-address-count", "default-for-az", "owner-id",
		"ipv6-cidr-block-association.ipv6-cidr-block", "ipv6-cidr-block-association.association-id", "ipv6-cidr-block-association.state",
		"ipv6-native", "assign-ipv6-address-on-creation")
	if err != nil {
		return nil, err
	}
	pg, err := p.paging(5, 1000, 0)
	if err != nil {
		return nil, err
	}
	resp := &describeSubnetsResponse{RequestID: r.id}
	err = c.read(func(time.Time) error {
		set := c.subnetOrder
		if len(ids) > 0 {
			set = nil
			for _, id := range ids {
				sn, ok := c.subnets[id]
				if !ok {
					return errorf(codeInvalidSubnetNotFound, "The subnet ID '%s' does not exist", id)
				}
				set = append(set, sn)
			}
		}
		type item struct {
			sn  *subnet
			pos int
		}
		var matched []item
		for _, sn := range set {
			if matches(filters, func(name string) []string { return c.subnetAttr(sn, name) }, sn.tags) {
				matched = append(matched, item{sn, c.subnetPos(sn)})
			}
		}
		page, next := paginate(matched, func(it item) int { return it.pos }, pg)
		for _, it := range page {
			sn := it.sn
			x := xmlSubnet{
				SubnetID:                    sn.id,
				SubnetArn:                   "arn:aws:ec2:" + c.region + ":" + c.accountID + ":subnet/" + sn.id,
				State:                       "available",
				VPCID:                       c.vpcID,
				OwnerID:                     c.accountID,
				CIDRBlock:                   sn.cidr.String(),
				AvailableIPAddressCount:     sn.pool.free,
				AvailabilityZone:            sn.az,
				Tags:                        xmlTags(sn.tags),
				AssignIPv6AddressOnCreation: sn.assignIPv6OnCreation,
				IPv6Native:                  sn.ipv6Native,
			}
			if sn.ipv6 != nil {
				x.IPv6Assocs = []xmlSubnetIPv6Assoc{sn.ipv6.xml("associated")}
			}
			resp.Subnets = append(resp.Subnets, x)
		}
		resp.NextToken = next
		return nil
	})
	if err != nil {
		return nil, err
	}
	return resp, nil
}

func (c *Cloud) subnetPos(sn *subnet) int {
	for i, s := range c.subnetOrder {
		if s == sn {
			return i
		}
	}
	return -1
}

func (c *Cloud) subnetAttr(sn *subnet, name string) []string {
	switch name {
	case "subnet-id":
		return []string{sn.id}
	case "vpc-id":
		return []string{c.vpcID}
	case "availability-zone":
		return []string{sn.az}
	case "cidr-block", "cidr":
		return []string{sn.cidr.String()}
	case "state":
		return []string{"available"}
	case "available-ip-address-count":
		return []string{strconv.Itoa(sn.pool.free)}
	case "default-for-az":
		return []string{"false"}
	case "owner-id":
		return []string{c.accountID}
	case "ipv6-native":
		return []string{strconv.FormatBool(sn.ipv6Native)}
	case "assign-ipv6-address-on-creation":
		return []string{strconv.FormatBool(sn.assignIPv6OnCreation)}
	}
	if sn.ipv6 == nil {
		return nil
	}
	switch name {
	case "ipv6-cidr-block-association.ipv6-cidr-block":
		return []string{sn.ipv6.cidr.String()}
	case "ipv6-cidr-block-association.association-id":
		return []string{sn.ipv6.assocID}
	case "ipv6-cidr-block-association.state":
		return []string{"associated"}
	}
	return nil
}
