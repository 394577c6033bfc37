package executor

import (
	"context"
	"net/netip"
	"testing"

	"github.com/aws/smithy-go"

	"github.com/vpcnet/vpcnet/cloud"
)

// primaryCloud lists the primary ENI, with timeouts, among what is
// attached, and describes it alone; it counts descriptions.
type primaryCloud struct {
	Cloud
	ct        cloud.ConnTrack
	fail      bool
	described int
}

func (c *primaryCloud) eni() cloud.ENI {
	return cloud.ENI{ID: "eni-p", SubnetID: "subnet-a", ConnTrack: c.ct, InterfaceType: "interface",
		Attachment: &cloud.Attachment{InstanceID: "i-1", State: cloud.AttachmentAttached}}
}

func (c *primaryCloud) ListENIs(context.Context, cloud.ENIFilter) ([]cloud.ENI, error) {
	return []cloud.ENI{c.eni()}, nil
}

func (c *primaryCloud) DescribeENIs(context.Context, ...string) ([]cloud.ENI, error) {
	c.described++
	if c.fail {
		return nil, &smithy.GenericAPIError{Code: "RequestLimitExceeded"}
	}
	return []cloud.ENI{c.eni()}, nil
}

// The timeouts new ENIs carry are those of the primary ENI's last read:
// a read of what is attached gives them without another call, a changed
// primary shows at the next read, and an executor that never read asks
// EC2 once, creating nothing while EC2 cannot say.
func TestNewENIsTakeThePrimaryENIsTimeoutsFromTheLastRead(t *testing.T) {
	ctx := context.Background()
	primary := cloud.Interface{ID: "eni-p", SubnetID: "subnet-a", SubnetCIDR: netip.MustParsePrefix("10.0.0.0/24")}
	self := cloud.Self{Primary: primary, Interfaces: []cloud.Interface{primary}}

	c := &primaryCloud{fail: true}
	x := &Executor{Cloud: c, InstanceID: "i-1", Self: self}
	if _, err := x.primaryConnTrack(ctx); err == nil {
		t.Fatal("timeouts known although EC2 could not describe the primary ENI")
	}
	c.fail, c.ct = false, cloud.ConnTrack{UDP: 45}
	if ct, err := x.primaryConnTrack(ctx); err != nil || ct != c.ct {
		t.Fatalf("never read: %+v, %v; want %+v from EC2", ct, err, c.ct)
	}

	c = &primaryCloud{ct: cloud.ConnTrack{TCPEstablished: 3600}}
	x = &Executor{Cloud: c, InstanceID: "i-1", Self: self}
	if _, err := x.Attached(ctx, nil); err != nil {
		t.Fatal(err)
	}
	c.ct = cloud.ConnTrack{TCPEstablished: 120}
	if ct, err := x.primaryConnTrack(ctx); err != nil || ct != (cloud.ConnTrack{TCPEstablished: 3600}) || c.described != 0 {
		t.Fatalf("after a read: %+v, %v, %d descriptions; want the read's timeouts and no call", ct, err, c.described)
	}
	if _, err := x.Attached(ctx, nil); err != nil {
		t.Fatal(err)
	}
	if ct, _ := x.primaryConnTrack(ctx); ct != c.ct {
		t.Errorf("after the primary changed and was read again: %+v, want %+v", ct, c.ct)
	}
}
