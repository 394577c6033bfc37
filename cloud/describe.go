package cloud

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"
)

// ENI states (ENI.Status) and attachment states (Attachment.State), as EC2
// names them.
const (
	StatusAvailable = "available"
	StatusAttaching = "attaching"
	StatusInUse     = "in-use"
	StatusDetaching = "detaching"

	AttachmentAttaching = "attaching"
	AttachmentAttached  = "attached"
	AttachmentDetaching = "detaching"
	AttachmentDetached  = "detached"
)

// ENI is a network interface as EC2 describes it: the source of truth for
// what is attached and which addresses it holds.
type ENI struct {
	ID               string
	Status           string
	SubnetID         string
	VPCID            string
	AvailabilityZone string
	MAC              string
	Description      string
	// InterfaceType is EC2's: "interface" for an ordinary ENI, or "efa",
	// "efa-only", "trunk", "branch" and the types of AWS-managed
	// interfaces. Empty is an ordinary ENI.
	InterfaceType string
	// Attachment is nil when the ENI is not attached.
	Attachment   *Attachment
	PrimaryIP    netip.Addr
	SecondaryIPs []netip.Addr
	Prefixes     []netip.Prefix
	// IPv6s are the ENI's IPv6 addresses, IPv6Prefixes its delegated
	// /80s (AssignIpv6Addresses with Ipv6PrefixCount).
	IPv6s          []netip.Addr
	IPv6Prefixes   []netip.Prefix
	Tags           map[string]string
	SecurityGroups []string
	// ConnTrack is the ENI's connection-tracking idle timeouts.
	ConnTrack ConnTrack
}

// Attachment is an ENI's attachment to an instance.
type Attachment struct {
	ID          string
	InstanceID  string
	DeviceIndex int
	// NetworkCardIndex is the network card the ENI is attached through;
	// 0 on instance types with one card.
	NetworkCardIndex    int
	State               string
	DeleteOnTermination bool
}

// ENIFilter selects ENIs for ListENIs. Set fields must all match.
type ENIFilter struct {
	// InstanceID the ENI is attached to (attachment.instance-id).
	InstanceID string
	// Status of the ENI, for example StatusAvailable for leak collection.
	Status   string
	SubnetID string
	// Tags the ENI must carry; an empty value matches any value of the key.
	Tags map[string]string
}

// describePageSize is DescribeNetworkInterfaces' largest page. Asking for
// pages also keeps the call in EC2's larger request bucket.
const describePageSize = 1000

// ListENIs lists the ENIs matching f, all pages of them.
func (c *Client) ListENIs(ctx context.Context, f ENIFilter) ([]ENI, error) {
	filters := f.ec2Filters()
	if len(filters) == 0 {
		return nil, errors.New("list ENIs: an empty filter lists the whole account; name an instance, status, subnet or tag")
	}
	enis, err := c.describeENIs(ctx, filters)
	if err != nil {
		return nil, fmt.Errorf("list ENIs (%s): %w", f, err)
	}
	return enis, nil
}

// DescribeENIs describes the ENIs with the given ids. An id EC2 does not
// know (deleted, never existed) is absent from the result rather than an
// error, so a caller confirming what IMDS said learns "gone" directly.
func (c *Client) DescribeENIs(ctx context.Context, ids ...string) ([]ENI, error) {
	var all []ENI
	// EC2 takes up to 200 values per filter.
	for chunk := range slices.Chunk(ids, 200) {
		enis, err := c.describeENIs(ctx, []types.Filter{{Name: aws.String("network-interface-id"), Values: chunk}})
		if err != nil {
			return nil, fmt.Errorf("describe ENIs %s: %w", strings.Join(ids, ","), err)
		}
		all = append(all, enis...)
	}
	slices.SortFunc(all, func(a, b ENI) int { return strings.Compare(a.ID, b.ID) })
	return all, nil
}

func (c *Client) describeENIs(ctx context.Context, filters []types.Filter) ([]ENI, error) {
	p := ec2.NewDescribeNetworkInterfacesPaginator(c.ec2, &ec2.DescribeNetworkInterfacesInput{Filters: filters},
		func(o *ec2.DescribeNetworkInterfacesPaginatorOptions) { o.Limit = describePageSize })
	var enis []ENI
	for p.HasMorePages() {
		var page *ec2.DescribeNetworkInterfacesOutput
		err := c.call(ctx, "DescribeNetworkInterfaces", func(ctx context.Context) error {
			var err error
			page, err = p.NextPage(ctx)
			return err
		})
		if err != nil {
			return nil, err
		}
		for _, ni := range page.NetworkInterfaces {
			e, err := eniFromEC2(ni)
			if err != nil {
				return nil, err
			}
			enis = append(enis, e)
		}
	}
	slices.SortFunc(enis, func(a, b ENI) int { return strings.Compare(a.ID, b.ID) })
	return enis, nil
}

func (f ENIFilter) ec2Filters() []types.Filter {
	var fs []types.Filter
	add := func(name, value string) {
		fs = append(fs, types.Filter{Name: aws.String(name), Values: []string{value}})
	}
	if f.InstanceID != "" {
		add("attachment.instance-id", f.InstanceID)
	}
	if f.Status != "" {
		add("status", f.Status)
	}
	if f.SubnetID != "" {
		add("subnet-id", f.SubnetID)
	}
	for _, k := range slices.Sorted(maps.Keys(f.Tags)) {
		if v := f.Tags[k]; v != "" {
			add("tag:"+k, v)
		} else {
			add("tag-key", k)
		}
	}
	return fs
}

func (f ENIFilter) String() string {
	var parts []string
	for _, fl := range f.ec2Filters() {
		parts = append(parts, aws.ToString(fl.Name)+"="+strings.Join(fl.Values, ","))
	}
	return strings.Join(parts, " ")
}

// eniFromEC2 maps EC2's description of an ENI to ours, refusing what
// vpcnet cannot use: a malformed MAC (dataplane finds the link by it), an
// address that is not IPv4, a prefix that is not a /28, a device index
// with no route table.
func eniFromEC2(ni types.NetworkInterface) (ENI, error) {
	e := ENI{
		ID:               aws.ToString(ni.NetworkInterfaceId),
		Status:           string(ni.Status),
		SubnetID:         aws.ToString(ni.SubnetId),
		VPCID:            aws.ToString(ni.VpcId),
		AvailabilityZone: aws.ToString(ni.AvailabilityZone),
		MAC:              strings.ToLower(aws.ToString(ni.MacAddress)),
		Description:      aws.ToString(ni.Description),
		InterfaceType:    string(ni.InterfaceType),
		Tags:             tagMap(ni.TagSet),
		ConnTrack:        connTrackFromEC2(ni.ConnectionTrackingConfiguration),
	}
	bad := func(what string, err error) (ENI, error) {
		return ENI{}, fmt.Errorf("ENI %s: EC2 gives a bad %s: %w", quoteShort(e.ID), what, err)
	}
	if e.MAC != "" {
		if _, err := parseMAC(e.MAC); err != nil {
			return bad("MAC", err)
		}
	}
	if a := ni.Attachment; a != nil {
		dev, err := checkDeviceIndex(int64(aws.ToInt32(a.DeviceIndex)))
		if err != nil {
			return bad("attachment", err)
		}
		card := aws.ToInt32(a.NetworkCardIndex)
		if card < 0 {
			return bad("attachment", fmt.Errorf("network card index %d is negative", card))
		}
		e.Attachment = &Attachment{
			ID:                  aws.ToString(a.AttachmentId),
			InstanceID:          aws.ToString(a.InstanceId),
			DeviceIndex:         dev,
			NetworkCardIndex:    int(card),
			State:               string(a.Status),
			DeleteOnTermination: aws.ToBool(a.DeleteOnTermination),
		}
	}
	if s := aws.ToString(ni.PrivateIpAddress); s != "" {
		ip, err := parseIPv4(s)
		if err != nil {
			return bad("primary address", err)
		}
		e.PrimaryIP = ip
	}
	for _, pa := range ni.PrivateIpAddresses {
		ip, err := parseIPv4(aws.ToString(pa.PrivateIpAddress))
		if err != nil {
			return bad("address", err)
		}
		if aws.ToBool(pa.Primary) {
			e.PrimaryIP = ip
			continue
		}
		e.SecondaryIPs = append(e.SecondaryIPs, ip)
	}
	for _, p := range ni.Ipv4Prefixes {
		pfx, err := parseIPv4Prefix(aws.ToString(p.Ipv4Prefix), prefixBits, prefixBits)
		if err != nil {
			return bad("prefix", err)
		}
		e.Prefixes = append(e.Prefixes, pfx)
	}
	for _, a := range ni.Ipv6Addresses {
		ip, err := parseIPv6(aws.ToString(a.Ipv6Address))
		if err != nil {
			return bad("IPv6 address", err)
		}
		e.IPv6s = append(e.IPv6s, ip)
	}
	for _, p := range ni.Ipv6Prefixes {
		pfx, err := parseIPv6Prefix(aws.ToString(p.Ipv6Prefix), prefix6Bits, prefix6Bits)
		if err != nil {
			return bad("IPv6 prefix", err)
		}
		e.IPv6Prefixes = append(e.IPv6Prefixes, pfx)
	}
	for _, g := range ni.Groups {
		e.SecurityGroups = append(e.SecurityGroups, aws.ToString(g.GroupId))
	}
	return e, nil
}

func tagMap(tags []types.Tag) map[string]string {
	m := make(map[string]string, len(tags))
	for _, t := range tags {
		m[aws.ToString(t.Key)] = aws.ToString(t.Value)
	}
	return m
}
