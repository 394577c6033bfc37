package sim_test

import (
	"maps"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"

	"github.com/vpcnet/vpcnet/sim"
	"github.com/vpcnet/vpcnet/sim/simtest"
)

// A side-by-side benchmark counts each node's EC2 calls: a call made
// through a node's own endpoint with shared credentials (a DaemonSet's)
// is that node's, one whose credentials name an instance is that
// instance's wherever it came from, and a refused call counts too.
func TestCallsAreCountedForTheInstanceThatMadeThem(t *testing.T) {
	e := newEnv(t, baseTopology, nil)
	node1 := e.cloud.EC2HandlerFor("i-node1")
	shared := simtest.EC2Client(node1, "local-cloud")
	for range 2 {
		if _, err := shared.DescribeNetworkInterfaces(e.ctx, &ec2.DescribeNetworkInterfacesInput{}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := shared.DeleteNetworkInterface(e.ctx, &ec2.DeleteNetworkInterfaceInput{NetworkInterfaceId: aws.String("eni-missing")}); err == nil {
		t.Fatal("deleting an ENI that does not exist succeeded")
	}
	if _, err := shared.DeleteNetworkInterface(e.ctx, &ec2.DeleteNetworkInterfaceInput{NetworkInterfaceId: aws.String("eni-missing"), DryRun: aws.Bool(true)}); err == nil {
		t.Fatal("a DryRun succeeded")
	}
	// Signed as i-node2, through node1's endpoint.
	if _, err := simtest.EC2Client(node1, "i-node2").DescribeSubnets(e.ctx, &ec2.DescribeSubnetsInput{}); err != nil {
		t.Fatal(err)
	}
	// Through the shared endpoint with credentials naming nobody.
	if _, err := e.ec2.DescribeSubnets(e.ctx, &ec2.DescribeSubnetsInput{}); err != nil {
		t.Fatal(err)
	}
	for id, want := range map[string]map[string]int{
		"i-node1": {"DescribeNetworkInterfaces": 2, "DeleteNetworkInterface": 1, "DeleteNetworkInterface" + sim.DryRunSuffix: 1},
		"i-node2": {"DescribeSubnets": 1},
		"i-xen":   nil,
	} {
		if got := e.cloud.Calls(id); !maps.Equal(got, want) {
			t.Errorf("%s made %v, want %v", id, got, want)
		}
	}
}
