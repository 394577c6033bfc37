package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/vpcnet/vpcnet/cloud"
	"github.com/vpcnet/vpcnet/doctor"
)

// Story 4: ENIs left available by nodes that died between detach and
// delete kept the subnet's addresses forever. Here a dead node's ENI with
// this cluster's tags, three hours old, takes the subnet's last
// addresses, on a node whose leak collection is turned off: pods fail for
// want of addresses and doctor names the leak with its age.
func TestStory4LeakedENIs(t *testing.T) {
	c := startStory(t, `
region: us-west-2
vpc: {id: vpc-s4, cidrs: [10.0.0.0/16]}
subnets: [{id: subnet-a, az: us-west-2a, cidr: 10.0.0.0/27}]
securityGroups: [sg-s4]
instances: [{id: i-s4, type: m5.large, subnet: subnet-a}]
attachDelay: 500ms
seed: 4
`, map[string][]string{"i-s4": {"DISABLE_LEAKED_ENI_CLEANUP=true"}}, true)
	n := c.Nodes[0]
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	if err := c.WaitSettled(ctx); err != nil {
		t.Fatal(err)
	}
	api := cloudAPI(t, c)
	subs, err := api.DescribeSubnets(ctx, &ec2.DescribeSubnetsInput{SubnetIds: []string{"subnet-a"}})
	if err != nil {
		t.Fatal(err)
	}
	free := aws.ToInt32(subs.Subnets[0].AvailableIpAddressCount)
	if free < 1 {
		t.Fatalf("subnet-a has %d free addresses before the leak; the story needs some", free)
	}
	created := time.Now().Add(-3 * time.Hour).UTC().Format(time.RFC3339)
	leak, err := api.CreateNetworkInterface(ctx, &ec2.CreateNetworkInterfaceInput{
		SubnetId: aws.String("subnet-a"), SecondaryPrivateIpAddressCount: aws.Int32(free - 1),
		TagSpecifications: []types.TagSpecification{{ResourceType: types.ResourceTypeNetworkInterface, Tags: []types.Tag{
			{Key: aws.String(cloud.TagClusterName), Value: aws.String("vpcnet-sim")},
			{Key: aws.String(cloud.TagInstanceID), Value: aws.String("i-dead")},
			{Key: aws.String(cloud.TagCreatedAt), Value: aws.String(created)},
		}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	leakID := aws.ToString(leak.NetworkInterface.NetworkInterfaceId)

	_, err = addUntilRefused(t, n, "web", 40)
	if err == nil || !strings.Contains(err.Error(), "subnet subnet-a has no free addresses") {
		t.Fatalf("ADD with the subnet held by a leaked ENI failed with %v; want the subnet named", err)
	}
	res := runDoctor(t, n, "--skip", "kubernetes")
	res.wantFinding(t, "leaked-enis", doctor.Warning, leakID+" in subnet-a, created 3h0m0s ago", "DISABLE_LEAKED_ENI_CLEANUP=true")
	res.wantFinding(t, "subnet-exhausted", doctor.Error, "subnet subnet-a", "delete leaked ENIs")
}
