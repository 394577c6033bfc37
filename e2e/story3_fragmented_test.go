package e2e

import (
	"context"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"

	"github.com/vpcnet/vpcnet/doctor"
	"github.com/vpcnet/vpcnet/sim"
)

// Story 3, with prefix delegation: the subnet has plenty of addresses but
// none of its /28 blocks is whole, so EC2 refuses every prefix
// (InsufficientCidrBlocks). Two ENIs of someone else's, each with one
// address in the middle of a free block, fragment a /26 whose other two
// blocks hold the reserved addresses and the node.
func TestStory3SubnetFragmentedForPrefixes(t *testing.T) {
	c := startStory(t, `
region: us-west-2
vpc: {id: vpc-s3f, cidrs: [10.0.0.0/16]}
subnets: [{id: subnet-a, az: us-west-2a, cidr: 10.0.0.0/26}]
securityGroups: [sg-s3f]
instances: [{id: i-s3f, type: m5.large, subnet: subnet-a, privateIp: 10.0.0.4}]
faults: {AssignPrivateIpAddresses: {errorRate: 1, code: InternalError}, CreateNetworkInterface: {errorRate: 1, code: InternalError}}
seed: 3
`, map[string][]string{"i-s3f": {"ENABLE_PREFIX_DELEGATION=true"}}, false)
	n := c.Nodes[0]
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	api := cloudAPI(t, c)
	// The faults keep the agent from taking a block before the subnet is
	// fragmented; the emulator's faults apply to this client too, so
	// they are lifted one action at a time.
	c.Cloud.SetFault("CreateNetworkInterface", sim.Fault{})
	for _, addr := range []string{"10.0.0.24", "10.0.0.40"} {
		if _, err := api.CreateNetworkInterface(ctx, &ec2.CreateNetworkInterfaceInput{
			SubnetId: aws.String("subnet-a"), PrivateIpAddress: aws.String(addr), Description: aws.String("someone else's"),
		}); err != nil {
			t.Fatal(err)
		}
	}
	c.Cloud.SetFault("AssignPrivateIpAddresses", sim.Fault{})
	poll(t, "the agent refused a prefix", 30*time.Second, func() (bool, error) {
		st, err := status(t, n)
		return err == nil && st.LastEC2Error != "", err
	})
	// The node has no address to give, so it is not ready and the
	// runtime has no configuration: pods stay in ContainerCreating.
	if _, err := n.AddPod(ctx, "web"); err == nil {
		t.Fatal("a pod got an address in a subnet with no free /28")
	}

	res := runDoctor(t, n, "--skip", "kubernetes")
	res.wantFinding(t, "subnet-fragmented", doctor.Error, "InsufficientCidrBlocks", "subnet CIDR reservation")
	res.wantFinding(t, "agent-not-ready", doctor.Error, "condition AddressesAvailable", "failing condition")
}
