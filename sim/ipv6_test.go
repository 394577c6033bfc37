package sim_test

import (
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"
)

// dualStackTopology is baseTopology with an IPv6 /56 on the VPC: subnet-a
// dual stack, subnet-v6 IPv6-only, subnet-b and the others IPv4-only.
var dualStackTopology = strings.NewReplacer(
	"vpc: {id: vpc-0sim, cidrs: [10.0.0.0/16]}",
	"vpc: {id: vpc-0sim, cidrs: [10.0.0.0/16], ipv6Cidr: '2600:1f14:abc:de00::/56'}",
	"- {id: subnet-a, az: us-west-2a, cidr: 10.0.0.0/24, tags: {Name: nodes-a}}",
	"- {id: subnet-a, az: us-west-2a, cidr: 10.0.0.0/24, tags: {Name: nodes-a}, ipv6Cidr: '2600:1f14:abc:de01::/64'}\n"+
		"  - {id: subnet-v6, az: us-west-2a, cidr: 10.0.3.0/24, ipv6Cidr: '2600:1f14:abc:de03::/64', ipv6Native: true}",
).Replace(baseTopology)

func assignIPv6(e *env, in *ec2.AssignIpv6AddressesInput) (*ec2.AssignIpv6AddressesOutput, error) {
	return e.ec2.AssignIpv6Addresses(e.ctx, in)
}

func ipv6sOf(ni types.NetworkInterface) []string {
	var out []string
	for _, a := range ni.Ipv6Addresses {
		out = append(out, aws.ToString(a.Ipv6Address))
	}
	return out
}

func ipv6PrefixesOf(ni types.NetworkInterface) []string {
	var out []string
	for _, q := range ni.Ipv6Prefixes {
		out = append(out, aws.ToString(q.Ipv6Prefix))
	}
	return out
}

func TestAnIPv6PrefixIsAnAligned80FromTheSubnets64(t *testing.T) {
	e := newEnv(t, dualStackTopology, nil)
	eni := e.cloud.Instances()[0].PrimaryENI
	out, err := assignIPv6(e, &ec2.AssignIpv6AddressesInput{NetworkInterfaceId: aws.String(eni), Ipv6PrefixCount: aws.Int32(2)})
	if err != nil {
		t.Fatal(err)
	}
	subnet := netip.MustParsePrefix("2600:1f14:abc:de01::/64")
	if len(out.AssignedIpv6Prefixes) != 2 {
		t.Fatalf("assigned %v, want two prefixes", out.AssignedIpv6Prefixes)
	}
	for _, s := range out.AssignedIpv6Prefixes {
		q, err := netip.ParsePrefix(s)
		if err != nil || q.Bits() != 80 || q.Masked() != q || !subnet.Contains(q.Addr()) {
			t.Errorf("prefix %q is not an aligned /80 of %s", s, subnet)
		}
	}
	// Sequential order delegates the lowest free /80 after the first.
	if want := []string{"2600:1f14:abc:de01:1::/80", "2600:1f14:abc:de01:2::/80"}; !slices.Equal(out.AssignedIpv6Prefixes, want) {
		t.Errorf("assigned %v, want %v", out.AssignedIpv6Prefixes, want)
	}
	if out.AssignedIpv6Prefixes[0] == out.AssignedIpv6Prefixes[1] {
		t.Errorf("the same prefix twice: %v", out.AssignedIpv6Prefixes)
	}
	// The first /80 holds the reserved addresses and is never delegated.
	if slices.Contains(out.AssignedIpv6Prefixes, "2600:1f14:abc:de01::/80") {
		t.Errorf("the first /80, which holds the reserved addresses, was delegated: %v", out.AssignedIpv6Prefixes)
	}
	if got := ipv6PrefixesOf(e.describeENI(eni)); !slices.Equal(got, out.AssignedIpv6Prefixes) {
		t.Errorf("DescribeNetworkInterfaces shows prefixes %v, want %v", got, out.AssignedIpv6Prefixes)
	}
	// A named /80 that is taken is in use; a free one is given.
	_, err = assignIPv6(e, &ec2.AssignIpv6AddressesInput{NetworkInterfaceId: aws.String(eni), Ipv6Prefixes: out.AssignedIpv6Prefixes[:1]})
	wantCode(t, err, "InvalidIPAddress.InUse")
	named, err := assignIPv6(e, &ec2.AssignIpv6AddressesInput{NetworkInterfaceId: aws.String(eni), Ipv6Prefixes: []string{"2600:1f14:abc:de01:ab::/80"}})
	if err != nil || !slices.Equal(named.AssignedIpv6Prefixes, []string{"2600:1f14:abc:de01:ab::/80"}) {
		t.Errorf("assigning a named free /80: %v %v", named, err)
	}
	// Misaligned, the wrong size, outside the /64, or covering the
	// reserved addresses.
	for _, bad := range []string{"2600:1f14:abc:de01:ab:1::/80", "2600:1f14:abc:de01::/96", "2600:1f14:abc:de02:1::/80",
		"2600:1f14:abc:de01::/80", "2600:1f14:abc:de01:ffff::/80"} {
		_, err := assignIPv6(e, &ec2.AssignIpv6AddressesInput{NetworkInterfaceId: aws.String(eni), Ipv6Prefixes: []string{bad}})
		wantCode(t, err, "InvalidParameterValue")
	}
}

func TestIPv6AddressesComeFromTheSubnetAndAreDescribed(t *testing.T) {
	e := newEnv(t, dualStackTopology, nil)
	eni := e.cloud.Instances()[0].PrimaryENI
	out, err := assignIPv6(e, &ec2.AssignIpv6AddressesInput{NetworkInterfaceId: aws.String(eni), Ipv6AddressCount: aws.Int32(2)})
	if err != nil {
		t.Fatal(err)
	}
	// Sequential order hands out the lowest free addresses, past the
	// four EC2 reserves.
	want := []string{"2600:1f14:abc:de01::4", "2600:1f14:abc:de01::5"}
	if !slices.Equal(out.AssignedIpv6Addresses, want) {
		t.Errorf("assigned %v, want %v", out.AssignedIpv6Addresses, want)
	}
	ni := e.describeENI(eni)
	if got := ipv6sOf(ni); !slices.Equal(got, want) {
		t.Errorf("described %v, want %v", got, want)
	}
	inst, err := e.ec2.DescribeInstances(e.ctx, &ec2.DescribeInstancesInput{InstanceIds: []string{"i-node1"}})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, a := range inst.Reservations[0].Instances[0].NetworkInterfaces[0].Ipv6Addresses {
		got = append(got, aws.ToString(a.Ipv6Address))
	}
	if !slices.Equal(got, want) {
		t.Errorf("DescribeInstances shows the primary ENI's IPv6 as %v, want %v", got, want)
	}
	if ni.Ipv6Address != nil || aws.ToBool(ni.Ipv6Addresses[0].IsPrimaryIpv6) {
		t.Errorf("an ENI without EnablePrimaryIpv6 shows a primary IPv6: %v", aws.ToString(ni.Ipv6Address))
	}
	if aws.ToBool(ni.Ipv6Native) {
		t.Error("an ENI in a dual-stack subnet is described as IPv6-native")
	}
	// A named address: in use, reserved, outside, or free.
	for addr, code := range map[string]string{
		"2600:1f14:abc:de01::4":  "InvalidIPAddress.InUse",
		"2600:1f14:abc:de01::2":  "InvalidParameterValue",
		"2600:1f14:abc:de02::10": "InvalidParameterValue",
		"10.0.0.10":              "InvalidParameterValue",
	} {
		_, err := assignIPv6(e, &ec2.AssignIpv6AddressesInput{NetworkInterfaceId: aws.String(eni), Ipv6Addresses: []string{addr}})
		wantCode(t, err, code)
	}
	// All or nothing: a request refused for its second address keeps
	// not its first.
	_, err = assignIPv6(e, &ec2.AssignIpv6AddressesInput{NetworkInterfaceId: aws.String(eni), Ipv6Addresses: []string{"2600:1f14:abc:de01::beef", "2600:1f14:abc:de01::4"}})
	wantCode(t, err, "InvalidIPAddress.InUse")
	if _, err := assignIPv6(e, &ec2.AssignIpv6AddressesInput{NetworkInterfaceId: aws.String(eni), Ipv6Addresses: []string{"2600:1f14:abc:de01::beef"}}); err != nil {
		t.Fatalf("the address a refused request named first is not free: %v", err)
	}
	// The filter finds the ENI by any of its IPv6 addresses.
	found, err := e.ec2.DescribeNetworkInterfaces(e.ctx, &ec2.DescribeNetworkInterfacesInput{Filters: []types.Filter{
		{Name: aws.String("ipv6-addresses.ipv6-address"), Values: []string{"2600:1f14:abc:de01::beef"}},
	}})
	if err != nil || len(found.NetworkInterfaces) != 1 || aws.ToString(found.NetworkInterfaces[0].NetworkInterfaceId) != eni {
		t.Errorf("filter ipv6-addresses.ipv6-address found %v (%v), want %s", found, err, eni)
	}
}

func TestUnassignIPv6GivesAddressesAndPrefixesBack(t *testing.T) {
	e := newEnv(t, dualStackTopology, nil)
	eni := e.cloud.Instances()[0].PrimaryENI
	a, err := assignIPv6(e, &ec2.AssignIpv6AddressesInput{NetworkInterfaceId: aws.String(eni), Ipv6AddressCount: aws.Int32(1)})
	if err != nil {
		t.Fatal(err)
	}
	p, err := assignIPv6(e, &ec2.AssignIpv6AddressesInput{NetworkInterfaceId: aws.String(eni), Ipv6PrefixCount: aws.Int32(1)})
	if err != nil {
		t.Fatal(err)
	}
	out, err := e.ec2.UnassignIpv6Addresses(e.ctx, &ec2.UnassignIpv6AddressesInput{NetworkInterfaceId: aws.String(eni),
		Ipv6Addresses: a.AssignedIpv6Addresses, Ipv6Prefixes: p.AssignedIpv6Prefixes})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(out.UnassignedIpv6Addresses, a.AssignedIpv6Addresses) || !slices.Equal(out.UnassignedIpv6Prefixes, p.AssignedIpv6Prefixes) {
		t.Errorf("unassigned %v %v, want %v %v", out.UnassignedIpv6Addresses, out.UnassignedIpv6Prefixes, a.AssignedIpv6Addresses, p.AssignedIpv6Prefixes)
	}
	ni := e.describeENI(eni)
	if len(ni.Ipv6Addresses) != 0 || len(ni.Ipv6Prefixes) != 0 {
		t.Errorf("after unassign the ENI still has %v %v", ipv6sOf(ni), ipv6PrefixesOf(ni))
	}
	// Both are free again: naming them succeeds.
	if _, err := assignIPv6(e, &ec2.AssignIpv6AddressesInput{NetworkInterfaceId: aws.String(eni), Ipv6Addresses: a.AssignedIpv6Addresses}); err != nil {
		t.Errorf("the unassigned address is not free: %v", err)
	}
	if _, err := assignIPv6(e, &ec2.AssignIpv6AddressesInput{NetworkInterfaceId: aws.String(eni), Ipv6Prefixes: p.AssignedIpv6Prefixes}); err != nil {
		t.Errorf("the unassigned prefix is not free: %v", err)
	}
	// Unassigning what the ENI does not hold, or nothing.
	_, err = e.ec2.UnassignIpv6Addresses(e.ctx, &ec2.UnassignIpv6AddressesInput{NetworkInterfaceId: aws.String(eni), Ipv6Addresses: []string{"2600:1f14:abc:de01::99"}})
	wantCode(t, err, "InvalidParameterValue")
	_, err = e.ec2.UnassignIpv6Addresses(e.ctx, &ec2.UnassignIpv6AddressesInput{NetworkInterfaceId: aws.String(eni)})
	wantCode(t, err, "MissingParameter")
	_, err = e.ec2.UnassignIpv6Addresses(e.ctx, &ec2.UnassignIpv6AddressesInput{NetworkInterfaceId: aws.String("eni-missing"), Ipv6Addresses: a.AssignedIpv6Addresses})
	wantCode(t, err, "InvalidNetworkInterfaceID.NotFound")
}

func TestAssignIPv6Errors(t *testing.T) {
	e := newEnv(t, dualStackTopology, nil)
	eni := aws.String(e.cloud.Instances()[0].PrimaryENI) // m5.large: 10 per interface
	x9 := aws.String(e.cloud.Instances()[1].PrimaryENI)  // x9.sim: 4 per interface
	xen := aws.String(e.cloud.Instances()[2].PrimaryENI) // t2.micro: Xen
	v4only := e.createENI(&ec2.CreateNetworkInterfaceInput{SubnetId: aws.String("subnet-b")}).NetworkInterfaceId
	tests := []struct {
		name string
		in   ec2.AssignIpv6AddressesInput
		code string
	}{
		{"nothing asked", ec2.AssignIpv6AddressesInput{NetworkInterfaceId: eni}, "MissingParameter"},
		{"count and list", ec2.AssignIpv6AddressesInput{NetworkInterfaceId: eni, Ipv6AddressCount: aws.Int32(1), Ipv6Addresses: []string{"2600:1f14:abc:de01::40"}}, "InvalidParameterCombination"},
		{"prefix count and list", ec2.AssignIpv6AddressesInput{NetworkInterfaceId: eni, Ipv6PrefixCount: aws.Int32(1), Ipv6Prefixes: []string{"2600:1f14:abc:de01:9::/80"}}, "InvalidParameterCombination"},
		{"addresses and prefixes", ec2.AssignIpv6AddressesInput{NetworkInterfaceId: eni, Ipv6AddressCount: aws.Int32(1), Ipv6PrefixCount: aws.Int32(1)}, "InvalidParameterCombination"},
		{"no such ENI", ec2.AssignIpv6AddressesInput{NetworkInterfaceId: aws.String("eni-missing"), Ipv6AddressCount: aws.Int32(1)}, "InvalidNetworkInterfaceID.NotFound"},
		{"subnet without IPv6", ec2.AssignIpv6AddressesInput{NetworkInterfaceId: v4only, Ipv6AddressCount: aws.Int32(1)}, "InvalidParameterValue"},
		{"over the type's limit", ec2.AssignIpv6AddressesInput{NetworkInterfaceId: x9, Ipv6AddressCount: aws.Int32(5)}, "PrivateIpAddressLimitExceeded"},
		{"prefixes count against the limit", ec2.AssignIpv6AddressesInput{NetworkInterfaceId: x9, Ipv6PrefixCount: aws.Int32(5)}, "PrivateIpAddressLimitExceeded"},
		{"prefixes on Xen", ec2.AssignIpv6AddressesInput{NetworkInterfaceId: xen, Ipv6PrefixCount: aws.Int32(1)}, "InvalidParameterValue"},
		{"negative count", ec2.AssignIpv6AddressesInput{NetworkInterfaceId: eni, Ipv6AddressCount: aws.Int32(-1)}, "InvalidParameterValue"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := assignIPv6(e, &tt.in)
			wantCode(t, err, tt.code)
		})
	}
	// Addresses and /80s share the limit: 4 on x9.sim, one slot each.
	if _, err := assignIPv6(e, &ec2.AssignIpv6AddressesInput{NetworkInterfaceId: x9, Ipv6AddressCount: aws.Int32(3)}); err != nil {
		t.Fatal(err)
	}
	if _, err := assignIPv6(e, &ec2.AssignIpv6AddressesInput{NetworkInterfaceId: x9, Ipv6PrefixCount: aws.Int32(1)}); err != nil {
		t.Fatalf("the fourth slot, as a /80: %v", err)
	}
	_, err := assignIPv6(e, &ec2.AssignIpv6AddressesInput{NetworkInterfaceId: x9, Ipv6AddressCount: aws.Int32(1)})
	wantCode(t, err, "PrivateIpAddressLimitExceeded")
	// IPv6 does not use the IPv4 slots: x9.sim's IPv4 secondaries are
	// still all there (3 besides the primary).
	if _, err := e.ec2.AssignPrivateIpAddresses(e.ctx, &ec2.AssignPrivateIpAddressesInput{NetworkInterfaceId: x9, SecondaryPrivateIpAddressCount: aws.Int32(3)}); err != nil {
		t.Errorf("IPv4 secondaries after a full IPv6 set: %v", err)
	}
	// A failed request takes nothing: the ENI that hit the limit holds 4.
	if ni := e.describeENI(aws.ToString(x9)); len(ni.Ipv6Addresses)+len(ni.Ipv6Prefixes) != 4 {
		t.Errorf("x9.sim ENI holds %v %v, want 4 in all", ipv6sOf(ni), ipv6PrefixesOf(ni))
	}
}

func TestCreateNetworkInterfaceTakesIPv6AndDeleteGivesItBack(t *testing.T) {
	e := newEnv(t, dualStackTopology, nil)
	ni := e.createENI(&ec2.CreateNetworkInterfaceInput{SubnetId: aws.String("subnet-a"), Ipv6AddressCount: aws.Int32(2)})
	if len(ni.Ipv6Addresses) != 2 {
		t.Fatalf("created with %v, want two IPv6 addresses", ipv6sOf(*ni))
	}
	named := e.createENI(&ec2.CreateNetworkInterfaceInput{SubnetId: aws.String("subnet-a"),
		Ipv6Addresses: []types.InstanceIpv6Address{{Ipv6Address: aws.String("2600:1f14:abc:de01::77")}}})
	if got := ipv6sOf(*named); !slices.Equal(got, []string{"2600:1f14:abc:de01::77"}) {
		t.Errorf("created with %v, want the named address", got)
	}
	withPrefix := e.createENI(&ec2.CreateNetworkInterfaceInput{SubnetId: aws.String("subnet-a"), Ipv6PrefixCount: aws.Int32(1)})
	if len(withPrefix.Ipv6Prefixes) != 1 {
		t.Fatalf("created with prefixes %v, want one", ipv6PrefixesOf(*withPrefix))
	}
	_, err := e.ec2.CreateNetworkInterface(e.ctx, &ec2.CreateNetworkInterfaceInput{SubnetId: aws.String("subnet-b"), Ipv6AddressCount: aws.Int32(1)})
	wantCode(t, err, "InvalidParameterValue")
	_, err = e.ec2.CreateNetworkInterface(e.ctx, &ec2.CreateNetworkInterfaceInput{SubnetId: aws.String("subnet-a"), Ipv6AddressCount: aws.Int32(1), Ipv6PrefixCount: aws.Int32(1)})
	wantCode(t, err, "InvalidParameterCombination")
	_, err = e.ec2.CreateNetworkInterface(e.ctx, &ec2.CreateNetworkInterfaceInput{SubnetId: aws.String("subnet-a"),
		Ipv6Addresses: []types.InstanceIpv6Address{{Ipv6Address: aws.String("2600:1f14:abc:de01::77")}}})
	wantCode(t, err, "InvalidIPAddress.InUse")
	before := e.freeAddresses("subnet-a")
	_, err = e.ec2.CreateNetworkInterface(e.ctx, &ec2.CreateNetworkInterfaceInput{SubnetId: aws.String("subnet-a"), SecondaryPrivateIpAddressCount: aws.Int32(2),
		Ipv6Addresses: []types.InstanceIpv6Address{{Ipv6Address: aws.String("2600:1f14:abc:de01::77")}}})
	wantCode(t, err, "InvalidIPAddress.InUse")
	if after := e.freeAddresses("subnet-a"); after != before {
		t.Errorf("a create refused for its IPv6 address kept IPv4 addresses: %d free, was %d", after, before)
	}

	// Deleting gives the ENIs' IPv6 addresses and prefixes back.
	for _, x := range []*types.NetworkInterface{ni, named, withPrefix} {
		if _, err := e.ec2.DeleteNetworkInterface(e.ctx, &ec2.DeleteNetworkInterfaceInput{NetworkInterfaceId: x.NetworkInterfaceId}); err != nil {
			t.Fatal(err)
		}
	}
	again := e.createENI(&ec2.CreateNetworkInterfaceInput{SubnetId: aws.String("subnet-a"),
		Ipv6Addresses: []types.InstanceIpv6Address{{Ipv6Address: aws.String("2600:1f14:abc:de01::77")}, {Ipv6Address: ni.Ipv6Addresses[0].Ipv6Address}},
	})
	if len(again.Ipv6Addresses) != 2 {
		t.Errorf("the deleted ENIs' addresses were not given back: %v", ipv6sOf(*again))
	}
	if _, err := assignIPv6(e, &ec2.AssignIpv6AddressesInput{NetworkInterfaceId: again.NetworkInterfaceId, Ipv6Prefixes: ipv6PrefixesOf(*withPrefix)}); err != nil {
		t.Errorf("the deleted ENI's /80 was not given back: %v", err)
	}
}

func TestASubnetThatAssignsIPv6OnCreationGivesEveryNewENIOne(t *testing.T) {
	e := newEnv(t, strings.Replace(dualStackTopology, "ipv6Cidr: '2600:1f14:abc:de01::/64'}",
		"ipv6Cidr: '2600:1f14:abc:de01::/64', assignIpv6AddressOnCreation: true}", 1), nil)
	node := e.cloud.Instances()[0]
	if got := ipv6sOf(e.describeENI(node.PrimaryENI)); len(got) != 1 {
		t.Errorf("the instance's primary ENI has IPv6 %v, want one address", got)
	}
	if got := e.createENI(&ec2.CreateNetworkInterfaceInput{SubnetId: aws.String("subnet-a")}); len(got.Ipv6Addresses) != 1 {
		t.Errorf("a new ENI has IPv6 %v, want one address", ipv6sOf(*got))
	}
	// Ipv6AddressCount=0 opts out.
	if got := e.createENI(&ec2.CreateNetworkInterfaceInput{SubnetId: aws.String("subnet-a"), Ipv6AddressCount: aws.Int32(0)}); len(got.Ipv6Addresses) != 0 {
		t.Errorf("Ipv6AddressCount=0 still gave %v", ipv6sOf(*got))
	}
	// A subnet without the setting gives none.
	if got := e.createENI(&ec2.CreateNetworkInterfaceInput{SubnetId: aws.String("subnet-b")}); len(got.Ipv6Addresses) != 0 {
		t.Errorf("an IPv4-only subnet gave %v", ipv6sOf(*got))
	}
}

func TestAnIPv6OnlySubnetsENIsAreIPv6NativeWithAnEmulatorIPv4(t *testing.T) {
	e := newEnv(t, dualStackTopology, nil)
	ni := e.createENI(&ec2.CreateNetworkInterfaceInput{SubnetId: aws.String("subnet-v6")})
	if !aws.ToBool(ni.Ipv6Native) || len(ni.Ipv6Addresses) != 1 {
		t.Errorf("ENI in an IPv6-only subnet: ipv6Native %v, IPv6 %v; want true and one address", aws.ToBool(ni.Ipv6Native), ipv6sOf(*ni))
	}
	// The emulator's documented stand-in: a primary IPv4 from the
	// subnet's cidr, which EC2 would not give.
	if a := netip.MustParseAddr(aws.ToString(ni.PrivateIpAddress)); !netip.MustParsePrefix("10.0.3.0/24").Contains(a) {
		t.Errorf("primary IPv4 %s is not from the subnet's cidr", a)
	}
	out, err := e.ec2.DescribeSubnets(e.ctx, &ec2.DescribeSubnetsInput{SubnetIds: []string{"subnet-v6"}})
	if err != nil {
		t.Fatal(err)
	}
	sn := out.Subnets[0]
	if !aws.ToBool(sn.Ipv6Native) || !aws.ToBool(sn.AssignIpv6AddressOnCreation) {
		t.Errorf("IPv6-only subnet described with ipv6Native %v, assignIpv6AddressOnCreation %v; want both true",
			aws.ToBool(sn.Ipv6Native), aws.ToBool(sn.AssignIpv6AddressOnCreation))
	}
}

func TestDescribeSubnetsShowsTheIPv6Association(t *testing.T) {
	e := newEnv(t, dualStackTopology, nil)
	out, err := e.ec2.DescribeSubnets(e.ctx, &ec2.DescribeSubnetsInput{SubnetIds: []string{"subnet-a", "subnet-b"}})
	if err != nil {
		t.Fatal(err)
	}
	a, b := out.Subnets[0], out.Subnets[1]
	if len(a.Ipv6CidrBlockAssociationSet) != 1 {
		t.Fatalf("subnet-a has %d IPv6 associations, want 1", len(a.Ipv6CidrBlockAssociationSet))
	}
	as := a.Ipv6CidrBlockAssociationSet[0]
	if aws.ToString(as.Ipv6CidrBlock) != "2600:1f14:abc:de01::/64" || as.Ipv6CidrBlockState.State != types.SubnetCidrBlockStateCodeAssociated ||
		!strings.HasPrefix(aws.ToString(as.AssociationId), "subnet-cidr-assoc-") {
		t.Errorf("subnet-a's association = %+v", as)
	}
	if aws.ToBool(a.Ipv6Native) || aws.ToBool(a.AssignIpv6AddressOnCreation) {
		t.Error("subnet-a is described as IPv6-only or assigning on creation")
	}
	if len(b.Ipv6CidrBlockAssociationSet) != 0 {
		t.Errorf("IPv4-only subnet-b has IPv6 associations %+v", b.Ipv6CidrBlockAssociationSet)
	}
	for filter, want := range map[string][]string{
		"ipv6-cidr-block-association.ipv6-cidr-block": {"subnet-a"},
		"ipv6-native": {"subnet-v6"},
	} {
		value := "2600:1f14:abc:de01::/64"
		if filter == "ipv6-native" {
			value = "true"
		}
		out, err := e.ec2.DescribeSubnets(e.ctx, &ec2.DescribeSubnetsInput{Filters: []types.Filter{{Name: aws.String(filter), Values: []string{value}}}})
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, s := range out.Subnets {
			got = append(got, aws.ToString(s.SubnetId))
		}
		if !slices.Equal(got, want) {
			t.Errorf("filter %s=%s: %v, want %v", filter, value, got, want)
		}
	}
}

// An unattached ENI may hold up to the largest type's limit; attaching it
// checks its IPv6 set against the instance's type, as for IPv4.
func TestAttachChecksIPv6AgainstTheInstanceType(t *testing.T) {
	e := newEnv(t, dualStackTopology, nil)
	big := e.createENI(&ec2.CreateNetworkInterfaceInput{SubnetId: aws.String("subnet-a"), Ipv6AddressCount: aws.Int32(5)})
	_, err := e.ec2.AttachNetworkInterface(e.ctx, &ec2.AttachNetworkInterfaceInput{NetworkInterfaceId: big.NetworkInterfaceId, InstanceId: aws.String("i-node2"), DeviceIndex: aws.Int32(1)})
	wantCode(t, err, "PrivateIpAddressLimitExceeded") // x9.sim: 4 per interface
	withPrefix := e.createENI(&ec2.CreateNetworkInterfaceInput{SubnetId: aws.String("subnet-a"), Ipv6PrefixCount: aws.Int32(1)})
	_, err = e.ec2.AttachNetworkInterface(e.ctx, &ec2.AttachNetworkInterfaceInput{NetworkInterfaceId: withPrefix.NetworkInterfaceId, InstanceId: aws.String("i-xen"), DeviceIndex: aws.Int32(1)})
	wantCode(t, err, "InvalidParameterValue")                    // t2.micro: Xen, no prefixes
	e.attach(aws.ToString(big.NetworkInterfaceId), "i-node1", 1) // m5.large: 10
	_, err = e.ec2.CreateNetworkInterface(e.ctx, &ec2.CreateNetworkInterfaceInput{SubnetId: aws.String("subnet-a"), Ipv6AddressCount: aws.Int32(51)})
	wantCode(t, err, "PrivateIpAddressLimitExceeded")
}
