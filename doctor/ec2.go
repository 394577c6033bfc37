package doctor

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/smithy-go"

	"github.com/vpcnet/vpcnet/cloud"
)

// EC2Reader reads EC2 with Describe calls and probes permissions with
// DryRun calls: nothing it sends changes anything.
type EC2Reader struct {
	// Endpoint overrides EC2's (the local cloud's); Region overrides the
	// one IMDS gives.
	Endpoint string
	Region   string
}

var _ Cloud = EC2Reader{}

func (r EC2Reader) client(ctx context.Context, q CloudQuery) (*ec2.Client, error) {
	region := r.Region
	if region == "" {
		region = q.Region
	}
	opts := []func(*config.LoadOptions) error{
		// Doctor wants an answer, not patience: two tries per call.
		config.WithRetryer(func() aws.Retryer { return retry.NewStandard(func(o *retry.StandardOptions) { o.MaxAttempts = 2 }) }),
	}
	if region != "" {
		opts = append(opts, config.WithRegion(region))
	}
	cfg, err := config.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("EC2: load AWS config: %w", err)
	}
	if cfg.Region == "" {
		return nil, errors.New("EC2: no region: IMDS did not answer; pass --region or set AWS_REGION")
	}
	return ec2.NewFromConfig(cfg, func(o *ec2.Options) {
		if r.Endpoint != "" {
			o.BaseEndpoint = aws.String(r.Endpoint)
		}
	}), nil
}

// errorCode is EC2's error code, "" for nil.
func errorCode(err error) string {
	if err == nil {
		return ""
	}
	var ae smithy.APIError
	if errors.As(err, &ae) {
		return ae.ErrorCode()
	}
	return "error: " + err.Error()
}

// Cloud implements Cloud.
func (r EC2Reader) Cloud(ctx context.Context, q CloudQuery) (EC2Facts, error) {
	e := EC2Facts{InstanceID: q.InstanceID, DryRun: map[string]string{}}
	c, err := r.client(ctx, q)
	if err != nil {
		return e, err
	}
	inst, err := c.DescribeInstances(ctx, &ec2.DescribeInstancesInput{InstanceIds: []string{q.InstanceID}})
	if err != nil {
		if errorCode(err) == "UnauthorizedOperation" {
			e.DryRun["DescribeInstances"] = "UnauthorizedOperation"
		}
		return e, fmt.Errorf("EC2 DescribeInstances %s: %w", q.InstanceID, err)
	}
	for _, res := range inst.Reservations {
		for _, in := range res.Instances {
			e.PrivateDNSName = aws.ToString(in.PrivateDnsName)
			if m := in.MetadataOptions; m != nil && m.HttpTokens != "" {
				e.Metadata = &MetadataOptions{HTTPTokens: string(m.HttpTokens), HopLimit: int(aws.ToInt32(m.HttpPutResponseHopLimit)), HTTPEndpoint: string(m.HttpEndpoint)}
			}
		}
	}
	if e.ENIs, err = describeENIs(ctx, c, []types.Filter{filter("attachment.instance-id", q.InstanceID)}); err != nil {
		e.DryRun["DescribeNetworkInterfaces"] = errorCode(err)
		return e, fmt.Errorf("EC2 DescribeNetworkInterfaces of %s: %w", q.InstanceID, err)
	}
	subnets := slices.Clone(q.ExtraSubnets)
	for _, en := range e.ENIs {
		subnets = append(subnets, en.SubnetID)
	}
	slices.Sort(subnets)
	subnets = slices.Compact(subnets)
	if len(subnets) > 0 {
		out, err := c.DescribeSubnets(ctx, &ec2.DescribeSubnetsInput{SubnetIds: subnets})
		if err != nil {
			e.DryRun["DescribeSubnets"] = errorCode(err)
			e.Problems = append(e.Problems, fmt.Sprintf("DescribeSubnets: %v", err))
		} else {
			for _, s := range out.Subnets {
				p, _ := netip.ParsePrefix(aws.ToString(s.CidrBlock))
				sf := SubnetFact{ID: aws.ToString(s.SubnetId), CIDR: p, Available: int(aws.ToInt32(s.AvailableIpAddressCount))}
				for _, a := range s.Ipv6CidrBlockAssociationSet {
					if a.Ipv6CidrBlockState != nil && a.Ipv6CidrBlockState.State != types.SubnetCidrBlockStateCodeAssociated {
						continue
					}
					if b, err := netip.ParsePrefix(aws.ToString(a.Ipv6CidrBlock)); err == nil {
						sf.IPv6CIDRs = append(sf.IPv6CIDRs, b)
					}
				}
				e.Subnets = append(e.Subnets, sf)
			}
		}
		leakFilter := []types.Filter{filter("status", "available"), filter("subnet-id", subnets...)}
		if q.ClusterName != "" {
			leakFilter = append(leakFilter, filter("tag:"+cloud.TagClusterName, q.ClusterName))
		} else {
			leakFilter = append(leakFilter, types.Filter{Name: aws.String("tag-key"), Values: []string{cloud.TagInstanceID}})
		}
		if e.Leaked, err = describeENIs(ctx, c, leakFilter); err != nil {
			e.Problems = append(e.Problems, fmt.Sprintf("DescribeNetworkInterfaces (leaked): %v", err))
		}
	}
	r.probe(ctx, c, q, &e)
	return e, nil
}

func filter(name string, values ...string) types.Filter {
	return types.Filter{Name: aws.String(name), Values: values}
}

func describeENIs(ctx context.Context, c *ec2.Client, filters []types.Filter) ([]ENIFact, error) {
	p := ec2.NewDescribeNetworkInterfacesPaginator(c, &ec2.DescribeNetworkInterfacesInput{Filters: filters})
	var out []ENIFact
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, err
		}
		for _, ni := range page.NetworkInterfaces {
			out = append(out, eniFact(ni))
		}
	}
	return out, nil
}

func eniFact(ni types.NetworkInterface) ENIFact {
	f := ENIFact{ID: aws.ToString(ni.NetworkInterfaceId), Status: string(ni.Status), SubnetID: aws.ToString(ni.SubnetId),
		InterfaceType: string(ni.InterfaceType), DeviceIndex: -1, Tags: map[string]string{}}
	if a := ni.Attachment; a != nil && a.DeviceIndex != nil {
		f.DeviceIndex = int(*a.DeviceIndex)
		f.NetworkCard = int(aws.ToInt32(a.NetworkCardIndex))
	}
	for _, t := range ni.TagSet {
		f.Tags[aws.ToString(t.Key)] = aws.ToString(t.Value)
	}
	for _, ip := range ni.PrivateIpAddresses {
		a, err := netip.ParseAddr(aws.ToString(ip.PrivateIpAddress))
		if err != nil {
			continue
		}
		if aws.ToBool(ip.Primary) {
			f.PrimaryIP = a
		} else {
			f.Secondary = append(f.Secondary, a)
		}
	}
	for _, p := range ni.Ipv4Prefixes {
		if pp, err := netip.ParsePrefix(aws.ToString(p.Ipv4Prefix)); err == nil {
			f.Prefixes = append(f.Prefixes, pp)
		}
	}
	for _, a := range ni.Ipv6Addresses {
		if aa, err := netip.ParseAddr(aws.ToString(a.Ipv6Address)); err == nil {
			f.IPv6Addrs = append(f.IPv6Addrs, aa)
		}
	}
	for _, p := range ni.Ipv6Prefixes {
		if pp, err := netip.ParsePrefix(aws.ToString(p.Ipv6Prefix)); err == nil {
			f.IPv6Prefixes = append(f.IPv6Prefixes, pp)
		}
	}
	return f
}

// probe asks EC2 with DryRun whether the role may call each mutating
// action the agent uses. EC2 answers DryRunOperation when it may and
// UnauthorizedOperation when not. AssignPrivateIpAddresses and
// UnassignPrivateIpAddresses take no DryRun and are not probed.
func (r EC2Reader) probe(ctx context.Context, c *ec2.Client, q CloudQuery, e *EC2Facts) {
	var primary *ENIFact
	for i := range e.ENIs {
		if e.ENIs[i].DeviceIndex == 0 {
			primary = &e.ENIs[i]
		}
	}
	if primary == nil {
		e.Problems = append(e.Problems, "no primary ENI in EC2: DryRun probes skipped")
		return
	}
	dry := aws.Bool(true)
	eni := aws.String(primary.ID)
	probes := map[string]func() error{
		"CreateNetworkInterface": func() error {
			_, err := c.CreateNetworkInterface(ctx, &ec2.CreateNetworkInterfaceInput{SubnetId: aws.String(primary.SubnetID), DryRun: dry})
			return err
		},
		"AttachNetworkInterface": func() error {
			_, err := c.AttachNetworkInterface(ctx, &ec2.AttachNetworkInterfaceInput{DeviceIndex: aws.Int32(1), InstanceId: aws.String(q.InstanceID), NetworkInterfaceId: eni, DryRun: dry})
			return err
		},
		"DeleteNetworkInterface": func() error {
			_, err := c.DeleteNetworkInterface(ctx, &ec2.DeleteNetworkInterfaceInput{NetworkInterfaceId: eni, DryRun: dry})
			return err
		},
		"ModifyNetworkInterfaceAttribute": func() error {
			_, err := c.ModifyNetworkInterfaceAttribute(ctx, &ec2.ModifyNetworkInterfaceAttributeInput{NetworkInterfaceId: eni, Description: &types.AttributeValue{Value: aws.String("vpcnet doctor probe")}, DryRun: dry})
			return err
		},
		"CreateTags": func() error {
			_, err := c.CreateTags(ctx, &ec2.CreateTagsInput{Resources: []string{primary.ID}, Tags: []types.Tag{{Key: aws.String("vpcnet.io/doctor-probe"), Value: aws.String("")}}, DryRun: dry})
			return err
		},
		"DescribeInstanceTypes": func() error {
			in := &ec2.DescribeInstanceTypesInput{DryRun: dry}
			if q.InstanceType != "" {
				in.InstanceTypes = []types.InstanceType{types.InstanceType(q.InstanceType)}
			}
			_, err := c.DescribeInstanceTypes(ctx, in)
			return err
		},
	}
	if att := attachmentID(ctx, c, primary.ID); att != "" {
		probes["DetachNetworkInterface"] = func() error {
			_, err := c.DetachNetworkInterface(ctx, &ec2.DetachNetworkInterfaceInput{AttachmentId: aws.String(att), DryRun: dry})
			return err
		}
	}
	for action, call := range probes {
		code := errorCode(call())
		if code == "DryRunOperation" {
			code = ""
		}
		e.DryRun[action] = code
	}
}

func attachmentID(ctx context.Context, c *ec2.Client, eni string) string {
	out, err := c.DescribeNetworkInterfaces(ctx, &ec2.DescribeNetworkInterfacesInput{NetworkInterfaceIds: []string{eni}})
	if err != nil || len(out.NetworkInterfaces) == 0 || out.NetworkInterfaces[0].Attachment == nil {
		return ""
	}
	return aws.ToString(out.NetworkInterfaces[0].Attachment.AttachmentId)
}
