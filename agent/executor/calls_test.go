package executor

import (
	"context"
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
