package executor

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/vpcnet/vpcnet/cloud"
	"github.com/vpcnet/vpcnet/ipam"
)

// TagCNIRole marks the subnets new ENIs may use (tagged subnet discovery,
// the Amazon VPC CNI's ENABLE_SUBNET_DISCOVERY): "1" opts a subnet in,
// "0" keeps every ENI out of it, the node's own subnet included.
const TagCNIRole = "kubernetes.io/role/cni"

// TagClusterPrefix, followed by a cluster's name, reserves a subnet
// tagged kubernetes.io/role/cni for the clusters so named (aws-node
// v1.22.1+), so clusters sharing a VPC do not take each other's subnets.
const TagClusterPrefix = "cni.networking.k8s.aws/cluster/"

// subnetRefusal says why new ENIs may not go to s, or "" when they may,
// by the Amazon VPC CNI's rules (pkg/awsutils, isSubnetValidForENICreation
// and IsSubnetExcluded, v1.23): tagged kubernetes.io/role/cni=0, never;
// untagged, only the node's own subnet (own); tagged with another value,
// unless it carries cluster tags none of which is cluster's. With cluster
// empty (CLUSTER_NAME unset) the cluster tags are not looked at, and an
// untagged node subnet is used whatever cluster tags it has: aws-node
// does both, and a node switched from it must choose as it did.
func subnetRefusal(s cloud.Subnet, own bool, cluster string) string {
	role, tagged := s.Tags[TagCNIRole]
	switch {
	case tagged && role == "0":
		return "tagged " + TagCNIRole + "=0"
	case !tagged && own:
		return ""
	case !tagged:
		return "not tagged " + TagCNIRole + "=1"
	case cluster == "":
		return ""
	}
	var others []string
	for k := range s.Tags {
		name, ok := strings.CutPrefix(k, TagClusterPrefix)
		if !ok {
			continue
		}
		if name == cluster {
			return ""
		}
		others = append(others, name)
	}
	if len(others) == 0 {
		return ""
	}
	slices.Sort(others)
	return fmt.Sprintf("tagged for cluster %s (%s<name>), not this one (CLUSTER_NAME=%s)", strings.Join(others, ", "), TagClusterPrefix, cluster)
}

// EligibleSubnets keeps the subnets new ENIs may go to, in the order
// given (most free addresses first); see subnetRefusal.
func EligibleSubnets(subnets []cloud.Subnet, primarySubnet, cluster string) []cloud.Subnet {
	var out []cloud.Subnet
	for _, s := range subnets {
		if subnetRefusal(s, s.ID == primarySubnet, cluster) == "" {
			out = append(out, s)
		}
	}
	return out
}

// createSubnets are the subnets to try, in order, for a new ENI: with
// custom networking the ENIConfig's (the action's own); with subnet
// discovery the eligible subnets of the node's VPC and zone, most free
// addresses first; otherwise the node's own, unless its tags keep ENIs
// out of it. As in aws-node, a node subnet EC2 cannot describe is used
// without discovery and refused with it (aws-node's fallback asks EC2
// about the node's subnet again, and quits when that fails); when only
// the zone's listing fails, the node's own subnet is used if its tags
// allow.
func (x *Executor) createSubnets(ctx context.Context, act ipam.Action) ([]string, error) {
	if x.CustomNetwork {
		return []string{act.SubnetID}, nil
	}
	primary := x.Self.Primary.SubnetID
	own, err := x.Cloud.DescribeSubnets(ctx, primary)
	if err == nil && len(own) != 1 {
		err = fmt.Errorf("EC2 returned %d subnets", len(own))
	}
	if err != nil {
		if !x.SubnetDiscovery {
			return []string{act.SubnetID}, nil
		}
		return nil, fmt.Errorf("no new ENI: cannot tell which subnets may take one, as the node's subnet %s could not be described: %w", primary, err)
	}
	why := subnetRefusal(own[0], true, x.ClusterName)
	if !x.SubnetDiscovery {
		if why != "" {
			return nil, fmt.Errorf("no subnet for a new ENI: the node's subnet %s is %s, and ENABLE_SUBNET_DISCOVERY=false allows no other; tag a subnet for this node's pods and set ENABLE_SUBNET_DISCOVERY=true, or change the node subnet's tags", primary, why)
		}
		return []string{act.SubnetID}, nil
	}
	all, err := x.Cloud.SubnetsInZone(ctx, own[0].VPCID, own[0].AvailabilityZone)
	if err != nil {
		if why != "" {
			return nil, errors.Join(fmt.Errorf("no subnet for a new ENI: the node's subnet %s is %s, and the other subnets of %s in %s could not be listed", primary, why, own[0].VPCID, own[0].AvailabilityZone), err)
		}
		return []string{act.SubnetID}, nil
	}
	var ids, refused []string
	for _, s := range all {
		why := subnetRefusal(s, s.ID == primary, x.ClusterName)
		if why == "" {
			ids = append(ids, s.ID)
			continue
		}
		if s.ID == primary || strings.HasPrefix(why, "tagged") {
			refused = append(refused, s.ID+" is "+why)
		}
	}
	if len(ids) == 0 {
		return nil, fmt.Errorf("no subnet for a new ENI in %s, %s: %s; tag one %s=1 (and %s%s where clusters share the VPC), or set ENABLE_SUBNET_DISCOVERY=false",
			own[0].VPCID, own[0].AvailabilityZone, strings.Join(refused, "; "), TagCNIRole, TagClusterPrefix, clusterOrPlaceholder(x.ClusterName))
	}
	return ids, nil
}

func clusterOrPlaceholder(cluster string) string {
	if cluster == "" {
		return "<CLUSTER_NAME>"
	}
	return cluster
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
