package executor

import (
	"context"
	"fmt"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/aws/smithy-go"

	"github.com/vpcnet/vpcnet/agent/nodestate"
	"github.com/vpcnet/vpcnet/cloud"
	"github.com/vpcnet/vpcnet/ipam"
)

// attachFailCloud is an EC2 where every attach fails and the first
// deletes are throttled: the ENIs it creates are available until deleted.
type attachFailCloud struct {
	Cloud
	// throttleDeletes is how many DeleteENI calls are refused first.
	throttleDeletes int

	mu      sync.Mutex // guards below
	created []string
	deleted map[string]bool
}

var _ Cloud = (*attachFailCloud)(nil)

func throttled(op string) error {
	return &smithy.OperationError{ServiceID: "EC2", OperationName: op,
		Err: &smithy.GenericAPIError{Code: "RequestLimitExceeded", Message: "Request limit exceeded."}}
}

func (c *attachFailCloud) DescribeSelf(context.Context) (cloud.Self, error) {
	return cloud.Self{}, fmt.Errorf("no IMDS in this test")
}

func (c *attachFailCloud) ListENIs(context.Context, cloud.ENIFilter) ([]cloud.ENI, error) {
	return []cloud.ENI{{ID: "eni-p", SubnetID: "subnet-a", PrimaryIP: netip.MustParseAddr("10.0.0.4"),
		Attachment:   &cloud.Attachment{ID: "att-p", InstanceID: "i-1", State: cloud.AttachmentAttached, DeleteOnTermination: true},
		SecondaryIPs: []netip.Addr{netip.MustParseAddr("10.0.0.5"), netip.MustParseAddr("10.0.0.6")}}}, nil
}

func (c *attachFailCloud) DescribeSubnets(_ context.Context, ids ...string) ([]cloud.Subnet, error) {
	return []cloud.Subnet{{ID: ids[0], CIDR: netip.MustParsePrefix("10.0.0.0/24")}}, nil
}

func (c *attachFailCloud) CreateENI(context.Context, cloud.CreateENIInput) (cloud.ENI, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	id := fmt.Sprintf("eni-%d", len(c.created)+1)
	c.created = append(c.created, id)
	return cloud.ENI{ID: id, Status: cloud.StatusAvailable, SubnetID: "subnet-a"}, nil
}

func (c *attachFailCloud) AttachENI(context.Context, string, string, int) (string, error) {
	return "", &smithy.OperationError{ServiceID: "EC2", OperationName: "AttachNetworkInterface",
		Err: &smithy.GenericAPIError{Code: "InternalError", Message: "An internal error has occurred."}}
}

func (c *attachFailCloud) DeleteENI(_ context.Context, id string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.throttleDeletes > 0 {
		c.throttleDeletes--
		return throttled("DeleteNetworkInterface")
	}
	if c.deleted[id] {
		return &smithy.GenericAPIError{Code: "InvalidNetworkInterfaceID.NotFound", Message: id}
	}
	c.deleted[id] = true
	return nil
}

func (c *attachFailCloud) DescribeENIs(_ context.Context, ids ...string) ([]cloud.ENI, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.deleted[ids[0]] {
		return nil, &smithy.GenericAPIError{Code: "InvalidNetworkInterfaceID.NotFound", Message: ids[0]}
	}
	return []cloud.ENI{{ID: ids[0], Status: cloud.StatusAvailable, SubnetID: "subnet-a"}}, nil
}

// available are the ENIs created and not deleted.
func (c *attachFailCloud) available() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for _, id := range c.created {
		if !c.deleted[id] {
			out = append(out, id)
		}
	}
	return out
}

type noRoutesHost struct{ Host }

func (noRoutesHost) PodAddrs(context.Context) ([]nodestate.Route, error) { return nil, nil }

// Issue 25: an ENI whose attach fails was deleted once, and a throttled
// delete left it available (holding subnet addresses) until the
// leaked-ENI collector found it, up to 40 minutes later. It is deleted
// until EC2 confirms, as DeleteOnTermination is set.
func TestAnENIWhoseAttachFailedIsDeletedEvenWhenItsFirstDeletesAreThrottled(t *testing.T) {
	c := &attachFailCloud{throttleDeletes: 3, deleted: map[string]bool{}}
	x := &Executor{Cloud: c, Host: noRoutesHost{}, InstanceID: "i-1"}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	plan := ipam.DefaultPlanConfig()
	plan.SubnetID, plan.SecurityGroups = "subnet-a", []string{"sg-a"}
	cfg := nodestate.Config{InstanceID: "i-1", InstanceType: "t.test", Plan: plan, Limits: ipam.Limits{MaxENIs: 3, IPv4PerENI: 3},
		Cooldown: 30 * time.Second, AddWait: 10 * time.Second, DemandMemory: time.Minute, ReclaimAfter: 2 * time.Minute,
		DetachHold: 5 * time.Minute, ResyncInterval: time.Minute, AttachTimeout: 2 * time.Minute, Classify: Classify}
	at, err := x.Attached(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	n, err := nodestate.New(cfg, nodestate.Boot{CheckpointMissing: true, ENIs: at.ENIs, Devices: at.Devices}, t0)
	if err != nil {
		t.Fatal(err)
	}
	// Pods wait, so the pool grows: every attach fails.
	for i := range 4 {
		n.Step(t0, nodestate.AddRequest{ID: uint64(i + 1), Key: ipam.Key{Network: "n", ContainerID: fmt.Sprint(i), IfName: "eth0"}})
	}
	now := t0
	for now.Before(t0.Add(5 * time.Minute)) {
		rd := n.Ready()
		if rd.Persist != nil {
			n.Step(now, nodestate.Persisted{Version: rd.Persist.Version})
		}
		for _, j := range rd.Jobs {
			n.Step(now, x.Run(context.Background(), j))
		}
		if rd.Persist == nil && len(rd.Jobs) == 0 {
			if rd.Wake.IsZero() {
				break
			}
			now = rd.Wake
			n.Step(now, nodestate.Tick{})
		}
	}
	if len(c.created) == 0 {
		t.Fatal("no ENI was created: the test did not exercise a failed attach")
	}
	if left := c.available(); len(left) > 0 {
		t.Fatalf("ENIs %v of %v, created for attaches that failed, are still available 5 minutes later: a throttled delete was not tried again", left, c.created)
	}
}
