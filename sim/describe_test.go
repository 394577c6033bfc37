package sim_test

import (
	"slices"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"
)

func eniIDs(list []types.NetworkInterface) []string {
	var out []string
	for _, n := range list {
		out = append(out, aws.ToString(n.NetworkInterfaceId))
	}
	slices.Sort(out)
	return out
}

func TestDescribeNetworkInterfacesFilters(t *testing.T) {
	e := newEnv(t, baseTopology, nil)
	tagged := aws.ToString(e.createENI(&ec2.CreateNetworkInterfaceInput{
		SubnetId: aws.String("subnet-b"),
		TagSpecifications: []types.TagSpecification{{ResourceType: types.ResourceTypeNetworkInterface, Tags: []types.Tag{
			{Key: aws.String("cluster"), Value: aws.String("prod")},
		}}},
	}).NetworkInterfaceId)
	attached := aws.ToString(e.createENI(&ec2.CreateNetworkInterfaceInput{SubnetId: aws.String("subnet-a")}).NetworkInterfaceId)
	e.attach(attached, "i-node1", 1)
	inst := e.cloud.Instances()
	node1 := inst[0].PrimaryENI
	var all []string
	for _, in := range inst {
		all = append(all, in.PrimaryENI)
	}
	all = append(all, tagged, attached)
	sorted := func(ids ...string) []string { slices.Sort(ids); return ids }

	tests := []struct {
		name    string
		filters []types.Filter
		want    []string
	}{
		{"no filter", nil, sorted(all...)},
		{"attachment.instance-id", []types.Filter{{Name: aws.String("attachment.instance-id"), Values: []string{"i-node1"}}}, sorted(node1, attached)},
		{"status available", []types.Filter{{Name: aws.String("status"), Values: []string{"available"}}}, []string{tagged}},
		{"tag:KEY", []types.Filter{{Name: aws.String("tag:cluster"), Values: []string{"prod"}}}, []string{tagged}},
		{"tag:KEY other value", []types.Filter{{Name: aws.String("tag:cluster"), Values: []string{"dev"}}}, nil},
		{"tag-key", []types.Filter{{Name: aws.String("tag-key"), Values: []string{"cluster"}}}, []string{tagged}},
		{"subnet-id", []types.Filter{{Name: aws.String("subnet-id"), Values: []string{"subnet-b"}}}, []string{tagged}},
		{"network-interface-id", []types.Filter{{Name: aws.String("network-interface-id"), Values: []string{attached, tagged}}}, sorted(attached, tagged)},
		{"vpc-id", []types.Filter{{Name: aws.String("vpc-id"), Values: []string{"vpc-0sim"}}}, sorted(all...)},
		{"wildcard", []types.Filter{{Name: aws.String("attachment.instance-id"), Values: []string{"i-node*"}}}, sorted(node1, attached, inst[1].PrimaryENI)},
		{"filters are ANDed", []types.Filter{
			{Name: aws.String("attachment.instance-id"), Values: []string{"i-node1"}},
			{Name: aws.String("attachment.device-index"), Values: []string{"1"}},
		}, []string{attached}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := e.ec2.DescribeNetworkInterfaces(e.ctx, &ec2.DescribeNetworkInterfacesInput{Filters: tt.filters})
			if err != nil {
				t.Fatal(err)
			}
			if got := eniIDs(out.NetworkInterfaces); !slices.Equal(got, tt.want) {
				t.Errorf("got %v, want %v", got, tt.want)
			}
		})
	}
	_, err := e.ec2.DescribeNetworkInterfaces(e.ctx, &ec2.DescribeNetworkInterfacesInput{Filters: []types.Filter{{Name: aws.String("colour"), Values: []string{"x"}}}})
	wantCode(t, err, "InvalidParameterValue")
}

func TestDescribeNetworkInterfacesPaginates(t *testing.T) {
	e := newEnv(t, baseTopology, nil)
	want := []string{}
	for _, in := range e.cloud.Instances() {
		want = append(want, in.PrimaryENI)
	}
	for range 9 {
		want = append(want, aws.ToString(e.createENI(&ec2.CreateNetworkInterfaceInput{SubnetId: aws.String("subnet-b")}).NetworkInterfaceId))
	}
	slices.Sort(want)
	var got []string
	pages := 0
	p := ec2.NewDescribeNetworkInterfacesPaginator(e.ec2, &ec2.DescribeNetworkInterfacesInput{MaxResults: aws.Int32(5)})
	for p.HasMorePages() {
		out, err := p.NextPage(e.ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(out.NetworkInterfaces) > 5 {
			t.Errorf("page of %d, MaxResults was 5", len(out.NetworkInterfaces))
		}
		pages++
		got = append(got, eniIDs(out.NetworkInterfaces)...)
	}
	slices.Sort(got)
	if !slices.Equal(got, want) || pages != 3 {
		t.Errorf("%d pages listing %v, want 3 pages listing %v", pages, got, want)
	}

	bad := []struct {
		name string
		in   *ec2.DescribeNetworkInterfacesInput
		code string
	}{
		{"MaxResults below 5", &ec2.DescribeNetworkInterfacesInput{MaxResults: aws.Int32(4)}, "InvalidParameterValue"},
		{"MaxResults above 1000", &ec2.DescribeNetworkInterfacesInput{MaxResults: aws.Int32(1001)}, "InvalidParameterValue"},
		{"MaxResults with IDs", &ec2.DescribeNetworkInterfacesInput{MaxResults: aws.Int32(5), NetworkInterfaceIds: want[:1]}, "InvalidParameterCombination"},
		{"forged NextToken", &ec2.DescribeNetworkInterfacesInput{MaxResults: aws.Int32(5), NextToken: aws.String("not-a-token")}, "InvalidPaginationToken"},
		{"unknown ID", &ec2.DescribeNetworkInterfacesInput{NetworkInterfaceIds: []string{"eni-0000000000000dead"}}, "InvalidNetworkInterfaceID.NotFound"},
	}
	for _, b := range bad {
		t.Run(b.name, func(t *testing.T) {
			_, err := e.ec2.DescribeNetworkInterfaces(e.ctx, b.in)
			wantCode(t, err, b.code)
		})
	}
}

func TestPaginationSurvivesDeletionBetweenPages(t *testing.T) {
	e := newEnv(t, baseTopology, nil)
	for range 7 {
		e.createENI(&ec2.CreateNetworkInterfaceInput{SubnetId: aws.String("subnet-b")})
	}
	first, err := e.ec2.DescribeNetworkInterfaces(e.ctx, &ec2.DescribeNetworkInterfacesInput{MaxResults: aws.Int32(5)})
	if err != nil {
		t.Fatal(err)
	}
	// Delete one ENI of the first page that is not attached.
	var gone string
	for _, n := range first.NetworkInterfaces {
		if n.Attachment == nil {
			gone = aws.ToString(n.NetworkInterfaceId)
			break
		}
	}
	if _, err := e.ec2.DeleteNetworkInterface(e.ctx, &ec2.DeleteNetworkInterfaceInput{NetworkInterfaceId: aws.String(gone)}); err != nil {
		t.Fatal(err)
	}
	second, err := e.ec2.DescribeNetworkInterfaces(e.ctx, &ec2.DescribeNetworkInterfacesInput{MaxResults: aws.Int32(5), NextToken: first.NextToken})
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]int{}
	for _, n := range append(first.NetworkInterfaces, second.NetworkInterfaces...) {
		seen[aws.ToString(n.NetworkInterfaceId)]++
	}
	if len(seen) != 10 {
		t.Errorf("two pages covered %d distinct ENIs, want all 10 that existed", len(seen))
	}
	for id, n := range seen {
		if n > 1 {
			t.Errorf("%s listed on both pages", id)
		}
	}
}

func TestDescribeInstancesShowsAttachedENIs(t *testing.T) {
	e := newEnv(t, baseTopology, nil)
	extra := aws.ToString(e.createENI(&ec2.CreateNetworkInterfaceInput{SubnetId: aws.String("subnet-a"), Ipv4PrefixCount: aws.Int32(1)}).NetworkInterfaceId)
	e.attach(extra, "i-node1", 1)
	out, err := e.ec2.DescribeInstances(e.ctx, &ec2.DescribeInstancesInput{InstanceIds: []string{"i-node1"}})
	if err != nil {
		t.Fatal(err)
	}
	in := out.Reservations[0].Instances[0]
	info := e.cloud.Instances()[0]
	if aws.ToString(in.InstanceId) != "i-node1" || in.InstanceType != types.InstanceTypeM5Large || aws.ToString(in.Placement.AvailabilityZone) != "us-west-2a" ||
		aws.ToString(in.SubnetId) != "subnet-a" || aws.ToString(in.PrivateIpAddress) != info.PrivateIP.String() || in.State.Name != types.InstanceStateNameRunning {
		t.Errorf("instance = %+v", in)
	}
	if len(in.NetworkInterfaces) != 2 {
		t.Fatalf("instance lists %d ENIs, want 2", len(in.NetworkInterfaces))
	}
	second := in.NetworkInterfaces[1]
	if aws.ToString(second.NetworkInterfaceId) != extra || aws.ToInt32(second.Attachment.DeviceIndex) != 1 || len(second.Ipv4Prefixes) != 1 {
		t.Errorf("second ENI = %+v", second)
	}
	_, err = e.ec2.DescribeInstances(e.ctx, &ec2.DescribeInstancesInput{InstanceIds: []string{"i-gone"}})
	wantCode(t, err, "InvalidInstanceID.NotFound")

	filtered, err := e.ec2.DescribeInstances(e.ctx, &ec2.DescribeInstancesInput{Filters: []types.Filter{{Name: aws.String("instance-type"), Values: []string{"x9.sim"}}}})
	if err != nil {
		t.Fatal(err)
	}
	if len(filtered.Reservations) != 1 || aws.ToString(filtered.Reservations[0].Instances[0].InstanceId) != "i-node2" {
		t.Errorf("instance-type filter returned %+v, want i-node2 only", filtered.Reservations)
	}
}

func TestDescribeInstanceTypes(t *testing.T) {
	e := newEnv(t, baseTopology, nil)
	out, err := e.ec2.DescribeInstanceTypes(e.ctx, &ec2.DescribeInstanceTypesInput{InstanceTypes: []types.InstanceType{"m5.large", "x9.sim", "p4d.24xlarge", "t2.micro"}})
	if err != nil {
		t.Fatal(err)
	}
	got := map[types.InstanceType]types.InstanceTypeInfo{}
	for _, it := range out.InstanceTypes {
		got[it.InstanceType] = it
	}
	tests := []struct {
		typ        types.InstanceType
		maxENIs    int32
		perENI     int32
		cards      int
		hypervisor types.InstanceTypeHypervisor
	}{
		{"m5.large", 3, 10, 1, types.InstanceTypeHypervisorNitro},
		{"x9.sim", 2, 4, 1, types.InstanceTypeHypervisorNitro},
		{"p4d.24xlarge", 60, 50, 4, types.InstanceTypeHypervisorNitro},
		{"t2.micro", 2, 2, 1, types.InstanceTypeHypervisorXen},
	}
	for _, tt := range tests {
		it, ok := got[tt.typ]
		if !ok {
			t.Errorf("%s missing from the answer", tt.typ)
			continue
		}
		ni := it.NetworkInfo
		if aws.ToInt32(ni.MaximumNetworkInterfaces) != tt.maxENIs || aws.ToInt32(ni.Ipv4AddressesPerInterface) != tt.perENI ||
			len(ni.NetworkCards) != tt.cards || it.Hypervisor != tt.hypervisor {
			t.Errorf("%s: MaximumNetworkInterfaces %d, Ipv4AddressesPerInterface %d, %d cards, hypervisor %q; want %d, %d, %d, %q",
				tt.typ, aws.ToInt32(ni.MaximumNetworkInterfaces), aws.ToInt32(ni.Ipv4AddressesPerInterface), len(ni.NetworkCards), it.Hypervisor,
				tt.maxENIs, tt.perENI, tt.cards, tt.hypervisor)
		}
	}
	_, err = e.ec2.DescribeInstanceTypes(e.ctx, &ec2.DescribeInstanceTypesInput{InstanceTypes: []types.InstanceType{"m5.large", "zz9.plural"}})
	wantCode(t, err, "InvalidInstanceType")
}

func TestDescribeSubnets(t *testing.T) {
	e := newEnv(t, baseTopology, nil)
	out, err := e.ec2.DescribeSubnets(e.ctx, &ec2.DescribeSubnetsInput{Filters: []types.Filter{{Name: aws.String("tag:Name"), Values: []string{"nodes-a"}}}})
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Subnets) != 1 {
		t.Fatalf("tag:Name filter found %d subnets, want 1", len(out.Subnets))
	}
	sn := out.Subnets[0]
	// 256 addresses, 5 reserved, 3 instance primaries.
	if aws.ToString(sn.SubnetId) != "subnet-a" || aws.ToString(sn.CidrBlock) != "10.0.0.0/24" || aws.ToInt32(sn.AvailableIpAddressCount) != 248 ||
		aws.ToString(sn.AvailabilityZone) != "us-west-2a" || aws.ToString(sn.VpcId) != "vpc-0sim" {
		t.Errorf("subnet = %+v", sn)
	}
	all, err := e.ec2.DescribeSubnets(e.ctx, &ec2.DescribeSubnetsInput{})
	if err != nil {
		t.Fatal(err)
	}
	if len(all.Subnets) != 4 {
		t.Errorf("listed %d subnets, want 4", len(all.Subnets))
	}
	_, err = e.ec2.DescribeSubnets(e.ctx, &ec2.DescribeSubnetsInput{SubnetIds: []string{"subnet-nope"}})
	wantCode(t, err, "InvalidSubnetID.NotFound")
}
