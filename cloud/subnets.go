package cloud

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"
)

// Subnet is a subnet as EC2 describes it.
type Subnet struct {
	ID               string
	VPCID            string
	AvailabilityZone string
	CIDR             netip.Prefix
	// IPv6CIDRs are the subnet's associated IPv6 blocks (a /64 each);
	// none for an IPv4-only subnet.
	IPv6CIDRs []netip.Prefix
	// AvailableAddresses is EC2's count of free addresses; with prefix
	// delegation a fragmented subnet can have addresses but no free /28.
	AvailableAddresses int
	Tags               map[string]string
}

// DescribeSubnets describes the subnets with the given ids. Unlike
// DescribeENIs, an unknown id is an error (InvalidSubnetID.NotFound): a
// subnet is configuration, and a wrong one needs fixing.
func (c *Client) DescribeSubnets(ctx context.Context, ids ...string) ([]Subnet, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	var out *ec2.DescribeSubnetsOutput
	err := c.call(ctx, "DescribeSubnets", func(ctx context.Context) error {
		var err error
		out, err = c.ec2.DescribeSubnets(ctx, &ec2.DescribeSubnetsInput{SubnetIds: ids})
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("describe subnets %s: %w", strings.Join(ids, ","), err)
	}
	subnets := make([]Subnet, 0, len(out.Subnets))
	for _, s := range out.Subnets {
		sn, err := subnetFromEC2(s)
		if err != nil {
			return nil, fmt.Errorf("describe subnets: %w", err)
		}
		subnets = append(subnets, sn)
	}
	return subnets, nil
}

// subnetFromEC2 maps EC2's description of a subnet to ours. The CIDR must
// be an IPv4 subnet as AWS allows them (/16 to /28): the agent derives
// the gateway and the ENI's address mask from it.
func subnetFromEC2(s types.Subnet) (Subnet, error) {
	sn := Subnet{
		ID:                 aws.ToString(s.SubnetId),
		VPCID:              aws.ToString(s.VpcId),
		AvailabilityZone:   aws.ToString(s.AvailabilityZone),
		AvailableAddresses: max(0, int(aws.ToInt32(s.AvailableIpAddressCount))),
		Tags:               tagMap(s.Tags),
	}
	cidr, err := parseIPv4Prefix(aws.ToString(s.CidrBlock), minSubnetBits, maxSubnetBits)
	if err != nil {
		return Subnet{}, fmt.Errorf("subnet %s: EC2 gives a bad CIDR: %w", quoteShort(sn.ID), err)
	}
	sn.CIDR = cidr
	for _, a := range s.Ipv6CidrBlockAssociationSet {
		// Blocks being associated or gone are not the subnet's yet, or
		// any more: EC2 gives no prefix from them.
		if a.Ipv6CidrBlockState == nil || a.Ipv6CidrBlockState.State != types.SubnetCidrBlockStateCodeAssociated {
			continue
		}
		p, err := parseIPv6Prefix(aws.ToString(a.Ipv6CidrBlock), minSubnet6Bits, subnet6Bits)
		if err != nil {
			return Subnet{}, fmt.Errorf("subnet %s: EC2 gives a bad IPv6 CIDR: %w", quoteShort(sn.ID), err)
		}
		sn.IPv6CIDRs = append(sn.IPv6CIDRs, p)
	}
	return sn, nil
}

// SubnetsInZone lists the subnets of VPC vpcID in availability zone az,
// all pages, most free addresses first (ties by ID): the candidates of
// tagged subnet discovery.
func (c *Client) SubnetsInZone(ctx context.Context, vpcID, az string) ([]Subnet, error) {
	p := ec2.NewDescribeSubnetsPaginator(c.ec2, &ec2.DescribeSubnetsInput{Filters: []types.Filter{
		{Name: aws.String("vpc-id"), Values: []string{vpcID}},
		{Name: aws.String("availability-zone"), Values: []string{az}},
	}})
	var out []Subnet
	for p.HasMorePages() {
		var page *ec2.DescribeSubnetsOutput
		err := c.call(ctx, "DescribeSubnets", func(ctx context.Context) error {
			var err error
			page, err = p.NextPage(ctx)
			return err
		})
		if err != nil {
			return nil, fmt.Errorf("list subnets of %s in %s: %w", vpcID, az, err)
		}
		for _, s := range page.Subnets {
			sn, err := subnetFromEC2(s)
			if err != nil {
				return nil, fmt.Errorf("list subnets of %s in %s: %w", vpcID, az, err)
			}
			out = append(out, sn)
		}
	}
	slices.SortStableFunc(out, func(a, b Subnet) int {
		if a.AvailableAddresses != b.AvailableAddresses {
			return b.AvailableAddresses - a.AvailableAddresses
		}
		return strings.Compare(a.ID, b.ID)
	})
	return out, nil
}
