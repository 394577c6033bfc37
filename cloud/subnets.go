package cloud

import (
	"context"
	"fmt"
	"net/netip"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
)

// Subnet is a subnet as EC2 describes it.
type Subnet struct {
	ID               string
	VPCID            string
	AvailabilityZone string
	CIDR             netip.Prefix
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
		sn := Subnet{
			ID:                 aws.ToString(s.SubnetId),
			VPCID:              aws.ToString(s.VpcId),
			AvailabilityZone:   aws.ToString(s.AvailabilityZone),
			AvailableAddresses: int(aws.ToInt32(s.AvailableIpAddressCount)),
			Tags:               tagMap(s.Tags),
		}
		if sn.CIDR, err = netip.ParsePrefix(aws.ToString(s.CidrBlock)); err != nil {
			return nil, fmt.Errorf("describe subnets: subnet %s: EC2 gives a bad CIDR: %w", sn.ID, err)
		}
		subnets = append(subnets, sn)
	}
	return subnets, nil
}
