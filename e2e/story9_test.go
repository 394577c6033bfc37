package e2e

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/vpcnet/vpcnet/doctor"
)

// Story 9: an interface on the node that is not vpcnet's (EFA, trunk, or
// one an operator attached and tagged no_manage). vpcnet must leave it
// alone: no pod gets its addresses. Doctor lists it, so an operator
// knows why the agent counts fewer ENIs than EC2 shows.
func TestStory9InterfacesVpcnetDoesNotOwn(t *testing.T) {
	c := startCluster(t, twoNodes, nil)
	n := c.Nodes[0]
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	if err := c.WaitSettled(ctx); err != nil {
		t.Fatal(err)
	}
	api := cloudAPI(t, c)
	created, err := api.CreateNetworkInterface(ctx, &ec2.CreateNetworkInterfaceInput{
		SubnetId: aws.String("subnet-a"), SecondaryPrivateIpAddressCount: aws.Int32(3),
		TagSpecifications: []types.TagSpecification{{ResourceType: types.ResourceTypeNetworkInterface, Tags: []types.Tag{
			{Key: aws.String(doctor.TagNoManage), Value: aws.String("true")},
		}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	eni := created.NetworkInterface
	if _, err := api.AttachNetworkInterface(ctx, &ec2.AttachNetworkInterfaceInput{
		NetworkInterfaceId: eni.NetworkInterfaceId, InstanceId: aws.String(n.ID), DeviceIndex: aws.Int32(2),
	}); err != nil {
		t.Fatal(err)
	}
	poll(t, "the operator's ENI attached", 20*time.Second, func() (bool, error) {
		out, err := api.DescribeNetworkInterfaces(ctx, &ec2.DescribeNetworkInterfacesInput{NetworkInterfaceIds: []string{aws.ToString(eni.NetworkInterfaceId)}})
		return err == nil && len(out.NetworkInterfaces) == 1 && out.NetworkInterfaces[0].Status == types.NetworkInterfaceStatusInUse, err
	})
	var theirs []string
	for _, a := range eni.PrivateIpAddresses {
		theirs = append(theirs, aws.ToString(a.PrivateIpAddress))
	}

	for i := range 12 {
		p, err := n.AddPod(ctx, "web-"+string(rune('a'+i)))
		if err != nil {
			t.Fatal(err)
		}
		if slices.Contains(theirs, p.Addr.String()) {
			t.Errorf("pod %s got %s, an address of the no_manage ENI", p.Name, p.Addr)
		}
	}

	res := runDoctor(t, n, "--skip", "kubernetes")
	res.wantFinding(t, "interfaces-unmanaged", doctor.Info, aws.ToString(eni.NetworkInterfaceId)+" (device 2) is tagged "+doctor.TagNoManage+"=true", "remove the no_manage tag")
	if res.code != 0 {
		t.Errorf("exit status %d for an info finding, want 0", res.code)
	}
}
