package cloud

import (
	"context"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/ec2/types"
)

// A create sends the timeouts set, and only those (as aws-node does); an
// ENI without any sends no ConnectionTrackingSpecification at all.
func TestCreateENISendsTheConnectionTrackingTimeoutsSet(t *testing.T) {
	f := createFake()
	c, _ := newFakeClient(t, f, nil)
	ctx := context.Background()
	for _, ct := range []ConnTrack{{TCPEstablished: 3600, UDP: 45}, {}} {
		if _, err := c.CreateENI(ctx, CreateENIInput{SubnetID: "subnet-a", SecondaryAddresses: 1, ConnTrack: ct}); err != nil {
			t.Fatal(err)
		}
	}
	reqs := f.requests()
	for i, want := range []map[string]string{
		{"ConnectionTrackingSpecification.TcpEstablishedTimeout": "3600", "ConnectionTrackingSpecification.UdpTimeout": "45", "ConnectionTrackingSpecification.UdpStreamTimeout": ""},
		{"ConnectionTrackingSpecification.TcpEstablishedTimeout": "", "ConnectionTrackingSpecification.UdpTimeout": "", "ConnectionTrackingSpecification.UdpStreamTimeout": ""},
	} {
		for k, v := range want {
			if got := reqs[i].Get(k); got != v {
				t.Errorf("create %d: %s = %q, want %q", i, k, got, v)
			}
		}
	}
	if _, err := c.CreateENI(ctx, CreateENIInput{SubnetID: "subnet-a", ConnTrack: ConnTrack{UDP: -1}}); err == nil {
		t.Error("a negative timeout was sent to EC2")
	}
}

// Creates differing only in their timeouts are two creates; a create
// without timeouts keeps the token it had before timeouts existed.
func TestClientTokenCoversConnectionTracking(t *testing.T) {
	in := CreateENIInput{SubnetID: "subnet-a", SecondaryAddresses: 4, CreatedAt: time.Date(2026, 8, 1, 0, 0, 0, 0, time.UTC)}
	with := in
	with.ConnTrack = ConnTrack{UDPStream: 60}
	if clientToken("i-1", "c", in) == clientToken("i-1", "c", with) {
		t.Error("creates differing in their timeouts share a token; EC2 would answer the second with the first ENI")
	}
	// The token this input had before CreateENIInput had ConnTrack.
	if got, want := clientToken("i-1", "c", in), "vpcnet-c8d66da2b494928d3af985dfd9f81ed8baf50c347526ecaf"; got != want {
		t.Errorf("token %s, want %s as before timeouts existed", got, want)
	}
}

func TestENIsConnectionTrackingIsReadFromEC2(t *testing.T) {
	v := int32(120)
	e, err := eniFromEC2(types.NetworkInterface{ConnectionTrackingConfiguration: &types.ConnectionTrackingConfiguration{TcpEstablishedTimeout: &v}})
	if err != nil || e.ConnTrack != (ConnTrack{TCPEstablished: 120}) {
		t.Errorf("eniFromEC2 = %+v, %v; want TCP established 120", e.ConnTrack, err)
	}
	e, err = eniFromEC2(types.NetworkInterface{})
	if err != nil || !e.ConnTrack.IsZero() {
		t.Errorf("eniFromEC2 without timeouts = %+v, %v", e.ConnTrack, err)
	}
}
