package executor

import (
	"context"
	"net/netip"
	"slices"
	"testing"

	"github.com/vpcnet/vpcnet/agent/nodestate"
	"github.com/vpcnet/vpcnet/cloud"
	"github.com/vpcnet/vpcnet/ipam"
)

// recordingCloud names the EC2 action of every call it passes on.
type recordingCloud struct {
	*attachFailCloud
	calls []string
}

func (c *recordingCloud) DescribeSubnets(ctx context.Context, ids ...string) ([]cloud.Subnet, error) {
	c.calls = append(c.calls, "DescribeSubnets")
	return c.attachFailCloud.DescribeSubnets(ctx, ids...)
}

func (c *recordingCloud) DescribeENIs(ctx context.Context, ids ...string) ([]cloud.ENI, error) {
	c.calls = append(c.calls, "DescribeNetworkInterfaces")
	return c.attachFailCloud.DescribeENIs(ctx, ids...)
}

func (c *recordingCloud) CreateENI(ctx context.Context, in cloud.CreateENIInput) (cloud.ENI, error) {
	c.calls = append(c.calls, "CreateNetworkInterface")
	return c.attachFailCloud.CreateENI(ctx, in)
}

func (c *recordingCloud) AttachENI(ctx context.Context, eni, inst string, dev int) (string, error) {
	c.calls = append(c.calls, "AttachNetworkInterface")
	return c.attachFailCloud.AttachENI(ctx, eni, inst, dev)
}

func (c *recordingCloud) DeleteENI(ctx context.Context, id string) error {
	c.calls = append(c.calls, "DeleteNetworkInterface")
	return c.attachFailCloud.DeleteENI(ctx, id)
}

// Found by the simulation's I11 (no EC2 call outside a grant while the
// budget controller answers): an attach describes the node's subnet (and
// the primary ENI) and deletes the ENI whose attach failed, calls its
// job did not list, so the cluster's budget never granted them.
func TestAnAttachIsGrantedEveryCallItMakes(t *testing.T) {
	c := &recordingCloud{attachFailCloud: &attachFailCloud{deleted: map[string]bool{}}}
	x := &Executor{Cloud: c, Host: noRoutesHost{}, InstanceID: "i-1",
		Self: cloud.Self{InstanceID: "i-1", Primary: cloud.Interface{ID: "eni-p", SubnetID: "subnet-a"}}}
	j := nodestate.Job{ID: 1, Kind: nodestate.JobAction, Device: 1,
		Action: ipam.Action{Kind: ipam.AttachENI, Count: 2, SubnetID: "subnet-a", SecurityGroups: []string{"sg-a"}}}
	x.Run(context.Background(), j)
	for _, call := range c.calls {
		if !slices.Contains(j.Calls(), call) {
			t.Errorf("the attach called %s, which its job does not list among its calls %v (it made %v)", call, j.Calls(), c.calls)
		}
	}
}

// A job asks the cluster's budget only for the reads it will make: once
// start-up has read the primary ENI, an attach does not book a
// DescribeNetworkInterfaces for it, and the confirm of an ENI created in
// a subnet IMDS showed books no DescribeSubnets. Booked at every job,
// those reads held a 300-node join at 1.41 times its lower bound.
func TestAJobAsksTheBudgetOnlyForTheReadsItWillMake(t *testing.T) {
	c := &recordingCloud{attachFailCloud: &attachFailCloud{deleted: map[string]bool{}}}
	primary := cloud.Interface{ID: "eni-p", SubnetID: "subnet-a", SubnetCIDR: netip.MustParsePrefix("10.0.0.0/24")}
	x := &Executor{Cloud: c, Host: noRoutesHost{}, InstanceID: "i-1",
		Self: cloud.Self{InstanceID: "i-1", Primary: primary, Interfaces: []cloud.Interface{primary}}}
	attach := nodestate.Job{ID: 1, Kind: nodestate.JobAction, Device: 1,
		Action: ipam.Action{Kind: ipam.AttachENI, Count: 2, SubnetID: "subnet-a", SecurityGroups: []string{"sg-a"}}}
	if !slices.Contains(x.Calls(attach), "DescribeNetworkInterfaces") {
		t.Errorf("before any read of the primary ENI an attach asks for %v; want its DescribeNetworkInterfaces", x.Calls(attach))
	}
	if _, err := x.Attached(context.Background(), nil); err != nil { // start-up's read
		t.Fatal(err)
	}
	granted := x.Calls(attach)
	if slices.Contains(granted, "DescribeNetworkInterfaces") {
		t.Errorf("after start-up read the primary ENI, an attach still asks for %v", granted)
	}
	c.calls = nil
	res, _ := x.Run(context.Background(), attach).(nodestate.ActionResult)
	for _, call := range c.calls {
		if !slices.Contains(granted, call) {
			t.Errorf("the attach called %s, which it did not ask for (%v)", call, granted)
		}
	}
	if res.ENIID == "" {
		t.Fatalf("the attach created no ENI (%+v); the confirm below proves nothing", res)
	}
	confirm := nodestate.Job{ID: 2, Kind: nodestate.JobConfirmAttach, Device: 1, ENIID: res.ENIID}
	if calls := x.Calls(confirm); slices.Contains(calls, "DescribeSubnets") || !slices.Contains(calls, "DescribeNetworkInterfaces") {
		t.Errorf("the confirm of an ENI in the node's own subnet asks for %v; want DescribeNetworkInterfaces alone", calls)
	}
	other := nodestate.Job{ID: 3, Kind: nodestate.JobConfirmAttach, Device: 2, ENIID: "eni-unknown"}
	if calls := x.Calls(other); !slices.Contains(calls, "DescribeSubnets") {
		t.Errorf("the confirm of an ENI this executor did not create asks for %v; its subnet may need describing", calls)
	}
}
