package executor

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"time"

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

// subnetsTTL is how long the subnets read for new ENIs (the node's own,
// and with discovery its VPC and zone's) are used without asking EC2
// again. aws-node asks at every ENI it creates: two DescribeSubnets
// calls each, which a thousand nodes joining at once make thousands of
// times against the account's one Describe bucket, and which no budget
// grant covered (issue 26). Subnets and their tags change rarely and by
// hand; ten minutes bounds how long a subnet an operator has just tagged
// (or untagged) waits to be seen, and a create that finds a subnet out of
// addresses, or gone, reads them again at once (forgetSubnets).
const subnetsTTL = 10 * time.Minute

// zoneSubnets are the subnets read for new ENIs, and when.
type zoneSubnets struct {
	at time.Time
	// own is the node's subnet.
	own cloud.Subnet
	// all are the VPC and zone's subnets, most free addresses first
	// (with discovery only).
	all []cloud.Subnet
}

func (x *Executor) now() time.Time {
	if x.Now != nil {
		return x.Now()
	}
	return time.Now()
}

// cachedSubnets is the last read, if still fresh.
func (x *Executor) cachedSubnets() *zoneSubnets {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.zone == nil || x.now().Sub(x.zone.at) >= subnetsTTL || x.now().Before(x.zone.at) {
		return nil
	}
	return x.zone
}

// keepSubnets caches a read, and the CIDRs it gives, so the new ENI's
// subnet need not be described again when its attachment is confirmed.
func (x *Executor) keepSubnets(z *zoneSubnets) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.zone = z
	if x.subnets == nil {
		x.subnets = make(map[string]netip.Prefix)
	}
	for _, sn := range append([]cloud.Subnet{z.own}, z.all...) {
		if sn.ID != "" && sn.CIDR.IsValid() {
			x.subnets[sn.ID] = sn.CIDR
		}
	}
}

// forgetSubnets drops the cached read: a create found a subnet full or
// gone, so free counts and the subnets themselves have moved on.
func (x *Executor) forgetSubnets() {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.zone = nil
}

// createSubnets are the subnets to try, in order, for a new ENI: with
// custom networking the ENIConfig's (the action's own); with subnet
// discovery the eligible subnets of the node's VPC and zone, most free
// addresses first; otherwise the node's own, unless its tags keep ENIs
// out of it. As in aws-node, a node subnet EC2 cannot describe is used
// without discovery and refused with it (aws-node's fallback asks EC2
// about the node's subnet again, and quits when that fails); when only
// the zone's listing fails, the node's own subnet is used if its tags
// allow. What EC2 said is kept for subnetsTTL (readSubnets). booked,
// when not nil, is the read the attach's grant was booked with: used
// even if it has expired or been dropped since, as the grant holds no
// read of its own.
func (x *Executor) createSubnets(ctx context.Context, act ipam.Action, booked *zoneSubnets) ([]string, error) {
	if x.CustomNetwork {
		return []string{act.SubnetID}, nil
	}
	primary := x.Self.Primary.SubnetID
	z := booked
	if z == nil {
		z = x.cachedSubnets()
	}
	if z == nil {
		var ret []string
		var err error
		z, ret, err = x.readSubnets(ctx, act)
		if z == nil {
			return ret, err
		}
	}
	own := z.own
	why := subnetRefusal(own, true, x.ClusterName)
	if !x.SubnetDiscovery {
		if why != "" {
			return nil, fmt.Errorf("no subnet for a new ENI: the node's subnet %s is %s, and ENABLE_SUBNET_DISCOVERY=false allows no other; tag a subnet for this node's pods and set ENABLE_SUBNET_DISCOVERY=true, or change the node subnet's tags", primary, why)
		}
		return []string{act.SubnetID}, nil
	}
	var ids, refused []string
	for _, s := range z.all {
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
			own.VPCID, own.AvailabilityZone, strings.Join(refused, "; "), TagCNIRole, TagClusterPrefix, clusterOrPlaceholder(x.ClusterName))
	}
	return ids, nil
}

// readSubnets asks EC2 for what createSubnets needs and caches it. With
// discovery and the node's VPC known (start-up's read of the attached
// ENIs, or the primary ENI's read before the first create, gives it)
// that is one DescribeSubnets call, the zone's listing, which holds the
// node's subnet too: one call, as the attach job's grant counts
// (nodestate.Job.Calls). The node's subnet is described apart only
// without discovery, when the VPC is unknown, or when the listing
// failed (aws-node's fallback). When it returns no zoneSubnets, ret and
// err are createSubnets' answer.
func (x *Executor) readSubnets(ctx context.Context, act ipam.Action) (z *zoneSubnets, ret []string, err error) {
	primary := x.Self.Primary.SubnetID
	x.mu.Lock()
	vpc := x.vpcID
	x.mu.Unlock()
	az := x.Self.AvailabilityZone
	var all []cloud.Subnet
	var listErr error
	listed := false
	if x.SubnetDiscovery && vpc != "" && az != "" {
		all, listErr = x.Cloud.SubnetsInZone(ctx, vpc, az)
		if listErr == nil {
			if i := slices.IndexFunc(all, func(s cloud.Subnet) bool { return s.ID == primary }); i >= 0 {
				z = &zoneSubnets{at: x.now(), own: all[i], all: all}
				x.keepSubnets(z)
				return z, nil, nil
			}
			// EC2 listed the zone without the node's subnet: describe it
			// apart, as below, and use the listing.
			listed = true
		}
	}
	own, err := x.Cloud.DescribeSubnets(ctx, primary)
	if err == nil && len(own) != 1 {
		err = fmt.Errorf("EC2 returned %d subnets", len(own))
	}
	if err != nil {
		if !x.SubnetDiscovery {
			return nil, []string{act.SubnetID}, nil
		}
		return nil, nil, fmt.Errorf("no new ENI: cannot tell which subnets may take one, as the node's subnet %s could not be described: %w", primary, err)
	}
	if !x.SubnetDiscovery {
		z = &zoneSubnets{at: x.now(), own: own[0]}
		x.keepSubnets(z)
		return z, nil, nil
	}
	if !listed && listErr == nil {
		all, listErr = x.Cloud.SubnetsInZone(ctx, own[0].VPCID, own[0].AvailabilityZone)
	}
	if listErr != nil {
		if why := subnetRefusal(own[0], true, x.ClusterName); why != "" {
			return nil, nil, errors.Join(fmt.Errorf("no subnet for a new ENI: the node's subnet %s is %s, and the other subnets of %s in %s could not be listed", primary, why, own[0].VPCID, own[0].AvailabilityZone), listErr)
		}
		return nil, []string{act.SubnetID}, nil
	}
	z = &zoneSubnets{at: x.now(), own: own[0], all: all}
	x.keepSubnets(z)
	return z, nil, nil
}

// subnetMoved says a create failed for something about its subnet that
// the cached read may have wrong: no addresses (or /28s) left, or no
// such subnet (InvalidSubnetID.NotFound, deleted since).
func subnetMoved(err error) bool {
	return cloud.IsSubnetExhausted(err) || strings.HasPrefix(cloud.ErrorCode(err), "InvalidSubnet")
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
