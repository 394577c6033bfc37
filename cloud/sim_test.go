package cloud

// Tests through the local cloud: the real SDK client against the emulator's
// EC2 Query API and IMDSv2 over loopback, endpoint override only.

import (
	"context"
	"errors"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/vpcnet/vpcnet/limits"
	"github.com/vpcnet/vpcnet/sim"
	"github.com/vpcnet/vpcnet/sim/simtest"
)

const simTopology = `
region: us-west-2
vpc: {id: vpc-0sim, cidrs: [10.0.0.0/16]}
subnets:
- {id: subnet-a, az: us-west-2a, cidr: 10.0.0.0/24}
- {id: subnet-tiny, az: us-west-2a, cidr: 10.0.1.0/28}
securityGroups: [sg-0sim]
instanceTypes: [{name: x9.sim, maxENIs: 2, ipv4PerENI: 4}]
instances:
- {id: i-node1, type: m5.large, subnet: subnet-a}
- {id: i-node2, type: x9.sim, subnet: subnet-a}
attachDelay: 0s
imdsLag: 0s
seed: 1
`

// simClient starts the local cloud and returns it with a client running
// "on" instance, learning region and instance id from its IMDS.
func simClient(t *testing.T, instance string, edit func(*Options)) (*Client, *sim.Cloud) {
	t.Helper()
	simtest.IsolateAWSEnv(t)
	cl := simtest.New(t, simTopology, sim.Options{})
	o := Options{
		EC2Endpoint:  simtest.Serve(t, cl.EC2Handler()),
		IMDSEndpoint: simtest.Serve(t, cl.IMDSHandler(instance)),
		Credentials:  credentials.NewStaticCredentialsProvider("AKIDTEST", "secret", ""),
		ClusterName:  "sim-cluster",
		MaxBackoff:   2 * time.Millisecond, // the sim needs no real patience
		Registerer:   prometheus.NewRegistry(),
	}
	if edit != nil {
		edit(&o)
	}
	c, err := New(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	return c, cl
}

func TestSimDescribeSelfAgreesWithEC2(t *testing.T) {
	c, _ := simClient(t, "i-node1", nil)
	ctx := context.Background()
	if c.Region() != "us-west-2" || c.InstanceID() != "i-node1" {
		t.Fatalf("New learned region %q, instance %q", c.Region(), c.InstanceID())
	}
	self, err := c.DescribeSelf(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if self.InstanceID != "i-node1" || self.InstanceType != "m5.large" || self.AvailabilityZone != "us-west-2a" || self.Region != "us-west-2" {
		t.Errorf("identity %+v", self)
	}
	if !slices.Equal(self.VPCCIDRs, []netip.Prefix{netip.MustParsePrefix("10.0.0.0/16")}) {
		t.Errorf("VPC CIDRs %v", self.VPCCIDRs)
	}
	p := self.Primary
	if p.DeviceNumber != 0 || p.SubnetID != "subnet-a" || p.SubnetCIDR != netip.MustParsePrefix("10.0.0.0/24") ||
		!slices.Equal(p.SecurityGroups, []string{"sg-0sim"}) || !p.SubnetCIDR.Contains(p.PrimaryIP()) {
		t.Errorf("primary ENI %+v", p)
	}
	if len(self.Interfaces) != 1 {
		t.Errorf("IMDS shows %d ENIs, want the primary only", len(self.Interfaces))
	}
	enis, err := c.ListENIs(ctx, ENIFilter{InstanceID: "i-node1"})
	if err != nil {
		t.Fatal(err)
	}
	if len(enis) != 1 || enis[0].ID != p.ID || enis[0].MAC != p.MAC || enis[0].PrimaryIP != p.PrimaryIP() {
		t.Errorf("EC2 says %+v, IMDS says %+v", enis, p)
	}
}

func TestSimENILifecycle(t *testing.T) {
	c, _ := simClient(t, "i-node1", nil)
	ctx := context.Background()
	lim, err := c.InstanceLimits(ctx, "m5.large")
	if err != nil {
		t.Fatal(err)
	}

	eni, err := c.CreateENI(ctx, CreateENIInput{SubnetID: "subnet-a", SecurityGroups: []string{"sg-0sim"}, Description: "vpcnet", SecondaryAddresses: 3})
	if err != nil {
		t.Fatal(err)
	}
	if eni.Status != StatusAvailable || len(eni.SecondaryIPs) != 3 || eni.Tags[TagInstanceID] != "i-node1" || eni.Tags[TagClusterName] != "sim-cluster" || eni.Tags[TagCreatedAt] == "" {
		t.Fatalf("created %+v", eni)
	}
	leaked, err := c.ListENIs(ctx, ENIFilter{Status: StatusAvailable, Tags: map[string]string{TagClusterName: "sim-cluster"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(leaked) != 1 || leaked[0].ID != eni.ID {
		t.Errorf("available ENIs of the cluster: %+v, want the new one", leaked)
	}

	attached, err := c.ListENIs(ctx, ENIFilter{InstanceID: "i-node1"})
	if err != nil {
		t.Fatal(err)
	}
	var used []int
	for _, e := range attached {
		used = append(used, e.Attachment.DeviceIndex)
	}
	dev, ok := FreeDeviceIndex(used, lim.MaxENIs)
	if !ok || dev != 1 {
		t.Fatalf("free device index %d, %t", dev, ok)
	}
	att, err := c.AttachENI(ctx, eni.ID, "i-node1", dev)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.SetDeleteOnTermination(ctx, eni.ID, att, true); err != nil {
		t.Fatal(err)
	}
	added, err := c.AssignAddresses(ctx, eni.ID, 2)
	if err != nil || len(added) != 2 {
		t.Fatalf("assign 2: %v, %v", added, err)
	}
	if err := c.UnassignAddresses(ctx, eni.ID, eni.SecondaryIPs[:1]); err != nil {
		t.Fatal(err)
	}

	got := describeOne(t, c, eni.ID)
	if got.Status != StatusInUse || got.Attachment == nil || got.Attachment.ID != att || got.Attachment.DeviceIndex != dev ||
		got.Attachment.State != AttachmentAttached || !got.Attachment.DeleteOnTermination {
		t.Errorf("after attach: %+v attachment %+v", got, got.Attachment)
	}
	wantIPs := append(slices.Clone(eni.SecondaryIPs[1:]), added...)
	if !sameAddrs(got.SecondaryIPs, wantIPs) {
		t.Errorf("secondary addresses %v, want %v", got.SecondaryIPs, wantIPs)
	}
	self, err := c.DescribeSelf(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(self.Interfaces) != 2 || self.Interfaces[1].ID != eni.ID || self.Interfaces[1].DeviceNumber != dev ||
		!sameAddrs(self.Interfaces[1].IPv4s[1:], wantIPs) {
		t.Errorf("IMDS interfaces %+v", self.Interfaces)
	}

	if err := c.DetachENI(ctx, att, false); err != nil {
		t.Fatal(err)
	}
	if got := describeOne(t, c, eni.ID); got.Status != StatusAvailable || got.Attachment != nil {
		t.Errorf("after detach: %+v", got)
	}
	if err := c.DeleteENI(ctx, eni.ID); err != nil {
		t.Fatal(err)
	}
	if gone, err := c.DescribeENIs(ctx, eni.ID); err != nil || len(gone) != 0 {
		t.Errorf("after delete DescribeENIs = %+v, %v; want nothing", gone, err)
	}
	err = c.DeleteENI(ctx, eni.ID)
	if !IsNotFound(err) {
		t.Errorf("second delete: %v, want not found", err)
	}
	if err := c.DetachENI(ctx, att, false); !IsNotFound(err) {
		t.Errorf("second detach: %v, want not found", err)
	}
}

func TestSimPrefixes(t *testing.T) {
	c, _ := simClient(t, "i-node1", nil)
	ctx := context.Background()
	eni, err := c.CreateENI(ctx, CreateENIInput{SubnetID: "subnet-a", Prefixes: 1})
	if err != nil {
		t.Fatal(err)
	}
	if len(eni.Prefixes) != 1 || eni.Prefixes[0].Bits() != 28 {
		t.Fatalf("created with prefixes %v", eni.Prefixes)
	}
	more, err := c.AssignPrefixes(ctx, eni.ID, 2)
	if err != nil || len(more) != 2 {
		t.Fatalf("assign 2 prefixes: %v, %v", more, err)
	}
	if err := c.UnassignPrefixes(ctx, eni.ID, eni.Prefixes); err != nil {
		t.Fatal(err)
	}
	got := describeOne(t, c, eni.ID)
	if !slices.Equal(sortedPrefixes(got.Prefixes), sortedPrefixes(more)) {
		t.Errorf("prefixes %v, want %v", got.Prefixes, more)
	}
}

func TestSimSucceedsThroughHalfTheCallsThrottled(t *testing.T) {
	c, cl := simClient(t, "i-node1", func(o *Options) { o.MaxAttempts = 15 })
	ctx := context.Background()
	throttled := sim.Fault{ErrorRate: 0.5, Code: "RequestLimitExceeded"}
	cl.SetFault("DescribeSubnets", throttled)
	cl.SetFault("CreateNetworkInterface", throttled)
	const calls = 20
	for i := range calls {
		if _, err := c.DescribeSubnets(ctx, "subnet-a"); err != nil {
			t.Fatalf("describe %d: %v", i, err)
		}
	}
	const creates = 5
	for i := range creates {
		if _, err := c.CreateENI(ctx, CreateENIInput{SubnetID: "subnet-a"}); err != nil {
			t.Fatalf("create %d: %v", i, err)
		}
	}
	for _, action := range []string{"DescribeSubnets", "CreateNetworkInterface"} {
		v := testutil.ToFloat64(c.metrics.retries.WithLabelValues(action))
		t.Logf("%s: %v retries", action, v)
		if v < 1 {
			t.Errorf("vpcnet_ec2_retries_total{action=%s} = %v; half the attempts failed, so retries must show", action, v)
		}
		if v := testutil.ToFloat64(c.metrics.errors.WithLabelValues(action, "RequestLimitExceeded")); v != 0 {
			t.Errorf("vpcnet_ec2_errors_total{action=%s} = %v for calls that all succeeded", action, v)
		}
	}
	if v := testutil.ToFloat64(c.metrics.requests.WithLabelValues("DescribeSubnets")); v != calls {
		t.Errorf("vpcnet_ec2_requests_total = %v, want %d", v, calls)
	}
	cl.SetFault("CreateNetworkInterface", sim.Fault{})
	mine, err := c.ListENIs(ctx, ENIFilter{Status: StatusAvailable, Tags: map[string]string{TagInstanceID: "i-node1"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(mine) != creates {
		t.Errorf("%d creates through throttling left %d ENIs", creates, len(mine))
	}
}

func TestSimUnknownInstanceTypeFromEC2IsCached(t *testing.T) {
	c, _ := simClient(t, "i-node2", nil)
	ctx := context.Background()
	if _, inTable := limits.Lookup("x9.sim"); inTable {
		t.Fatal("x9.sim is in the generated table; the test needs a type only EC2 knows")
	}
	for range 2 {
		l, err := c.InstanceLimits(ctx, "x9.sim")
		if err != nil {
			t.Fatal(err)
		}
		if l.InstanceType != "x9.sim" || l.MaxENIs != 2 || l.IPv4PerENI != 4 {
			t.Errorf("limits %+v, want 2 ENIs of 4 addresses", l)
		}
	}
	if v := testutil.ToFloat64(c.metrics.requests.WithLabelValues("DescribeInstanceTypes")); v != 1 {
		t.Errorf("DescribeInstanceTypes called %v times, want once", v)
	}
	_, err := c.InstanceLimits(ctx, "zz99.nothing")
	if !errors.Is(err, ErrUnknownInstanceType) {
		t.Errorf("a type nobody knows: %v, want ErrUnknownInstanceType", err)
	}
}

func TestSimLimitsAreClassified(t *testing.T) {
	c, _ := simClient(t, "i-node2", nil) // x9.sim: 2 ENIs of 4 addresses
	ctx := context.Background()

	full, err := c.CreateENI(ctx, CreateENIInput{SubnetID: "subnet-a", SecondaryAddresses: 3})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.AttachENI(ctx, full.ID, "i-node2", 1); err != nil {
		t.Fatal(err)
	}
	_, err = c.AssignAddresses(ctx, full.ID, 1)
	if !IsAddressLimit(err) {
		t.Errorf("fifth address on an x9.sim ENI: %v, want the address limit", err)
	}
	extra, err := c.CreateENI(ctx, CreateENIInput{SubnetID: "subnet-a"})
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.AttachENI(ctx, extra.ID, "i-node2", 2)
	if !IsAttachmentLimit(err) {
		t.Errorf("third ENI on an x9.sim: %v, want the attachment limit", err)
	}
}

func TestSimSubnetExhaustion(t *testing.T) {
	c, _ := simClient(t, "i-node1", nil)
	ctx := context.Background()
	// A /28 has 16 addresses, 5 reserved by AWS: 11 for ENIs.
	if _, err := c.CreateENI(ctx, CreateENIInput{SubnetID: "subnet-tiny", SecondaryAddresses: 10}); err != nil {
		t.Fatal(err)
	}
	sn, err := c.DescribeSubnets(ctx, "subnet-tiny")
	if err != nil {
		t.Fatal(err)
	}
	if len(sn) != 1 || sn[0].AvailableAddresses != 0 {
		t.Errorf("subnet after taking all 11: %+v", sn)
	}
	_, err = c.CreateENI(ctx, CreateENIInput{SubnetID: "subnet-tiny"})
	if !IsSubnetExhausted(err) {
		t.Fatalf("create in a full subnet: %v, want subnet exhausted", err)
	}
	if !strings.HasPrefix(err.Error(), "create ENI in subnet-tiny: InsufficientFreeAddressesInSubnet: ") {
		t.Errorf("error reads %q", err)
	}
	_, err = c.CreateENI(ctx, CreateENIInput{SubnetID: "subnet-a", Prefixes: 1})
	if err != nil {
		t.Fatal(err)
	}
	if _, err = c.CreateENI(ctx, CreateENIInput{SubnetID: "subnet-tiny", Prefixes: 1}); !IsSubnetExhausted(err) {
		t.Errorf("a /28 prefix from a full /28 subnet: %v, want subnet exhausted", err)
	}
}

func describeOne(t *testing.T, c *Client, id string) ENI {
	t.Helper()
	enis, err := c.DescribeENIs(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	if len(enis) != 1 {
		t.Fatalf("DescribeENIs(%s) = %d ENIs", id, len(enis))
	}
	return enis[0]
}

func sameAddrs(a, b []netip.Addr) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.SortFunc(a, netip.Addr.Compare)
	slices.SortFunc(b, netip.Addr.Compare)
	return slices.Equal(a, b)
}

func sortedPrefixes(ps []netip.Prefix) []netip.Prefix {
	ps = slices.Clone(ps)
	slices.SortFunc(ps, func(a, b netip.Prefix) int { return a.Addr().Compare(b.Addr()) })
	return ps
}
