package cloud

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/vpcnet/vpcnet/limits"
)

// ErrUnknownInstanceType means neither the generated limits table nor EC2
// DescribeInstanceTypes knows the instance type. The caller decides what to
// do (for example run with the primary ENI only and say so); it is never
// a reason to stop. Other errors from InstanceLimits (throttling, no
// answer) are transient: ask again later.
var ErrUnknownInstanceType = errors.New("unknown instance type")

// InstanceLimits returns the networking limits of instanceType: from the
// generated table when it knows the type, else from EC2
// DescribeInstanceTypes, whose answer is kept for the life of the client.
func (c *Client) InstanceLimits(ctx context.Context, instanceType string) (limits.Limits, error) {
	if l, ok := limits.Lookup(instanceType); ok {
		return l, nil
	}
	c.limitsMu.Lock()
	l, ok := c.limitsCache[instanceType]
	c.limitsMu.Unlock()
	if ok {
		l.Cards = slices.Clone(l.Cards)
		return l, nil
	}

	var out *ec2.DescribeInstanceTypesOutput
	err := c.call(ctx, "DescribeInstanceTypes", func(ctx context.Context) error {
		var err error
		out, err = c.ec2.DescribeInstanceTypes(ctx, &ec2.DescribeInstanceTypesInput{
			InstanceTypes: []types.InstanceType{types.InstanceType(instanceType)},
		})
		return err
	})
	switch {
	case ErrorCode(err) == "InvalidInstanceType":
		return limits.Limits{}, fmt.Errorf("instance type %s: not in the limits table, and EC2 says %w: %w", instanceType, ErrUnknownInstanceType, err)
	case err != nil:
		return limits.Limits{}, fmt.Errorf("instance type %s: not in the limits table; describe instance types: %w", instanceType, err)
	}
	for _, info := range out.InstanceTypes {
		if string(info.InstanceType) != instanceType {
			continue
		}
		l, err := limitsFromEC2(info)
		if err != nil {
			return limits.Limits{}, err
		}
		c.limitsMu.Lock()
		c.limitsCache[instanceType] = l
		c.limitsMu.Unlock()
		l.Cards = slices.Clone(l.Cards)
		return l, nil
	}
	return limits.Limits{}, fmt.Errorf("instance type %s: not in the limits table, and EC2 DescribeInstanceTypes does not list it: %w", instanceType, ErrUnknownInstanceType)
}

// limitsFromEC2 reads what the table generator reads, so a type learned
// from EC2 has the same shape as one from the table. MaxENIs is the
// default network card's: an ENI attached without a card index goes there,
// and on multi-card types the instance-wide MaximumNetworkInterfaces would
// overstate it.
func limitsFromEC2(info types.InstanceTypeInfo) (limits.Limits, error) {
	name := string(info.InstanceType)
	ni := info.NetworkInfo
	if ni == nil || ni.MaximumNetworkInterfaces == nil || ni.Ipv4AddressesPerInterface == nil {
		return limits.Limits{}, fmt.Errorf("instance type %s: EC2 DescribeInstanceTypes gives no network limits", name)
	}
	l := limits.Limits{
		InstanceType: name,
		MaxENIs:      int(*ni.MaximumNetworkInterfaces),
		IPv4PerENI:   int(*ni.Ipv4AddressesPerInterface),
		Hypervisor:   limits.Hypervisor(info.Hypervisor),
		BareMetal:    aws.ToBool(info.BareMetal),
		DefaultCard:  int(aws.ToInt32(ni.DefaultNetworkCardIndex)),
	}
	if l.Hypervisor == "" {
		l.Hypervisor = limits.UnknownHypervisor
	}
	for _, card := range ni.NetworkCards {
		cd := limits.Card{Index: int(aws.ToInt32(card.NetworkCardIndex)), MaxENIs: int(aws.ToInt32(card.MaximumNetworkInterfaces))}
		l.Cards = append(l.Cards, cd)
		if cd.Index == l.DefaultCard && cd.MaxENIs > 0 {
			l.MaxENIs = cd.MaxENIs
		}
	}
	if l.MaxENIs < 1 || l.IPv4PerENI < 1 {
		return limits.Limits{}, fmt.Errorf("instance type %s: EC2 DescribeInstanceTypes gives %d ENIs of %d addresses", name, l.MaxENIs, l.IPv4PerENI)
	}
	return l, nil
}
