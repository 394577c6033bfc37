package cloud

import (
	"context"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/vpcnet/vpcnet/sim"
	"github.com/vpcnet/vpcnet/sim/simtest"
)

// A p4d.24xlarge with an EFA interface on network card 1 at device index
// 0: the client reports each interface's type and card, from EC2 and from
// IMDS, so the agent can tell the primary ENI from the EFA.
func TestSimInterfaceTypeAndNetworkCard(t *testing.T) {
	simtest.IsolateAWSEnv(t)
	cl := simtest.New(t, `
region: us-west-2
vpc: {id: vpc-0sim, cidrs: [10.0.0.0/16]}
subnets: [{id: subnet-a, az: us-west-2a, cidr: 10.0.0.0/24}]
securityGroups: [sg-0sim]
instances:
- id: i-gpu
  type: p4d.24xlarge
  subnet: subnet-a
  interfaces: [{type: efa, networkCard: 1, deviceIndex: 0}, {type: trunk, deviceIndex: 1}]
seed: 1
`, sim.Options{})
	c, err := New(context.Background(), Options{
		EC2Endpoint:  simtest.Serve(t, cl.EC2Handler()),
		IMDSEndpoint: simtest.Serve(t, cl.IMDSHandler("i-gpu")),
		Credentials:  credentials.NewStaticCredentialsProvider("AKIDTEST", "secret", ""),
		ClusterName:  "sim-cluster",
		MaxBackoff:   2 * time.Millisecond,
		Registerer:   prometheus.NewRegistry(),
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	enis, err := c.ListENIs(ctx, ENIFilter{InstanceID: "i-gpu"})
	if err != nil {
		t.Fatal(err)
	}
	type placed struct {
		typ       string
		card, dev int
	}
	got := map[placed]bool{}
	for _, e := range enis {
		got[placed{e.InterfaceType, e.Attachment.NetworkCardIndex, e.Attachment.DeviceIndex}] = true
	}
	for _, want := range []placed{{"interface", 0, 0}, {"efa", 1, 0}, {"trunk", 0, 1}} {
		if !got[want] {
			t.Errorf("ListENIs has no %+v; got %v", want, got)
		}
	}
	self, err := c.DescribeSelf(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if self.Primary.NetworkCard != 0 || self.Primary.DeviceNumber != 0 {
		t.Errorf("primary on card %d device %d", self.Primary.NetworkCard, self.Primary.DeviceNumber)
	}
	cards := map[int]int{}
	for _, i := range self.Interfaces {
		cards[i.NetworkCard]++
	}
	if cards[0] != 2 || cards[1] != 1 || self.Interfaces[0].ID != self.Primary.ID {
		t.Errorf("IMDS interfaces by card %v, first %s; want 2 on card 0 (the primary first), 1 on card 1", cards, self.Interfaces[0].ID)
	}
}
