package sim_test

import (
	"maps"
	"net/http"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"

	"github.com/vpcnet/vpcnet/sim"
)

// The new actions pass the same gates as the others: their own token
// bucket, injected faults, the caller's role and the tally. (None of
// them takes DryRun in EC2's API.)
func TestIPv6ActionsAreThrottledFaultedAuthorizedAndCounted(t *testing.T) {
	topo := strings.Replace(dualStackTopology+`
roles:
  noipv6: {deny: [AssignIpv6Addresses, AssociateSubnetCidrBlock]}
`, "- {id: i-node2, type: x9.sim, subnet: subnet-a}", "- {id: i-node2, type: x9.sim, subnet: subnet-a, role: noipv6}", 1)
	e := newEnv(t, topo, func(t *sim.Topology) {
		t.Throttle = sim.ThrottleSpec{Actions: map[string]sim.BucketSpec{"AssignIpv6Addresses": {Burst: 2, Refill: 1}}}
	})
	eni := aws.String(e.cloud.Instances()[0].PrimaryENI)
	node1 := e.clientAs("i-node1")
	assign := func(c *ec2.Client) error {
		_, err := c.AssignIpv6Addresses(e.ctx, &ec2.AssignIpv6AddressesInput{NetworkInterfaceId: eni, Ipv6AddressCount: aws.Int32(1)})
		return err
	}
	for range 2 {
		if err := assign(node1); err != nil {
			t.Fatal(err)
		}
	}
	// The bucket of two is spent.
	err := assign(node1)
	wantCode(t, err, "RequestLimitExceeded")
	if httpStatus(t, err) != http.StatusServiceUnavailable {
		t.Errorf("throttled status = %d, want 503", httpStatus(t, err))
	}

	_, err = e.clientAs("i-node2").AssociateSubnetCidrBlock(e.ctx, &ec2.AssociateSubnetCidrBlockInput{SubnetId: aws.String("subnet-b"), Ipv6CidrBlock: aws.String("2600:1f14:abc:de10::/64")})
	wantCode(t, err, "UnauthorizedOperation")
	if !strings.Contains(err.Error(), "ec2:AssociateSubnetCidrBlock") {
		t.Errorf("the denial does not name the action: %v", err)
	}

	e.cloud.SetFault("UnassignIpv6Addresses", sim.Fault{ErrorRate: 1, Code: "InternalError"})
	_, err = node1.UnassignIpv6Addresses(e.ctx, &ec2.UnassignIpv6AddressesInput{NetworkInterfaceId: eni, Ipv6Addresses: []string{"2600:1f14:abc:de01::4"}})
	wantCode(t, err, "InternalError")
	e.cloud.SetFault("UnassignIpv6Addresses", sim.Fault{})
	if _, err := node1.UnassignIpv6Addresses(e.ctx, &ec2.UnassignIpv6AddressesInput{NetworkInterfaceId: eni, Ipv6Addresses: []string{"2600:1f14:abc:de01::4"}}); err != nil {
		t.Errorf("after the fault is cleared: %v", err)
	}

	want := map[string]int{"AssignIpv6Addresses": 3, "UnassignIpv6Addresses": 2}
	if got := e.cloud.Calls("i-node1"); !maps.Equal(got, want) {
		t.Errorf("i-node1 made %v, want %v", got, want)
	}
	if got := e.cloud.Calls("i-node2"); !maps.Equal(got, map[string]int{"AssociateSubnetCidrBlock": 1}) {
		t.Errorf("i-node2 made %v", got)
	}
}

func TestTopologyNamesIPv6ActionsInFaultsRolesAndThrottle(t *testing.T) {
	topo := dualStackTopology + `
faults:
  AssociateVpcCidrBlock: {errorRate: 1, code: Unavailable}
`
	e := newEnv(t, topo, nil)
	_, err := e.ec2.AssociateVpcCidrBlock(e.ctx, &ec2.AssociateVpcCidrBlockInput{VpcId: aws.String("vpc-0sim"), AmazonProvidedIpv6CidrBlock: aws.Bool(true)})
	wantCode(t, err, "Unavailable")
}

func TestIPv6ChangesAreEventsApartFromIPv4(t *testing.T) {
	e := newEnv(t, strings.Replace(dualStackTopology, "ipv6Cidr: '2600:1f14:abc:de01::/64'}",
		"ipv6Cidr: '2600:1f14:abc:de01::/64', assignIpv6AddressOnCreation: true}", 1), nil)
	node := e.cloud.Instances()[0]
	events, cancel := e.cloud.Subscribe()
	defer cancel()
	first := next(t, events)
	if first.Kind != sim.ENIAttached || first.NetworkInterfaceID != node.PrimaryENI || len(first.IPv6Addresses) != 1 ||
		first.SubnetIPv6CIDR != netip.MustParsePrefix("2600:1f14:abc:de01::/64") || !slices.Equal(first.Addresses, []netip.Addr{node.PrivateIP}) {
		t.Errorf("initial event = %+v, want the primary ENI with its IPv4 and its one IPv6 address apart", first)
	}
	for range len(e.cloud.Instances()) - 1 {
		next(t, events)
	}
	out, err := assignIPv6(e, &ec2.AssignIpv6AddressesInput{NetworkInterfaceId: aws.String(node.PrimaryENI), Ipv6AddressCount: aws.Int32(2)})
	if err != nil {
		t.Fatal(err)
	}
	ev := next(t, events)
	var got []string
	for _, a := range ev.IPv6Addresses {
		got = append(got, a.String())
	}
	if ev.Kind != sim.IPv6AddressesAssigned || ev.InstanceID != node.ID || !slices.Equal(got, out.AssignedIpv6Addresses) || ev.Addresses != nil || ev.Prefixes != nil {
		t.Errorf("event = %+v, want IPv6AddressesAssigned with only %v", ev, out.AssignedIpv6Addresses)
	}
	p, err := assignIPv6(e, &ec2.AssignIpv6AddressesInput{NetworkInterfaceId: aws.String(node.PrimaryENI), Ipv6PrefixCount: aws.Int32(1)})
	if err != nil {
		t.Fatal(err)
	}
	ev = next(t, events)
	if ev.Kind != sim.IPv6PrefixesAssigned || len(ev.IPv6Prefixes) != 1 || ev.IPv6Prefixes[0].String() != p.AssignedIpv6Prefixes[0] || ev.IPv6Addresses != nil {
		t.Errorf("event = %+v, want IPv6PrefixesAssigned with %v", ev, p.AssignedIpv6Prefixes)
	}
	if _, err := e.ec2.UnassignIpv6Addresses(e.ctx, &ec2.UnassignIpv6AddressesInput{NetworkInterfaceId: aws.String(node.PrimaryENI), Ipv6Prefixes: p.AssignedIpv6Prefixes}); err != nil {
		t.Fatal(err)
	}
	if ev = next(t, events); ev.Kind != sim.IPv6PrefixesUnassigned || len(ev.IPv6Prefixes) != 1 {
		t.Errorf("event = %+v, want IPv6PrefixesUnassigned", ev)
	}
	// An IPv4 change carries no IPv6 address.
	if _, err := e.ec2.AssignPrivateIpAddresses(e.ctx, &ec2.AssignPrivateIpAddressesInput{NetworkInterfaceId: aws.String(node.PrimaryENI), SecondaryPrivateIpAddressCount: aws.Int32(1)}); err != nil {
		t.Fatal(err)
	}
	if ev = next(t, events); ev.Kind != sim.AddressesAssigned || len(ev.Addresses) != 1 || ev.IPv6Addresses != nil {
		t.Errorf("event = %+v, want AddressesAssigned with one IPv4 address only", ev)
	}
	// Interfaces shows the IPv6 state too.
	ifs, err := e.cloud.Interfaces(node.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(ifs[0].IPv6Addresses) != 3 || ifs[0].SubnetIPv6CIDR != first.SubnetIPv6CIDR || len(ifs[0].IPv6Prefixes) != 0 {
		t.Errorf("Interfaces = %+v", ifs[0])
	}
}
