package cloud

import (
	"context"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/vpcnet/vpcnet/sim"
	"github.com/vpcnet/vpcnet/sim/simtest"
)

const simDualStack = `
region: us-west-2
vpc: {id: vpc-0sim, cidrs: [10.0.0.0/16], ipv6Cidr: '2600:1f14:abc:de00::/56'}
subnets:
- {id: subnet-a, az: us-west-2a, cidr: 10.0.0.0/24, ipv6Cidr: '2600:1f14:abc:de01::/64'}
- {id: subnet-v4, az: us-west-2a, cidr: 10.0.16.0/20}
securityGroups: [sg-0sim]
instances:
- {id: i-node1, type: m5.large, subnet: subnet-a}
- {id: i-node2, type: m5.large, subnet: subnet-v4}
attachDelay: 0s
imdsLag: 0s
seed: 1
`

func dualStackClient(t *testing.T, instance string) *Client {
	t.Helper()
	simtest.IsolateAWSEnv(t)
	cl := simtest.New(t, simDualStack, sim.Options{})
	c, err := New(context.Background(), Options{
		EC2Endpoint:  simtest.Serve(t, cl.EC2Handler()),
		IMDSEndpoint: simtest.Serve(t, cl.IMDSHandler(instance)),
		Credentials:  credentials.NewStaticCredentialsProvider("AKIDTEST", "secret", ""),
		MaxBackoff:   2 * time.Millisecond,
		Registerer:   prometheus.NewRegistry(),
	})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// The IPv6 mode's reads and its one write, through the real SDK client:
// the subnet's /64 from IMDS and EC2, a /80 assigned to the primary ENI,
// then seen by DescribeNetworkInterfaces and IMDS alike.
func TestSimIPv6PrefixOnThePrimaryENIIsSeenByEC2AndIMDS(t *testing.T) {
	c := dualStackClient(t, "i-node1")
	ctx := context.Background()
	self, err := c.DescribeSelf(ctx)
	if err != nil {
		t.Fatal(err)
	}
	subnet64 := netip.MustParsePrefix("2600:1f14:abc:de01::/64")
	if !slices.Equal(self.Primary.SubnetIPv6CIDRs, []netip.Prefix{subnet64}) || len(self.Primary.IPv6Prefixes) != 0 {
		t.Fatalf("IMDS primary ENI: subnet IPv6 %v, IPv6 prefixes %v", self.Primary.SubnetIPv6CIDRs, self.Primary.IPv6Prefixes)
	}
	sns, err := c.DescribeSubnets(ctx, "subnet-a", "subnet-v4")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(sns[0].IPv6CIDRs, []netip.Prefix{subnet64}) || len(sns[1].IPv6CIDRs) != 0 {
		t.Fatalf("subnets' IPv6 CIDRs: %v, %v", sns[0].IPv6CIDRs, sns[1].IPv6CIDRs)
	}
	got, err := c.AssignIPv6Prefixes(ctx, self.Primary.ID, 1)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].Bits() != 80 || !subnet64.Contains(got[0].Addr()) {
		t.Fatalf("AssignIPv6Prefixes = %v, want one /80 in %s", got, subnet64)
	}
	enis, err := c.DescribeENIs(ctx, self.Primary.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(enis) != 1 || !slices.Equal(enis[0].IPv6Prefixes, got) {
		t.Fatalf("DescribeNetworkInterfaces IPv6 prefixes %v, want %v", enis, got)
	}
	self, err = c.DescribeSelf(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(self.Primary.IPv6Prefixes, got) {
		t.Errorf("IMDS ipv6-prefix %v, want %v", self.Primary.IPv6Prefixes, got)
	}
}

func TestSimIPv4OnlySubnetShowsNoIPv6AndRefusesAPrefix(t *testing.T) {
	c := dualStackClient(t, "i-node2")
	ctx := context.Background()
	self, err := c.DescribeSelf(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(self.Primary.SubnetIPv6CIDRs) != 0 {
		t.Fatalf("IMDS shows IPv6 CIDRs %v on an IPv4-only subnet", self.Primary.SubnetIPv6CIDRs)
	}
	if _, err := c.AssignIPv6Prefixes(ctx, self.Primary.ID, 1); err == nil {
		t.Fatal("EC2 gave an IPv6 prefix on a subnet without IPv6")
	}
}
