package sim_test

import (
	"net/netip"
	"os"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/vpcnet/vpcnet/sim"
)

// vpcIPv6Blocks is the VPC's IPv6 /56s as DescribeVpcs shows them.
func (e *env) vpcIPv6Blocks() []types.VpcIpv6CidrBlockAssociation {
	e.t.Helper()
	out, err := e.ec2.DescribeVpcs(e.ctx, &ec2.DescribeVpcsInput{VpcIds: []string{"vpc-0sim"}})
	if err != nil {
		e.t.Fatalf("DescribeVpcs: %v", err)
	}
	if len(out.Vpcs) != 1 {
		e.t.Fatalf("DescribeVpcs: %d VPCs", len(out.Vpcs))
	}
	return out.Vpcs[0].Ipv6CidrBlockAssociationSet
}

// a64Of is the /64 numbered 1 of a VPC's /56.
func a64Of(vpc56 string) string {
	b := netip.MustParsePrefix(vpc56).Addr().As16()
	b[7] = 0x01
	return netip.PrefixFrom(netip.AddrFrom16(b), 64).String()
}

// A test makes an IPv4-only subnet dual stack at run time: a /56 for the
// VPC, then a /64 of it for the subnet, then IPv6 addresses.
func TestASubnetBecomesDualStackAtRunTime(t *testing.T) {
	e := newEnv(t, baseTopology, nil)
	eni := e.cloud.Instances()[0].PrimaryENI
	_, err := assignIPv6(e, &ec2.AssignIpv6AddressesInput{NetworkInterfaceId: aws.String(eni), Ipv6AddressCount: aws.Int32(1)})
	wantCode(t, err, "InvalidParameterValue") // no IPv6 yet
	if got := e.vpcIPv6Blocks(); len(got) != 0 {
		t.Fatalf("an IPv4-only VPC has IPv6 blocks %+v", got)
	}
	// A /64 before the VPC has a /56 is outside every VPC block.
	_, err = e.ec2.AssociateSubnetCidrBlock(e.ctx, &ec2.AssociateSubnetCidrBlockInput{SubnetId: aws.String("subnet-a"), Ipv6CidrBlock: aws.String("2600:1f14:abc:de01::/64")})
	wantCode(t, err, "InvalidSubnet.Range")

	vpc, err := e.ec2.AssociateVpcCidrBlock(e.ctx, &ec2.AssociateVpcCidrBlockInput{VpcId: aws.String("vpc-0sim"), AmazonProvidedIpv6CidrBlock: aws.Bool(true)})
	if err != nil {
		t.Fatal(err)
	}
	as := vpc.Ipv6CidrBlockAssociation
	// EC2 answers before it has chosen the block.
	if as.Ipv6CidrBlockState.State != types.VpcCidrBlockStateCodeAssociating || as.Ipv6CidrBlock != nil || aws.ToString(as.Ipv6Pool) != "Amazon" ||
		aws.ToString(vpc.VpcId) != "vpc-0sim" || aws.ToString(as.NetworkBorderGroup) != "us-west-2" {
		t.Errorf("AssociateVpcCidrBlock answered %+v", as)
	}
	blocks := e.vpcIPv6Blocks()
	if len(blocks) != 1 || aws.ToString(blocks[0].AssociationId) != aws.ToString(as.AssociationId) || blocks[0].Ipv6CidrBlockState.State != types.VpcCidrBlockStateCodeAssociated {
		t.Fatalf("DescribeVpcs shows %+v", blocks)
	}
	vpc56 := netip.MustParsePrefix(aws.ToString(blocks[0].Ipv6CidrBlock))
	if vpc56.Bits() != 56 || vpc56.Masked() != vpc56 {
		t.Fatalf("the VPC's block %s is not a /56", vpc56)
	}
	sub64 := a64Of(vpc56.String())

	sn, err := e.ec2.AssociateSubnetCidrBlock(e.ctx, &ec2.AssociateSubnetCidrBlockInput{SubnetId: aws.String("subnet-a"), Ipv6CidrBlock: aws.String(sub64)})
	if err != nil {
		t.Fatal(err)
	}
	if sa := sn.Ipv6CidrBlockAssociation; aws.ToString(sn.SubnetId) != "subnet-a" || aws.ToString(sa.Ipv6CidrBlock) != sub64 ||
		sa.Ipv6CidrBlockState.State != types.SubnetCidrBlockStateCodeAssociating {
		t.Errorf("AssociateSubnetCidrBlock answered %+v", sa)
	}
	out, err := assignIPv6(e, &ec2.AssignIpv6AddressesInput{NetworkInterfaceId: aws.String(eni), Ipv6AddressCount: aws.Int32(1)})
	if err != nil {
		t.Fatalf("IPv6 on a subnet made dual stack: %v", err)
	}
	if a := netip.MustParseAddr(out.AssignedIpv6Addresses[0]); !netip.MustParsePrefix(sub64).Contains(a) {
		t.Errorf("address %s is not from the subnet's %s", a, sub64)
	}
}

func TestAssociateCidrBlockErrors(t *testing.T) {
	e := newEnv(t, dualStackTopology, nil)
	subnet := func(id, cidr string) error {
		in := &ec2.AssociateSubnetCidrBlockInput{SubnetId: aws.String(id)}
		if cidr != "" {
			in.Ipv6CidrBlock = aws.String(cidr)
		}
		_, err := e.ec2.AssociateSubnetCidrBlock(e.ctx, in)
		return err
	}
	wantCode(t, subnet("subnet-b", ""), "MissingParameter")
	wantCode(t, subnet("subnet-missing", "2600:1f14:abc:de10::/64"), "InvalidSubnetID.NotFound")
	wantCode(t, subnet("subnet-b", "2600:1f14:abc:de10::/60"), "InvalidParameterValue")
	wantCode(t, subnet("subnet-b", "2600:1f14:abc:de10::1/64"), "InvalidParameterValue")
	wantCode(t, subnet("subnet-b", "2600:1f14:abc:ee10::/64"), "InvalidSubnet.Range")
	wantCode(t, subnet("subnet-b", "2600:1f14:abc:de01::/64"), "InvalidSubnet.Conflict")
	wantCode(t, subnet("subnet-a", "2600:1f14:abc:de10::/64"), "InvalidParameterValue") // has one already
	if err := subnet("subnet-b", "2600:1f14:abc:de10::/64"); err != nil {
		t.Errorf("a free /64 of the VPC's /56: %v", err)
	}

	vpc := func(in *ec2.AssociateVpcCidrBlockInput) error {
		_, err := e.ec2.AssociateVpcCidrBlock(e.ctx, in)
		return err
	}
	wantCode(t, vpc(&ec2.AssociateVpcCidrBlockInput{VpcId: aws.String("vpc-0sim")}), "MissingParameter")
	wantCode(t, vpc(&ec2.AssociateVpcCidrBlockInput{VpcId: aws.String("vpc-other"), AmazonProvidedIpv6CidrBlock: aws.Bool(true)}), "InvalidVpcID.NotFound")
	// The topology's block and four more make EC2's five.
	for i := range 4 {
		if err := vpc(&ec2.AssociateVpcCidrBlockInput{VpcId: aws.String("vpc-0sim"), AmazonProvidedIpv6CidrBlock: aws.Bool(true)}); err != nil {
			t.Fatalf("block %d: %v", i+2, err)
		}
	}
	wantCode(t, vpc(&ec2.AssociateVpcCidrBlockInput{VpcId: aws.String("vpc-0sim"), AmazonProvidedIpv6CidrBlock: aws.Bool(true)}), "CidrLimitExceeded")
	seen := map[string]bool{}
	for _, b := range e.vpcIPv6Blocks() {
		seen[aws.ToString(b.Ipv6CidrBlock)] = true
	}
	if len(seen) != 5 {
		t.Errorf("the VPC's five blocks are not distinct: %v", seen)
	}
}

func TestTopologyChecksIPv6Blocks(t *testing.T) {
	tests := map[string]struct{ from, to, want string }{
		"VPC block not a /56":            {"ipv6Cidr: '2600:1f14:abc:de00::/56'", "ipv6Cidr: '2600:1f14:abc:de00::/48'", "want a /56"},
		"subnet block outside the VPC's": {"ipv6Cidr: '2600:1f14:abc:de01::/64'}", "ipv6Cidr: '2600:1f14:abc:ee01::/64'}", "outside the VPC"},
		"subnet block not a /64":         {"ipv6Cidr: '2600:1f14:abc:de01::/64'}", "ipv6Cidr: '2600:1f14:abc:de01::/72'}", "want a /64"},
		"subnet block twice":             {"ipv6Cidr: '2600:1f14:abc:de03::/64'", "ipv6Cidr: '2600:1f14:abc:de01::/64'", "subnet subnet-a's too"},
		"IPv6-only without a block":      {"cidr: 10.0.3.0/24, ipv6Cidr: '2600:1f14:abc:de03::/64', ipv6Native: true", "cidr: 10.0.3.0/24, ipv6Native: true", "ipv6Native needs ipv6Cidr"},
		"subnet block, VPC without":      {"cidrs: [10.0.0.0/16], ipv6Cidr: '2600:1f14:abc:de00::/56'}", "cidrs: [10.0.0.0/16]}", "the VPC has no ipv6Cidr"},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			topo := strings.Replace(dualStackTopology, tt.from, tt.to, 1)
			if topo == dualStackTopology {
				t.Fatalf("%q is not in the topology", tt.from)
			}
			_, err := sim.ParseTopology([]byte(topo))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error = %v, want one saying %q", err, tt.want)
			}
		})
	}
}

// testdata/dualstack.yaml is the dual-stack example README.md shows.
func TestTheDualStackExampleRuns(t *testing.T) {
	b, err := os.ReadFile("testdata/dualstack.yaml")
	if err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(readme), string(b)) {
		t.Fatal("README.md no longer shows testdata/dualstack.yaml verbatim; update one or the other")
	}
	e := newEnv(t, string(b), nil)
	for _, in := range e.cloud.Instances() {
		if got := ipv6sOf(e.describeENI(in.PrimaryENI)); len(got) != 1 {
			t.Errorf("%s's primary ENI has IPv6 %v, want one address", in.ID, got)
		}
	}
}
