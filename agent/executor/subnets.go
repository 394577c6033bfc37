package executor

import (
	"context"
	"errors"
	"fmt"

	"github.com/vpcnet/vpcnet/cloud"
	"github.com/vpcnet/vpcnet/ipam"
)

// TagCNIRole marks the subnets new ENIs may use (tagged subnet discovery,
// the Amazon VPC CNI's ENABLE_SUBNET_DISCOVERY): "1" opts a subnet in,
// "0" keeps every ENI out of it, the node's own subnet included.
const TagCNIRole = "kubernetes.io/role/cni"

// EligibleSubnets keeps the subnets new ENIs may go to, in the order
// given (most free addresses first): the node's own subnet unless tagged
// kubernetes.io/role/cni=0, any other only when tagged with a value other
// than 0, as aws-node's isSubnetValidForENICreation decides.
func EligibleSubnets(subnets []cloud.Subnet, primarySubnet string) []cloud.Subnet {
	var out []cloud.Subnet
	for _, s := range subnets {
		v, tagged := s.Tags[TagCNIRole]
		switch {
		case tagged && v == "0":
		case s.ID == primarySubnet, tagged:
			out = append(out, s)
		}
	}
	return out
}

// createSubnets are the subnets to try, in order, for a new ENI: the
// action's own (the node's, or the ENIConfig's with custom networking,
// which wins), or with subnet discovery the eligible subnets of the
// node's VPC and zone, most free addresses first. If EC2 cannot list
// them, the action's own subnet is used, as aws-node does.
func (x *Executor) createSubnets(ctx context.Context, act ipam.Action) ([]string, error) {
	if !x.SubnetDiscovery || x.CustomNetwork {
		return []string{act.SubnetID}, nil
	}
	primary := x.Self.Primary.SubnetID
	own, err := x.Cloud.DescribeSubnets(ctx, primary)
	if err != nil || len(own) != 1 {
		return []string{act.SubnetID}, nil
	}
	all, err := x.Cloud.SubnetsInZone(ctx, own[0].VPCID, own[0].AvailabilityZone)
	if err != nil {
		return []string{act.SubnetID}, nil
	}
	var ids []string
	for _, s := range EligibleSubnets(all, primary) {
		ids = append(ids, s.ID)
	}
	if len(ids) == 0 {
		return nil, fmt.Errorf("no subnet for a new ENI: the node's subnet %s is tagged %s=0 and no subnet of %s in %s is tagged %s=1; tag one, or set ENABLE_SUBNET_DISCOVERY=false",
			primary, TagCNIRole, own[0].VPCID, own[0].AvailabilityZone, TagCNIRole)
	}
	return ids, nil
}

// createENI creates the ENI of an attach in the first subnet that has
// room: a subnet out of addresses, or of whole /28s for prefixes, passes
// to the next. It returns the subnet it was created in, or the last one
// tried.
func createENI(ctx context.Context, c Cloud, in cloud.CreateENIInput, subnets []string) (cloud.ENI, string, error) {
	var errs []error
	for i, id := range subnets {
		in.SubnetID = id
		eni, err := c.CreateENI(ctx, in)
		if err == nil {
			return eni, id, nil
		}
		if !cloud.IsSubnetExhausted(err) || i == len(subnets)-1 {
			// The last error is the one classified; the others are
			// kept in the message.
			return cloud.ENI{}, id, errors.Join(append([]error{err}, errs...)...)
		}
		errs = append(errs, err)
	}
	return cloud.ENI{}, "", errors.New("create ENI: no subnet to try")
}
