package cloud

import (
	"context"
	"fmt"
	"net/netip"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
)

// AssignAddresses asks EC2 for count more secondary addresses on eniID in
// one call and returns the ones it assigned.
func (c *Client) AssignAddresses(ctx context.Context, eniID string, count int) ([]netip.Addr, error) {
	if count < 1 {
		return nil, fmt.Errorf("assign addresses to %s: count %d, want at least 1", eniID, count)
	}
	out, err := c.assign(ctx, &ec2.AssignPrivateIpAddressesInput{
		NetworkInterfaceId:             aws.String(eniID),
		SecondaryPrivateIpAddressCount: aws.Int32(int32(count)),
	})
	if err != nil {
		return nil, fmt.Errorf("assign %d addresses to %s: %w", count, eniID, err)
	}
	addrs := make([]netip.Addr, 0, len(out.AssignedPrivateIpAddresses))
	for _, a := range out.AssignedPrivateIpAddresses {
		ip, err := parseIPv4(aws.ToString(a.PrivateIpAddress))
		if err != nil {
			return nil, fmt.Errorf("assign %d addresses to %s: EC2 answered a bad address: %w", count, eniID, err)
		}
		addrs = append(addrs, ip)
	}
	return addrs, nil
}

// AssignPrefixes asks EC2 for count more /28 prefixes on eniID in one call
// and returns the ones it assigned.
func (c *Client) AssignPrefixes(ctx context.Context, eniID string, count int) ([]netip.Prefix, error) {
	if count < 1 {
		return nil, fmt.Errorf("assign prefixes to %s: count %d, want at least 1", eniID, count)
	}
	out, err := c.assign(ctx, &ec2.AssignPrivateIpAddressesInput{
		NetworkInterfaceId: aws.String(eniID),
		Ipv4PrefixCount:    aws.Int32(int32(count)),
	})
	if err != nil {
		return nil, fmt.Errorf("assign %d prefixes to %s: %w", count, eniID, err)
	}
	prefixes := make([]netip.Prefix, 0, len(out.AssignedIpv4Prefixes))
	for _, p := range out.AssignedIpv4Prefixes {
		pfx, err := parseIPv4Prefix(aws.ToString(p.Ipv4Prefix), prefixBits, prefixBits)
		if err != nil {
			return nil, fmt.Errorf("assign %d prefixes to %s: EC2 answered a bad prefix: %w", count, eniID, err)
		}
		prefixes = append(prefixes, pfx)
	}
	return prefixes, nil
}

func (c *Client) assign(ctx context.Context, in *ec2.AssignPrivateIpAddressesInput) (*ec2.AssignPrivateIpAddressesOutput, error) {
	var out *ec2.AssignPrivateIpAddressesOutput
	err := c.call(ctx, "AssignPrivateIpAddresses", func(ctx context.Context) error {
		var err error
		out, err = c.ec2.AssignPrivateIpAddresses(ctx, in)
		return err
	})
	return out, err
}

// UnassignAddresses gives secondary addresses of eniID back to the subnet.
// Confirm with EC2 first that they are on this ENI: IMDS may be behind.
func (c *Client) UnassignAddresses(ctx context.Context, eniID string, addrs []netip.Addr) error {
	if len(addrs) == 0 {
		return nil
	}
	ss := make([]string, len(addrs))
	for i, a := range addrs {
		ss[i] = a.String()
	}
	if err := c.unassign(ctx, &ec2.UnassignPrivateIpAddressesInput{
		NetworkInterfaceId: aws.String(eniID),
		PrivateIpAddresses: ss,
	}); err != nil {
		return fmt.Errorf("unassign %d addresses from %s: %w", len(addrs), eniID, err)
	}
	return nil
}

// UnassignPrefixes gives /28 prefixes of eniID back to the subnet.
func (c *Client) UnassignPrefixes(ctx context.Context, eniID string, prefixes []netip.Prefix) error {
	if len(prefixes) == 0 {
		return nil
	}
	ss := make([]string, len(prefixes))
	for i, p := range prefixes {
		ss[i] = p.Masked().String()
	}
	if err := c.unassign(ctx, &ec2.UnassignPrivateIpAddressesInput{
		NetworkInterfaceId: aws.String(eniID),
		Ipv4Prefixes:       ss,
	}); err != nil {
		return fmt.Errorf("unassign %d prefixes from %s: %w", len(prefixes), eniID, err)
	}
	return nil
}

func (c *Client) unassign(ctx context.Context, in *ec2.UnassignPrivateIpAddressesInput) error {
	return c.call(ctx, "UnassignPrivateIpAddresses", func(ctx context.Context) error {
		_, err := c.ec2.UnassignPrivateIpAddresses(ctx, in)
		return err
	})
}

// AssignIPv6Prefixes asks EC2 for count more IPv6 /80 prefixes on eniID
// in one call (AssignIpv6Addresses with Ipv6PrefixCount, as aws-node's
// IPv6 mode does for the primary ENI) and returns the ones it assigned.
func (c *Client) AssignIPv6Prefixes(ctx context.Context, eniID string, count int) ([]netip.Prefix, error) {
	if count < 1 {
		return nil, fmt.Errorf("assign IPv6 prefixes to %s: count %d, want at least 1", eniID, count)
	}
	var out *ec2.AssignIpv6AddressesOutput
	err := c.call(ctx, "AssignIpv6Addresses", func(ctx context.Context) error {
		var err error
		out, err = c.ec2.AssignIpv6Addresses(ctx, &ec2.AssignIpv6AddressesInput{
			NetworkInterfaceId: aws.String(eniID),
			Ipv6PrefixCount:    aws.Int32(int32(count)),
		})
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("assign %d IPv6 prefixes to %s: %w", count, eniID, err)
	}
	prefixes := make([]netip.Prefix, 0, len(out.AssignedIpv6Prefixes))
	for _, p := range out.AssignedIpv6Prefixes {
		pfx, err := parseIPv6Prefix(p, prefix6Bits, prefix6Bits)
		if err != nil {
			return nil, fmt.Errorf("assign %d IPv6 prefixes to %s: EC2 answered a bad prefix: %w", count, eniID, err)
		}
		prefixes = append(prefixes, pfx)
	}
	return prefixes, nil
}
