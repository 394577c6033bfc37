package executor

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/aws/smithy-go"

	"github.com/vpcnet/vpcnet/agent/nodestate"
	"github.com/vpcnet/vpcnet/cloud"
	"github.com/vpcnet/vpcnet/ipam"
)

// zoneCloud is a node's VPC and zone: its own subnet, untagged, and a
// larger one tagged for pods. It counts calls by EC2 action; creates in
// the subnets of full are refused for want of addresses.
type zoneCloud struct {
	Cloud
	calls map[string]int
	full  map[string]bool
	enis  int
}

func (c *zoneCloud) subnets() []cloud.Subnet {
	return []cloud.Subnet{
		{ID: "subnet-pods", VPCID: "vpc-1", AvailabilityZone: "az-a", CIDR: netip.MustParsePrefix("10.0.4.0/22"), AvailableAddresses: 1000,
			Tags: map[string]string{TagCNIRole: "1"}},
		{ID: "subnet-node", VPCID: "vpc-1", AvailabilityZone: "az-a", CIDR: netip.MustParsePrefix("10.0.0.0/24"), AvailableAddresses: 200},
	}
}

func (c *zoneCloud) DescribeSubnets(_ context.Context, ids ...string) ([]cloud.Subnet, error) {
	c.calls["DescribeSubnets"]++
	return slices.DeleteFunc(c.subnets(), func(s cloud.Subnet) bool { return !slices.Contains(ids, s.ID) }), nil
}

func (c *zoneCloud) SubnetsInZone(_ context.Context, vpc, az string) ([]cloud.Subnet, error) {
	c.calls["DescribeSubnets"]++
	if vpc != "vpc-1" || az != "az-a" {
		return nil, nil
	}
	return c.subnets(), nil
}

func (c *zoneCloud) DescribeENIs(_ context.Context, ids ...string) ([]cloud.ENI, error) {
	c.calls["DescribeNetworkInterfaces"]++
	return []cloud.ENI{{ID: ids[0], SubnetID: "subnet-node", VPCID: "vpc-1", AvailabilityZone: "az-a"}}, nil
}

func (c *zoneCloud) CreateENI(_ context.Context, in cloud.CreateENIInput) (cloud.ENI, error) {
	c.calls["CreateNetworkInterface"]++
	if c.full[in.SubnetID] {
		return cloud.ENI{}, &smithy.GenericAPIError{Code: "InsufficientFreeAddressesInSubnet", Message: "no free addresses"}
	}
	c.enis++
	return cloud.ENI{ID: fmt.Sprintf("eni-%d", c.enis), SubnetID: in.SubnetID, MAC: fmt.Sprintf("02:00:00:00:00:%02x", c.enis)}, nil
}

func (c *zoneCloud) AttachENI(context.Context, string, string, int) (string, error) {
	c.calls["AttachNetworkInterface"]++
	return fmt.Sprintf("att-%d", c.enis), nil
}

func (c *zoneCloud) SetDeleteOnTermination(context.Context, string, string, bool) error {
	c.calls["ModifyNetworkInterfaceAttribute"]++
	return nil
}

// attachWith runs one attach job with subnet discovery and returns its
// calls by action.
func attachWith(t *testing.T, x *Executor, c *zoneCloud, dev int) (nodestate.Job, map[string]int) {
	t.Helper()
	c.calls = map[string]int{}
	j := nodestate.Job{ID: uint64(dev), Kind: nodestate.JobAction, Device: dev,
		Action: ipam.Action{Kind: ipam.AttachENI, Count: 2, SubnetID: "subnet-node", SecurityGroups: []string{"sg-a"}}}
	res := x.Run(context.Background(), j).(nodestate.ActionResult)
	if res.Err != nil && !c.full["subnet-pods"] {
		t.Fatalf("attach: %v", res.Err)
	}
	return j, c.calls
}

func discoveringExecutor(c *zoneCloud, now *time.Time) *Executor {
	return &Executor{Cloud: c, Host: noRoutesHost{}, InstanceID: "i-1", SubnetDiscovery: true, ClusterName: "blue",
		Now:  func() time.Time { return *now },
		Self: cloud.Self{InstanceID: "i-1", AvailabilityZone: "az-a", Primary: cloud.Interface{ID: "eni-p", SubnetID: "subnet-node"}}}
}

// Issue 26: with subnet discovery (the default) every ENI create made
// two DescribeSubnets calls (the node's subnet, then its zone's), and a
// budget grant counts each action once: one call a create was never
// granted, on a thousand nodes at once. Now an attach makes each call
// its job lists at most once, and the subnets are read once per
// subnetsTTL, not at every create.
func TestDiscoverysSubnetReadsAreWithinTheAttachsGrant(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	c := &zoneCloud{full: map[string]bool{}}
	x := discoveringExecutor(c, &now)
	j, calls := attachWith(t, x, c, 1)
	for action, k := range calls {
		if !slices.Contains(j.Calls(), action) {
			t.Errorf("the attach called %s, which its job does not list among its calls %v", action, j.Calls())
		}
		if k > 1 {
			t.Errorf("the attach called %s %d times; its grant counts each action of Job.Calls once (calls %v)", action, k, calls)
		}
	}
	if calls["DescribeSubnets"] != 1 {
		t.Errorf("first attach: %d DescribeSubnets calls, want the zone's listing", calls["DescribeSubnets"])
	}
	now = now.Add(subnetsTTL - time.Second)
	if _, calls := attachWith(t, x, c, 2); calls["DescribeSubnets"] != 0 {
		t.Errorf("an attach %s after the first made %d DescribeSubnets calls; the subnets read are kept %s", subnetsTTL-time.Second, calls["DescribeSubnets"], subnetsTTL)
	}
	now = now.Add(2 * time.Second)
	if _, calls := attachWith(t, x, c, 3); calls["DescribeSubnets"] != 1 {
		t.Errorf("an attach past %s made %d DescribeSubnets calls; want the zone read again", subnetsTTL, calls["DescribeSubnets"])
	}
}

// A create refused for want of addresses means the cached free counts
// are wrong: the next create reads the subnets again (and would find a
// subnet tagged for pods meanwhile).
func TestASubnetOutOfAddressesIsReadAgainAtTheNextCreate(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	c := &zoneCloud{full: map[string]bool{}}
	x := discoveringExecutor(c, &now)
	attachWith(t, x, c, 1)
	c.full["subnet-pods"] = true
	attachWith(t, x, c, 2) // passes to subnet-node
	delete(c.full, "subnet-pods")
	if _, calls := attachWith(t, x, c, 3); calls["DescribeSubnets"] != 1 {
		t.Errorf("after a create refused with InsufficientFreeAddressesInSubnet the next attach made %d DescribeSubnets calls; want the zone read again", calls["DescribeSubnets"])
	}
}
