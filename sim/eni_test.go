package sim_test

import (
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"
)

func TestCreateNetworkInterfaceTakesAddressesFromTheSubnet(t *testing.T) {
	e := newEnv(t, baseTopology, nil)
	before := e.freeAddresses("subnet-a")
	eni := e.createENI(&ec2.CreateNetworkInterfaceInput{
		SubnetId:                       aws.String("subnet-a"),
		SecondaryPrivateIpAddressCount: aws.Int32(3),
		Description:                    aws.String("vpcnet pool"),
		TagSpecifications: []types.TagSpecification{{
			ResourceType: types.ResourceTypeNetworkInterface,
			Tags:         []types.Tag{{Key: aws.String("vpcnet.io/owner"), Value: aws.String("i-node1")}},
		}},
	})
	if got := aws.ToString(eni.NetworkInterfaceId); len(got) != len("eni-0123456789abcdef0") {
		t.Errorf("NetworkInterfaceId = %q, want the eni-<17 hex> shape", got)
	}
	if eni.Status != types.NetworkInterfaceStatusAvailable {
		t.Errorf("Status = %q, want available", eni.Status)
	}
	if len(eni.PrivateIpAddresses) != 4 || !aws.ToBool(eni.PrivateIpAddresses[0].Primary) {
		t.Fatalf("PrivateIpAddresses = %+v, want a primary and 3 secondaries", eni.PrivateIpAddresses)
	}
	if aws.ToString(eni.PrivateIpAddress) != aws.ToString(eni.PrivateIpAddresses[0].PrivateIpAddress) {
		t.Errorf("PrivateIpAddress %q is not the primary of the set", aws.ToString(eni.PrivateIpAddress))
	}
	if len(eni.Groups) != 1 || aws.ToString(eni.Groups[0].GroupId) != "sg-0sim" {
		t.Errorf("Groups = %+v, want the VPC default group sg-0sim", eni.Groups)
	}
	if aws.ToString(eni.Description) != "vpcnet pool" || aws.ToString(eni.VpcId) != "vpc-0sim" || aws.ToString(eni.MacAddress) == "" {
		t.Errorf("Description/VpcId/MacAddress = %q/%q/%q", aws.ToString(eni.Description), aws.ToString(eni.VpcId), aws.ToString(eni.MacAddress))
	}
	if len(eni.TagSet) != 1 || aws.ToString(eni.TagSet[0].Value) != "i-node1" {
		t.Errorf("TagSet = %+v, want the tag from TagSpecification", eni.TagSet)
	}
	if after := e.freeAddresses("subnet-a"); after != before-4 {
		t.Errorf("AvailableIpAddressCount went from %d to %d, want 4 fewer", before, after)
	}
}

func TestCreateNetworkInterfaceWithNamedAddressesAndPrefixes(t *testing.T) {
	e := newEnv(t, baseTopology, nil)
	eni := e.createENI(&ec2.CreateNetworkInterfaceInput{
		SubnetId: aws.String("subnet-a"),
		PrivateIpAddresses: []types.PrivateIpAddressSpecification{
			{PrivateIpAddress: aws.String("10.0.0.100"), Primary: aws.Bool(true)},
			{PrivateIpAddress: aws.String("10.0.0.101")},
		},
		Ipv4Prefixes: []types.Ipv4PrefixSpecificationRequest{{Ipv4Prefix: aws.String("10.0.0.128/28")}},
		Groups:       []string{"sg-other"},
	})
	if got := aws.ToString(eni.PrivateIpAddress); got != "10.0.0.100" {
		t.Errorf("primary = %s, want 10.0.0.100", got)
	}
	if len(eni.PrivateIpAddresses) != 2 || aws.ToString(eni.PrivateIpAddresses[1].PrivateIpAddress) != "10.0.0.101" {
		t.Errorf("PrivateIpAddresses = %+v", eni.PrivateIpAddresses)
	}
	if len(eni.Ipv4Prefixes) != 1 || aws.ToString(eni.Ipv4Prefixes[0].Ipv4Prefix) != "10.0.0.128/28" {
		t.Errorf("Ipv4Prefixes = %+v, want 10.0.0.128/28", eni.Ipv4Prefixes)
	}
	if aws.ToString(eni.Groups[0].GroupId) != "sg-other" {
		t.Errorf("Groups = %+v, want sg-other", eni.Groups)
	}
	// The prefix's 16 addresses and the 2 addresses are all taken.
	_, err := e.ec2.CreateNetworkInterface(e.ctx, &ec2.CreateNetworkInterfaceInput{SubnetId: aws.String("subnet-a"), PrivateIpAddress: aws.String("10.0.0.130")})
	wantCode(t, err, "InvalidIPAddress.InUse")
}

func TestCreateNetworkInterfaceErrors(t *testing.T) {
	tests := []struct {
		name string
		in   *ec2.CreateNetworkInterfaceInput
		code string
	}{
		{"empty subnet", &ec2.CreateNetworkInterfaceInput{SubnetId: aws.String("")}, "MissingParameter"},
		{"unknown subnet", &ec2.CreateNetworkInterfaceInput{SubnetId: aws.String("subnet-nope")}, "InvalidSubnetID.NotFound"},
		{"unknown security group", &ec2.CreateNetworkInterfaceInput{SubnetId: aws.String("subnet-a"), Groups: []string{"sg-nope"}}, "InvalidGroup.NotFound"},
		{"address in use", &ec2.CreateNetworkInterfaceInput{SubnetId: aws.String("subnet-a"), PrivateIpAddress: aws.String("10.0.0.4")}, "InvalidIPAddress.InUse"},
		{"reserved router address", &ec2.CreateNetworkInterfaceInput{SubnetId: aws.String("subnet-a"), PrivateIpAddress: aws.String("10.0.0.1")}, "InvalidParameterValue"},
		{"broadcast address", &ec2.CreateNetworkInterfaceInput{SubnetId: aws.String("subnet-a"), PrivateIpAddress: aws.String("10.0.0.255")}, "InvalidParameterValue"},
		{"address outside the subnet", &ec2.CreateNetworkInterfaceInput{SubnetId: aws.String("subnet-a"), PrivateIpAddress: aws.String("10.0.5.9")}, "InvalidParameterValue"},
		{"more addresses than any ENI holds", &ec2.CreateNetworkInterfaceInput{SubnetId: aws.String("subnet-b"), SecondaryPrivateIpAddressCount: aws.Int32(50)}, "PrivateIpAddressLimitExceeded"},
		{"more addresses than the subnet has", &ec2.CreateNetworkInterfaceInput{SubnetId: aws.String("subnet-tiny"), SecondaryPrivateIpAddressCount: aws.Int32(11)}, "InsufficientFreeAddressesInSubnet"},
		{"misaligned prefix", &ec2.CreateNetworkInterfaceInput{SubnetId: aws.String("subnet-a"), Ipv4Prefixes: []types.Ipv4PrefixSpecificationRequest{{Ipv4Prefix: aws.String("10.0.0.20/28")}}}, "InvalidParameterValue"},
		{"prefix count and list", &ec2.CreateNetworkInterfaceInput{SubnetId: aws.String("subnet-a"), Ipv4PrefixCount: aws.Int32(1), Ipv4Prefixes: []types.Ipv4PrefixSpecificationRequest{{Ipv4Prefix: aws.String("10.0.0.32/28")}}}, "InvalidParameterCombination"},
		{"wrong tag resource type", &ec2.CreateNetworkInterfaceInput{SubnetId: aws.String("subnet-a"), TagSpecifications: []types.TagSpecification{{ResourceType: types.ResourceTypeInstance, Tags: []types.Tag{{Key: aws.String("k"), Value: aws.String("v")}}}}}, "InvalidParameterValue"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, baseTopology, nil)
			before := e.freeAddresses("subnet-a")
			_, err := e.ec2.CreateNetworkInterface(e.ctx, tt.in)
			wantCode(t, err, tt.code)
			if got := httpStatus(t, err); got != 400 {
				t.Errorf("HTTP status = %d, want 400", got)
			}
			if after := e.freeAddresses("subnet-a"); after != before {
				t.Errorf("a failed create leaked addresses: %d free before, %d after", before, after)
			}
		})
	}
}

func TestClientTokenMakesCreateIdempotent(t *testing.T) {
	e := newEnv(t, baseTopology, nil)
	in := &ec2.CreateNetworkInterfaceInput{SubnetId: aws.String("subnet-a"), SecondaryPrivateIpAddressCount: aws.Int32(2), ClientToken: aws.String("tok-1")}
	first := e.createENI(in)
	free := e.freeAddresses("subnet-a")
	again := e.createENI(in)
	if aws.ToString(again.NetworkInterfaceId) != aws.ToString(first.NetworkInterfaceId) {
		t.Errorf("retry with the same token created %s, want the original %s", aws.ToString(again.NetworkInterfaceId), aws.ToString(first.NetworkInterfaceId))
	}
	if got := e.freeAddresses("subnet-a"); got != free {
		t.Errorf("retry took addresses: %d free, want %d", got, free)
	}
	_, err := e.ec2.CreateNetworkInterface(e.ctx, &ec2.CreateNetworkInterfaceInput{SubnetId: aws.String("subnet-a"), SecondaryPrivateIpAddressCount: aws.Int32(5), ClientToken: aws.String("tok-1")})
	wantCode(t, err, "IdempotentParameterMismatch")
	other := e.createENI(&ec2.CreateNetworkInterfaceInput{SubnetId: aws.String("subnet-a"), SecondaryPrivateIpAddressCount: aws.Int32(2), ClientToken: aws.String("tok-2")})
	if aws.ToString(other.NetworkInterfaceId) == aws.ToString(first.NetworkInterfaceId) {
		t.Error("a new token returned the old ENI")
	}
}

func TestDeleteNetworkInterface(t *testing.T) {
	e := newEnv(t, baseTopology, nil)
	free := e.freeAddresses("subnet-a")
	eni := e.createENI(&ec2.CreateNetworkInterfaceInput{SubnetId: aws.String("subnet-a"), SecondaryPrivateIpAddressCount: aws.Int32(2), Ipv4PrefixCount: aws.Int32(1)})
	id := eni.NetworkInterfaceId
	if _, err := e.ec2.DeleteNetworkInterface(e.ctx, &ec2.DeleteNetworkInterfaceInput{NetworkInterfaceId: id}); err != nil {
		t.Fatalf("DeleteNetworkInterface: %v", err)
	}
	if got := e.freeAddresses("subnet-a"); got != free {
		t.Errorf("after delete %d addresses free, want all %d back", got, free)
	}
	_, err := e.ec2.DeleteNetworkInterface(e.ctx, &ec2.DeleteNetworkInterfaceInput{NetworkInterfaceId: id})
	wantCode(t, err, "InvalidNetworkInterfaceID.NotFound")
	_, err = e.ec2.DescribeNetworkInterfaces(e.ctx, &ec2.DescribeNetworkInterfacesInput{NetworkInterfaceIds: []string{*id}})
	wantCode(t, err, "InvalidNetworkInterfaceID.NotFound")
}

func TestDeleteAttachedNetworkInterfaceIsRefused(t *testing.T) {
	e := newEnv(t, baseTopology, nil)
	primary := e.cloud.Instances()[0].PrimaryENI
	_, err := e.ec2.DeleteNetworkInterface(e.ctx, &ec2.DeleteNetworkInterfaceInput{NetworkInterfaceId: aws.String(primary)})
	wantCode(t, err, "InvalidParameterValue")
	if !contains(err.Error(), "currently in use") {
		t.Errorf("message %q does not say the ENI is currently in use", err)
	}
}
