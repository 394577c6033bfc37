package cloud

import (
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"
)

// ConnTrack is an ENI's connection-tracking idle timeouts in seconds
// (EC2's ConnectionTrackingConfiguration), 0 where EC2 gives none: the
// instance type's default then applies. An operator sets them on the
// primary ENI (launch template, RunInstances); the Amazon VPC CNI copies
// them to every ENI it creates (pkg/awsutils, setConnectionTrackingSettings,
// v1.23), so the pods on a secondary ENI keep idle connections as long as
// the node's own. The zero value sets nothing.
type ConnTrack struct {
	TCPEstablished int
	UDPStream      int
	UDP            int
}

// IsZero says no timeout is set.
func (c ConnTrack) IsZero() bool { return c == ConnTrack{} }

func connTrackFromEC2(r *types.ConnectionTrackingConfiguration) ConnTrack {
	if r == nil {
		return ConnTrack{}
	}
	return ConnTrack{
		TCPEstablished: int(aws.ToInt32(r.TcpEstablishedTimeout)),
		UDPStream:      int(aws.ToInt32(r.UdpStreamTimeout)),
		UDP:            int(aws.ToInt32(r.UdpTimeout)),
	}
}

// request is the specification a create sends: only the timeouts set,
// as aws-node sends them, and none at all for the zero value.
func (c ConnTrack) request() *types.ConnectionTrackingSpecificationRequest {
	if c.IsZero() {
		return nil
	}
	set := func(v int) *int32 {
		if v <= 0 {
			return nil
		}
		return aws.Int32(int32(v))
	}
	return &types.ConnectionTrackingSpecificationRequest{
		TcpEstablishedTimeout: set(c.TCPEstablished),
		UdpStreamTimeout:      set(c.UDPStream),
		UdpTimeout:            set(c.UDP),
	}
}
