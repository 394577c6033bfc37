package sim_test

import (
	"context"
	"errors"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/feature/ec2/imds"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/smithy-go"

	"github.com/vpcnet/vpcnet/sim"
	"github.com/vpcnet/vpcnet/sim/simtest"
)

// baseTopology is the cloud most tests start from: no delays, no faults,
// no throttling, so each test turns on only what it exercises.
const baseTopology = `
region: us-west-2
vpc: {id: vpc-0sim, cidrs: [10.0.0.0/16]}
subnets:
  - {id: subnet-a, az: us-west-2a, cidr: 10.0.0.0/24, tags: {Name: nodes-a}}
  - {id: subnet-b, az: us-west-2a, cidr: 10.0.16.0/20}
  - {id: subnet-tiny, az: us-west-2a, cidr: 10.0.1.0/28}
  - {id: subnet-c, az: us-west-2b, cidr: 10.0.2.0/24}
securityGroups: [sg-0sim, sg-other]
instanceTypes:
  - {name: x9.sim, maxENIs: 2, ipv4PerENI: 4}
instances:
  - {id: i-node1, type: m5.large, subnet: subnet-a}
  - {id: i-node2, type: x9.sim, subnet: subnet-a}
  - {id: i-xen, type: t2.micro, subnet: subnet-a}
throttle: {disabled: true}
seed: 1
`

var epoch = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

type env struct {
	t     *testing.T
	cloud *sim.Cloud
	clock *sim.ManualClock
	ec2   *ec2.Client
	ctx   context.Context
}

// newEnv starts a cloud from topology (edited by edit, if given) on a
// manual clock and returns an SDK client that it answers in process, with
// retries off, so every error reaches the test as EC2 sent it.
func newEnv(t *testing.T, topology string, edit func(*sim.Topology)) *env {
	t.Helper()
	topo, err := sim.ParseTopology([]byte(topology))
	if err != nil {
		t.Fatalf("ParseTopology: %v", err)
	}
	if edit != nil {
		edit(topo)
	}
	clock := sim.NewManualClock(epoch)
	cloud, err := sim.NewCloud(topo, sim.Options{Now: clock.Now, AfterFunc: clock.AfterFunc})
	if err != nil {
		t.Fatalf("NewCloud: %v", err)
	}
	t.Cleanup(cloud.Close)
	return &env{
		t:     t,
		cloud: cloud,
		clock: clock,
		ec2:   simtest.EC2Client(cloud.EC2Handler(), "AKIDSIM"),
		ctx:   context.Background(),
	}
}

// imds serves instanceID's IMDS on loopback and returns the SDK client.
func (e *env) imds(instanceID string) (*imds.Client, string) {
	srv := httptest.NewServer(e.cloud.IMDSHandler(instanceID))
	e.t.Cleanup(srv.Close)
	return imds.New(imds.Options{Endpoint: srv.URL}), srv.URL
}

// errorCode is the EC2 error code of err, or "" for nil.
func errorCode(t *testing.T, err error) string {
	t.Helper()
	if err == nil {
		return ""
	}
	var ae smithy.APIError
	if !errors.As(err, &ae) {
		t.Fatalf("error is not an EC2 API error: %v", err)
	}
	return ae.ErrorCode()
}

// httpStatus is the HTTP status of a failed call.
func httpStatus(t *testing.T, err error) int {
	t.Helper()
	var re *awshttp.ResponseError
	if !errors.As(err, &re) {
		t.Fatalf("error carries no HTTP response: %v", err)
	}
	return re.HTTPStatusCode()
}

func wantCode(t *testing.T, err error, code string) {
	t.Helper()
	if got := errorCode(t, err); got != code {
		t.Fatalf("error code = %q, want %q (err: %v)", got, code, err)
	}
}

// createENI creates an ENI in subnet with the given extra input, failing
// the test on error.
func (e *env) createENI(in *ec2.CreateNetworkInterfaceInput) *types.NetworkInterface {
	e.t.Helper()
	out, err := e.ec2.CreateNetworkInterface(e.ctx, in)
	if err != nil {
		e.t.Fatalf("CreateNetworkInterface: %v", err)
	}
	return out.NetworkInterface
}

// describeENI returns one ENI as DescribeNetworkInterfaces shows it.
func (e *env) describeENI(id string) types.NetworkInterface {
	e.t.Helper()
	out, err := e.ec2.DescribeNetworkInterfaces(e.ctx, &ec2.DescribeNetworkInterfacesInput{NetworkInterfaceIds: []string{id}})
	if err != nil {
		e.t.Fatalf("DescribeNetworkInterfaces %s: %v", id, err)
	}
	if len(out.NetworkInterfaces) != 1 {
		e.t.Fatalf("DescribeNetworkInterfaces %s: got %d interfaces", id, len(out.NetworkInterfaces))
	}
	return out.NetworkInterfaces[0]
}

// freeAddresses is the subnet's AvailableIpAddressCount.
func (e *env) freeAddresses(subnetID string) int32 {
	e.t.Helper()
	out, err := e.ec2.DescribeSubnets(e.ctx, &ec2.DescribeSubnetsInput{SubnetIds: []string{subnetID}})
	if err != nil {
		e.t.Fatalf("DescribeSubnets %s: %v", subnetID, err)
	}
	return aws.ToInt32(out.Subnets[0].AvailableIpAddressCount)
}

// attach attaches eniID to instanceID at device and returns the
// attachment ID.
func (e *env) attach(eniID, instanceID string, device int32) string {
	e.t.Helper()
	out, err := e.ec2.AttachNetworkInterface(e.ctx, &ec2.AttachNetworkInterfaceInput{
		NetworkInterfaceId: aws.String(eniID), InstanceId: aws.String(instanceID), DeviceIndex: aws.Int32(device),
	})
	if err != nil {
		e.t.Fatalf("AttachNetworkInterface %s to %s: %v", eniID, instanceID, err)
	}
	return aws.ToString(out.AttachmentId)
}

func contains(s, sub string) bool { return strings.Contains(s, sub) }
