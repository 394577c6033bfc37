package sim_test

import (
	"strconv"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/vpcnet/vpcnet/sim"
)

// timeouts writes an ENI's connection-tracking timeouts as
// TCP/UDP-stream/UDP, - where EC2 gives none, or "none" without the element.
func timeouts(c *types.ConnectionTrackingConfiguration) string {
	if c == nil {
		return "none"
	}
	return timeoutsOf(c.TcpEstablishedTimeout, c.UdpStreamTimeout, c.UdpTimeout)
}

func timeoutsOf(ps ...*int32) string {
	var parts []string
	for _, p := range ps {
		if p == nil {
			parts = append(parts, "-")
			continue
		}
		parts = append(parts, strconv.Itoa(int(*p)))
	}
	return strings.Join(parts, "/")
}

// An ENI created with connection-tracking timeouts is described with
// those it was given, and one created without any with none, as EC2 does.
func TestConnectionTrackingGivenOnCreateIsDescribed(t *testing.T) {
	e := newEnv(t, baseTopology, nil)
	with := e.createENI(&ec2.CreateNetworkInterfaceInput{SubnetId: aws.String("subnet-a"),
		ConnectionTrackingSpecification: &types.ConnectionTrackingSpecificationRequest{TcpEstablishedTimeout: aws.Int32(120), UdpStreamTimeout: aws.Int32(90)}})
	if got := timeouts(with.ConnectionTrackingConfiguration); got != "120/90/-" {
		t.Errorf("created ENI's timeouts %s, want 120/90/-", got)
	}
	if got := timeouts(e.describeENI(*with.NetworkInterfaceId).ConnectionTrackingConfiguration); got != "120/90/-" {
		t.Errorf("described ENI's timeouts %s, want 120/90/-", got)
	}
	without := e.createENI(&ec2.CreateNetworkInterfaceInput{SubnetId: aws.String("subnet-a")})
	if got := timeouts(e.describeENI(*without.NetworkInterfaceId).ConnectionTrackingConfiguration); got != "none" {
		t.Errorf("ENI created without timeouts described with %s", got)
	}
}

func TestConnectionTrackingOutsideEC2sBoundsIsInvalidParameterValue(t *testing.T) {
	e := newEnv(t, baseTopology, nil)
	for _, spec := range []types.ConnectionTrackingSpecificationRequest{
		{TcpEstablishedTimeout: aws.Int32(59)},
		{TcpEstablishedTimeout: aws.Int32(432001)},
		{UdpStreamTimeout: aws.Int32(181)},
		{UdpTimeout: aws.Int32(29)},
		{UdpTimeout: aws.Int32(61)},
	} {
		_, err := e.ec2.CreateNetworkInterface(e.ctx, &ec2.CreateNetworkInterfaceInput{SubnetId: aws.String("subnet-a"), ConnectionTrackingSpecification: &spec})
		wantCode(t, err, "InvalidParameterValue")
	}
	if n := e.freeAddresses("subnet-a"); n != 251-3 { // three instances' primaries
		t.Errorf("%d free addresses after refused creates, want 248", n)
	}
}

// ModifyNetworkInterfaceAttribute changes the timeouts it is given, as its
// one attribute, and keeps the others.
func TestModifyNetworkInterfaceAttributeSetsConnectionTracking(t *testing.T) {
	e := newEnv(t, baseTopology, nil)
	id := e.createENI(&ec2.CreateNetworkInterfaceInput{SubnetId: aws.String("subnet-a"),
		ConnectionTrackingSpecification: &types.ConnectionTrackingSpecificationRequest{TcpEstablishedTimeout: aws.Int32(120)}}).NetworkInterfaceId
	if _, err := e.ec2.ModifyNetworkInterfaceAttribute(e.ctx, &ec2.ModifyNetworkInterfaceAttributeInput{NetworkInterfaceId: id,
		ConnectionTrackingSpecification: &types.ConnectionTrackingSpecificationRequest{UdpTimeout: aws.Int32(45)}}); err != nil {
		t.Fatal(err)
	}
	if got := timeouts(e.describeENI(*id).ConnectionTrackingConfiguration); got != "120/-/45" {
		t.Errorf("timeouts after modify %s, want 120/-/45", got)
	}
	_, err := e.ec2.ModifyNetworkInterfaceAttribute(e.ctx, &ec2.ModifyNetworkInterfaceAttributeInput{NetworkInterfaceId: id,
		Description:                     &types.AttributeValue{Value: aws.String("x")},
		ConnectionTrackingSpecification: &types.ConnectionTrackingSpecificationRequest{UdpTimeout: aws.Int32(45)}})
	wantCode(t, err, "InvalidParameterCombination")
}

// A topology sets the primary ENI's timeouts as a launch template does;
// DescribeNetworkInterfaces and DescribeInstances show them.
func TestThePrimaryENIsConnectionTrackingComesFromTheTopology(t *testing.T) {
	e := newEnv(t, baseTopology, func(topo *sim.Topology) {
		topo.Instances[0].ConnectionTracking = &sim.ConnTrackSpec{TCPEstablishedTimeout: 3600, UDPStreamTimeout: 60, UDPTimeout: 30}
	})
	out, err := e.ec2.DescribeNetworkInterfaces(e.ctx, &ec2.DescribeNetworkInterfacesInput{Filters: []types.Filter{
		{Name: aws.String("attachment.instance-id"), Values: []string{"i-node1"}}}})
	if err != nil || len(out.NetworkInterfaces) != 1 {
		t.Fatalf("DescribeNetworkInterfaces: %v, %d", err, len(out.NetworkInterfaces))
	}
	if got := timeouts(out.NetworkInterfaces[0].ConnectionTrackingConfiguration); got != "3600/60/30" {
		t.Errorf("primary ENI's timeouts %s, want 3600/60/30", got)
	}
	inst, err := e.ec2.DescribeInstances(e.ctx, &ec2.DescribeInstancesInput{InstanceIds: []string{"i-node1", "i-node2"}})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, r := range inst.Reservations {
		for _, i := range r.Instances {
			got[aws.ToString(i.InstanceId)] = instanceTimeouts(i.NetworkInterfaces[0].ConnectionTrackingConfiguration)
		}
	}
	if got["i-node1"] != "3600/60/30" || got["i-node2"] != "none" {
		t.Errorf("DescribeInstances timeouts %v, want i-node1 3600/60/30 and i-node2 none", got)
	}
	_, err = sim.ParseTopology([]byte(strings.Replace(baseTopology, "type: m5.large, subnet: subnet-a}", "type: m5.large, subnet: subnet-a, connectionTracking: {udpTimeout: 90}}", 1)))
	if err == nil || !strings.Contains(err.Error(), "UdpTimeout 90 is outside EC2's 30 to 60 seconds") {
		t.Errorf("topology with udpTimeout 90: %v", err)
	}
}

func instanceTimeouts(c *types.ConnectionTrackingSpecificationResponse) string {
	if c == nil {
		return "none"
	}
	return timeoutsOf(c.TcpEstablishedTimeout, c.UdpStreamTimeout, c.UdpTimeout)
}
