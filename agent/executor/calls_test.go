package executor

import (
	"context"
	"maps"
	"net/netip"
	"slices"
	"testing"
	"time"

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

// ListENIs is the node's primary ENI alone, in subnet-node.
func (c *zoneCloud) ListENIs(context.Context, cloud.ENIFilter) ([]cloud.ENI, error) {
	c.calls["DescribeNetworkInterfaces"]++
	return []cloud.ENI{{ID: "eni-p", SubnetID: "subnet-node", VPCID: "vpc-1", AvailabilityZone: "az-a", PrimaryIP: netip.MustParseAddr("10.0.0.4"),
		Attachment: &cloud.Attachment{ID: "att-p", InstanceID: "i-1", State: cloud.AttachmentAttached, DeleteOnTermination: true}}}, nil
}

// With subnet discovery, start-up reads the zone's subnets in the one
// DescribeSubnets its grant books, and for subnetsTTL no attach, confirm
// or read of the attached ENIs books another. A grant books every action
// it lists at the slot of the busiest: booked with each node's creates,
// DescribeSubnets (and with it the confirms' and reads' Describe calls)
// waited behind the cluster's whole create backlog, and a 1,000-node join
// ended at 1.34 times its lower bound instead of 1.16.
func TestAfterStartUpNoJobBooksADescribeSubnetsWhileTheZonesSubnetsAreFresh(t *testing.T) {
	c := &zoneCloud{calls: map[string]int{}}
	now := time.Date(2026, 11, 27, 10, 0, 0, 0, time.UTC)
	primary := cloud.Interface{ID: "eni-p", SubnetID: "subnet-node"}
	x := &Executor{Cloud: c, Host: noRoutesHost{}, InstanceID: "i-1", SubnetDiscovery: true, Now: func() time.Time { return now },
		Self: cloud.Self{InstanceID: "i-1", AvailabilityZone: "az-a", Primary: primary, Interfaces: []cloud.Interface{primary}}}
	attach := nodestate.Job{ID: 1, Kind: nodestate.JobAction, Device: 1,
		Action: ipam.Action{Kind: ipam.AttachENI, Count: 2, SubnetID: "subnet-node", SecurityGroups: []string{"sg-a"}}}
	read := nodestate.Job{ID: 2, Kind: nodestate.JobResync}
	if !slices.Contains(x.Calls(attach), "DescribeSubnets") || !slices.Contains(x.Calls(read), "DescribeSubnets") {
		t.Fatalf("before start-up an attach asks for %v and a read of the attached ENIs for %v; both may describe subnets", x.Calls(attach), x.Calls(read))
	}
	if _, err := x.Boot(context.Background()); err != nil {
		t.Fatal(err)
	}
	if want := map[string]int{"DescribeNetworkInterfaces": 1, "DescribeSubnets": 1}; !maps.Equal(c.calls, want) {
		t.Errorf("start-up called %v; want %v, what its grant books", c.calls, want)
	}
	for _, j := range []nodestate.Job{attach, read} {
		if calls := x.Calls(j); slices.Contains(calls, "DescribeSubnets") {
			t.Errorf("after start-up read the zone's subnets, a job of kind %v asks for %v", j.Kind, calls)
		}
	}
	granted := x.Calls(attach)
	_, calls := attachWith(t, x, c, 1)
	for call := range calls {
		if !slices.Contains(granted, call) {
			t.Errorf("the attach called %s, which it did not ask for (%v; it called %v)", call, granted, calls)
		}
	}
	// Booked while the subnets were fresh, run after they expired (its
	// grant waited): it creates in them and reads nothing it was not
	// granted. Found by the simulation's I11.
	attach.ID = 2
	granted = x.Calls(attach)
	now = now.Add(subnetsTTL)
	if _, calls := attachWith(t, x, c, 2); calls["DescribeSubnets"] != 0 || slices.Contains(granted, "DescribeSubnets") {
		t.Errorf("an attach booked with fresh subnets and run after they expired was granted %v and called %v", granted, calls)
	}
	attach.ID = 3
	if !slices.Contains(x.Calls(attach), "DescribeSubnets") {
		t.Errorf("%s after start-up an attach asks for %v; it reads the subnets again and must book that", subnetsTTL, x.Calls(attach))
	}
	// With prefixes a create refused for fragmentation asks the subnet's
	// free count: booked whatever the cache holds.
	now = now.Add(-subnetsTTL)
	attach.Action.Prefixes = true
	if !slices.Contains(x.Calls(attach), "DescribeSubnets") {
		t.Errorf("a prefix attach asks for %v; a fragmented subnet's free count is a DescribeSubnets", x.Calls(attach))
	}
}
