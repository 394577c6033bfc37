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

// shrinkCloud shows one ENI attached to the instance with two secondary
// addresses and records what the executor gives back; nothing else is
// called.
type shrinkCloud struct {
	Cloud
	unassigned []netip.Addr
	detached   []string
}

var (
	usedAddr = netip.MustParseAddr("10.0.0.10")
	freeAddr = netip.MustParseAddr("10.0.0.11")
)

func (c *shrinkCloud) DescribeENIs(_ context.Context, ids ...string) ([]cloud.ENI, error) {
	return []cloud.ENI{{ID: ids[0], Attachment: &cloud.Attachment{ID: "attach-1", InstanceID: "i-1", DeviceIndex: 1, State: cloud.AttachmentAttached},
		SecondaryIPs: []netip.Addr{usedAddr, freeAddr}}}, nil
}

func (c *shrinkCloud) UnassignAddresses(_ context.Context, _ string, addrs []netip.Addr) error {
	c.unassigned = append(c.unassigned, addrs...)
	return nil
}

func (c *shrinkCloud) DetachENI(_ context.Context, attachmentID string, _ bool) error {
	c.detached = append(c.detached, attachmentID)
	return nil
}

// routedHost routes usedAddr to a pod: the state machine, wrongly, took
// it for free (an older checkpoint, a pod wired after its last host read).
type routedHost struct{ Host }

func (routedHost) PodAddrs(context.Context) ([]nodestate.Route, error) {
	return []nodestate.Route{{Addr: usedAddr, Link: "eni0123456789a"}}, nil
}

func shrinkJob(kind ipam.ActionKind) nodestate.Job {
	return nodestate.Job{ID: 1, Kind: nodestate.JobAction, Action: ipam.Action{Kind: kind, ENIID: "eni-1",
		Blocks: []netip.Prefix{netip.PrefixFrom(usedAddr, 32), netip.PrefixFrom(freeAddr, 32)}}}
}

// The executor's last word before giving an address back is the host's
// routes, read right then: whatever the machine believes, an address
// routed to a pod stays.
func TestReleaseKeepsAnAddressTheHostRoutesToAPod(t *testing.T) {
	c := &shrinkCloud{}
	x := &Executor{Cloud: c, Host: routedHost{}, InstanceID: "i-1"}
	res, ok := x.Run(context.Background(), shrinkJob(ipam.ReleaseBlocks)).(nodestate.ActionResult)
	if !ok || res.Err != nil {
		t.Fatalf("release = %+v, want a result without error", res)
	}
	if slices.Contains(c.unassigned, usedAddr) || !slices.Contains(c.unassigned, freeAddr) {
		t.Fatalf("released %v, want only %s: %s is routed to a pod", c.unassigned, freeAddr, usedAddr)
	}
	if len(res.Routed) == 0 {
		t.Errorf("the result does not tell the machine which routes kept the address")
	}
}

func TestDetachKeepsAnENIWhoseAddressTheHostRoutesToAPod(t *testing.T) {
	c := &shrinkCloud{}
	x := &Executor{Cloud: c, Host: routedHost{}, InstanceID: "i-1"}
	res, ok := x.Run(context.Background(), shrinkJob(ipam.DetachENI)).(nodestate.ActionResult)
	if !ok || res.Err != nil || !res.Skipped {
		t.Fatalf("detach = %+v, want it skipped", res)
	}
	if len(c.detached) != 0 {
		t.Fatalf("detached %v although the host routes %s on it", c.detached, usedAddr)
	}
}
