package sim_test

import (
	"errors"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/ec2/imds"
	"github.com/aws/aws-sdk-go-v2/service/ec2"

	"github.com/vpcnet/vpcnet/sim"
)

// wantNotFound checks that IMDS answers path with 404, as EC2's IMDS
// does for a key the instance does not have.
func wantNotFound(t *testing.T, c *imds.Client, path string) {
	t.Helper()
	got, err := metadata(t, c, path)
	var re interface{ HTTPStatusCode() int }
	if !errors.As(err, &re) || re.HTTPStatusCode() != http.StatusNotFound {
		t.Errorf("%s = %q, %v; want 404", path, got, err)
	}
}

// macEntries lists a MAC directory.
func macEntries(t *testing.T, c *imds.Client, mac string) []string {
	t.Helper()
	return strings.Split(mustMetadata(t, c, "network/interfaces/macs/"+mac+"/"), "\n")
}

func TestIMDSServesIPv6KeysOnlyWhenEC2Would(t *testing.T) {
	e := newEnv(t, dualStackTopology, nil)
	node := e.cloud.Instances()[0]
	c, _ := e.imds(node.ID)
	dir := "network/interfaces/macs/" + node.MAC + "/"

	// Dual-stack subnet, no IPv6 on the ENI yet: the blocks are shown,
	// the addresses are not.
	for path, want := range map[string]string{
		dir + "subnet-ipv6-cidr-blocks": "2600:1f14:abc:de01::/64",
		dir + "vpc-ipv6-cidr-blocks":    "2600:1f14:abc:de00::/56",
	} {
		if got := mustMetadata(t, c, path); got != want {
			t.Errorf("%s = %q, want %q", path, got, want)
		}
	}
	for _, key := range []string{"ipv6s", "ipv6-prefix"} {
		wantNotFound(t, c, dir+key)
		if slices.Contains(macEntries(t, c, node.MAC), key) {
			t.Errorf("the MAC directory lists %s for an ENI without any", key)
		}
	}
	wantNotFound(t, c, "ipv6")

	addrs, err := assignIPv6(e, &ec2.AssignIpv6AddressesInput{NetworkInterfaceId: aws.String(node.PrimaryENI), Ipv6AddressCount: aws.Int32(2)})
	if err != nil {
		t.Fatal(err)
	}
	prefixes, err := assignIPv6(e, &ec2.AssignIpv6AddressesInput{NetworkInterfaceId: aws.String(node.PrimaryENI), Ipv6PrefixCount: aws.Int32(2)})
	if err != nil {
		t.Fatal(err)
	}
	// Lists are one item a line, with no trailing newline.
	for path, want := range map[string]string{
		dir + "ipv6s":       strings.Join(addrs.AssignedIpv6Addresses, "\n"),
		dir + "ipv6-prefix": strings.Join(prefixes.AssignedIpv6Prefixes, "\n"),
		"ipv6":              addrs.AssignedIpv6Addresses[0],
	} {
		if got := mustMetadata(t, c, path); got != want {
			t.Errorf("%s = %q, want %q", path, got, want)
		}
	}
	entries := macEntries(t, c, node.MAC)
	for _, key := range []string{"ipv6s", "ipv6-prefix", "subnet-ipv6-cidr-blocks", "vpc-ipv6-cidr-blocks", "local-ipv4s"} {
		if !slices.Contains(entries, key) {
			t.Errorf("the MAC directory %v lacks %s", entries, key)
		}
	}

	// An ENI in an IPv4-only subnet of the dual-stack VPC: the VPC's
	// blocks only.
	v4 := e.createENI(&ec2.CreateNetworkInterfaceInput{SubnetId: aws.String("subnet-b")})
	e.attach(aws.ToString(v4.NetworkInterfaceId), node.ID, 1)
	v4dir := "network/interfaces/macs/" + aws.ToString(v4.MacAddress) + "/"
	for _, key := range []string{"ipv6s", "ipv6-prefix", "subnet-ipv6-cidr-blocks"} {
		wantNotFound(t, c, v4dir+key)
	}
	if got := mustMetadata(t, c, v4dir+"vpc-ipv6-cidr-blocks"); got != "2600:1f14:abc:de00::/56" {
		t.Errorf("vpc-ipv6-cidr-blocks of an IPv4-only subnet's ENI = %q", got)
	}
}

func TestIMDSOfAnIPv4OnlyVPCHasNoIPv6Keys(t *testing.T) {
	e := newEnv(t, baseTopology, nil)
	node := e.cloud.Instances()[0]
	c, _ := e.imds(node.ID)
	for _, key := range []string{"ipv6s", "ipv6-prefix", "subnet-ipv6-cidr-blocks", "vpc-ipv6-cidr-blocks"} {
		wantNotFound(t, c, "network/interfaces/macs/"+node.MAC+"/"+key)
		if slices.Contains(macEntries(t, c, node.MAC), key) {
			t.Errorf("an IPv4-only VPC's MAC directory lists %s", key)
		}
	}
}

func TestIMDSShowsIPv6ChangesAfterTheLag(t *testing.T) {
	e := newEnv(t, baseTopology, func(t *sim.Topology) { t.IMDSLag = sim.Duration(500 * time.Millisecond) })
	node := e.cloud.Instances()[0]
	c, _ := e.imds(node.ID)
	e.clock.Advance(time.Second) // past the lag of the launch
	dir := "network/interfaces/macs/" + node.MAC + "/"

	// A subnet made dual stack at run time shows in IMDS, late.
	if _, err := e.ec2.AssociateVpcCidrBlock(e.ctx, &ec2.AssociateVpcCidrBlockInput{VpcId: aws.String("vpc-0sim"), AmazonProvidedIpv6CidrBlock: aws.Bool(true)}); err != nil {
		t.Fatal(err)
	}
	vpc56 := aws.ToString(e.vpcIPv6Blocks()[0].Ipv6CidrBlock)
	sub64 := a64Of(vpc56)
	if _, err := e.ec2.AssociateSubnetCidrBlock(e.ctx, &ec2.AssociateSubnetCidrBlockInput{SubnetId: aws.String("subnet-a"), Ipv6CidrBlock: aws.String(sub64)}); err != nil {
		t.Fatalf("AssociateSubnetCidrBlock %s (VPC %s): %v", sub64, vpc56, err)
	}
	wantNotFound(t, c, dir+"subnet-ipv6-cidr-blocks")
	e.clock.Advance(500 * time.Millisecond)
	if got := mustMetadata(t, c, dir+"subnet-ipv6-cidr-blocks"); got != sub64 {
		t.Errorf("subnet-ipv6-cidr-blocks = %q, want %q", got, sub64)
	}
	if got := mustMetadata(t, c, dir+"vpc-ipv6-cidr-blocks"); got != vpc56 {
		t.Errorf("vpc-ipv6-cidr-blocks = %q, want %q", got, vpc56)
	}

	if _, err := assignIPv6(e, &ec2.AssignIpv6AddressesInput{NetworkInterfaceId: aws.String(node.PrimaryENI), Ipv6PrefixCount: aws.Int32(1)}); err != nil {
		t.Fatal(err)
	}
	wantNotFound(t, c, dir+"ipv6-prefix")
	e.clock.Advance(500 * time.Millisecond)
	if got := mustMetadata(t, c, dir+"ipv6-prefix"); !strings.HasSuffix(got, "::/80") {
		t.Errorf("after the lag ipv6-prefix = %q, want a /80", got)
	}
}
