package executor

import (
	"context"
	"fmt"

	"github.com/vpcnet/vpcnet/cloud"
)

// notePrimary remembers the primary ENI's connection-tracking timeouts
// from a read of what is attached, as aws-node takes them from each of
// its reads (DescribeAllENIs): a change an operator makes to the primary
// ENI reaches the ENIs created after the next read. It also remembers
// the node's VPC, which never changes, so subnet discovery lists the
// zone's subnets in one call (subnets.go).
func (x *Executor) notePrimary(e cloud.ENI) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.primaryCT, x.primaryCTRead = e.ConnTrack, true
	if e.VPCID != "" {
		x.vpcID = e.VPCID
	}
}

// primaryConnTrack is the primary ENI's connection-tracking timeouts,
// which a new ENI is created with, as the Amazon VPC CNI creates its ENIs
// (v1.23): the idle connections of pods on any ENI then last as long as
// the node's own. Start-up reads what is attached before any attach, so
// EC2 is asked here only by an executor that never read it; an ENI is
// not created with the timeouts unknown.
func (x *Executor) primaryConnTrack(ctx context.Context) (cloud.ConnTrack, error) {
	x.mu.Lock()
	ct, read := x.primaryCT, x.primaryCTRead
	x.mu.Unlock()
	if read {
		return ct, nil
	}
	id := x.Self.Primary.ID
	enis, err := x.Cloud.DescribeENIs(ctx, id)
	if err == nil && len(enis) != 1 {
		err = fmt.Errorf("EC2 returned %d interfaces", len(enis))
	}
	if err != nil {
		return cloud.ConnTrack{}, fmt.Errorf("no new ENI: the primary ENI %s, whose connection-tracking timeouts it would carry, could not be described: %w", id, err)
	}
	x.notePrimary(enis[0])
	return enis[0].ConnTrack, nil
}
