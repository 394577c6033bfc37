package cloud

import (
	"context"
	"net/url"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/vpcnet/vpcnet/sim/simtest"
)

// describeSelfWith runs DescribeSelf against a fake IMDS serving md.
func describeSelfWith(t *testing.T, md map[string]string) (Self, error) {
	t.Helper()
	simtest.IsolateAWSEnv(t)
	c, err := New(context.Background(), Options{
		Region: "us-west-2", InstanceID: "i-node1",
		IMDSEndpoint: fakeIMDS(t, md),
		EC2Endpoint:  "http://127.0.0.1:1",
		Credentials:  credentials.NewStaticCredentialsProvider("AKIDTEST", "secret", ""),
	})
	if err != nil {
		t.Fatal(err)
	}
	return c.DescribeSelf(context.Background())
}

// Each of these answers used to be accepted and handed to the agent,
// which routes, tags and names links with them.
func TestDescribeSelfRefusesIMDSAnswersVpcnetCannotUse(t *testing.T) {
	base := "network/interfaces/macs/" + primaryMAC + "/"
	many := strings.Repeat(primaryMAC+"/\n", 1) + strings.Repeat("0a:00:00:00:ff:ff/\n", maxIMDSInterfaces)
	tests := []struct {
		name, path, value, want string
	}{
		{"MAC that walks the metadata tree", "mac", "../../user-data", `IMDS mac: MAC "../../user-data" is not six hex pairs`},
		{"listed MAC that walks the tree", "network/interfaces/macs/", primaryMAC + "/\n../x/", `MAC "../x" is not six hex pairs`},
		{"the same MAC twice", "network/interfaces/macs/", primaryMAC + "/\n" + primaryMAC + "/", "lists MAC " + primaryMAC + " twice"},
		{"more interfaces than an instance has", "network/interfaces/macs/", many, "more than the 128 vpcnet reads"},
		{"negative device number", base + "device-number", "-1", "device index -1 is outside 0-251"},
		{"device number past the route tables", base + "device-number", "252", "device index 252 is outside 0-251"},
		{"device number that overflows", base + "device-number", "99999999999999999999", "not a number"},
		{"IPv6 subnet", base + "subnet-ipv4-cidr-block", "fd00::/64", `"fd00::/64" is not an IPv4 CIDR`},
		{"subnet wider than AWS allows", base + "subnet-ipv4-cidr-block", "10.0.0.0/8", `"10.0.0.0/8" is not a /16 to /28`},
		{"zoned local address", base + "local-ipv4s", "fe80::1%eth0", `"fe80::1%eth0" is not an IPv4 address`},
		{"IPv4-mapped local address", base + "local-ipv4s", "::ffff:10.0.0.10", `"::ffff:10.0.0.10" is not an IPv4 address`},
		{"primary ENI without addresses", base + "local-ipv4s", "", "IMDS lists no local-ipv4s"},
		{"delegated prefix not a /28", base + "ipv4-prefix", "10.0.0.0/24", `"10.0.0.0/24" is not a /28`},
		{"no VPC CIDR", base + "vpc-ipv4-cidr-blocks", "", "vpc-ipv4-cidr-blocks: no CIDR"},
		{"instance id with a space", "instance-id", "i-1 ; rm", `IMDS instance-id: "i-1 ; rm" is not an AWS identifier`},
		{"security group with a newline escape", base + "security-group-ids", "sg-1\nsg\x00", `security-group-ids: "sg\x00" is not an AWS identifier`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			md := nodeMetadata()
			md[tt.path] = tt.value
			self, err := describeSelfWith(t, md)
			if err == nil {
				t.Fatalf("DescribeSelf accepted it: %+v", self)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error\n got %v\nwant it to contain %s", err, tt.want)
			}
		})
	}
}

// IMDS answers were read whole: a broken or hostile endpoint could make
// the agent read without end.
func TestDescribeSelfRefusesAnIMDSAnswerOverTheLimit(t *testing.T) {
	md := nodeMetadata()
	md["instance-type"] = strings.Repeat("m", maxIMDSAnswer+1)
	_, err := describeSelfWith(t, md)
	if err == nil || !strings.Contains(err.Error(), "IMDS instance-type: the answer is longer than 65536 bytes") {
		t.Errorf("err = %v, want the limit named", err)
	}
}

// What EC2 answers about an ENI reaches netlink (MAC, device index) and
// the pool (addresses, prefixes); these used to pass through.
func TestENIFromEC2RefusesWhatVpcnetCannotUse(t *testing.T) {
	good := func() types.NetworkInterface {
		return types.NetworkInterface{
			NetworkInterfaceId: aws.String("eni-1"),
			MacAddress:         aws.String("0A:00:00:00:00:01"),
			PrivateIpAddress:   aws.String("10.0.0.10"),
			Attachment:         &types.NetworkInterfaceAttachment{DeviceIndex: aws.Int32(1)},
			PrivateIpAddresses: []types.NetworkInterfacePrivateIpAddress{
				{PrivateIpAddress: aws.String("10.0.0.10"), Primary: aws.Bool(true)},
				{PrivateIpAddress: aws.String("10.0.0.11")},
			},
			Ipv4Prefixes: []types.Ipv4PrefixSpecification{{Ipv4Prefix: aws.String("10.0.0.32/28")}},
		}
	}
	if e, err := eniFromEC2(good()); err != nil || e.MAC != "0a:00:00:00:00:01" || len(e.SecondaryIPs) != 1 {
		t.Fatalf("eniFromEC2(good) = %+v, %v", e, err)
	}
	tests := []struct {
		name string
		edit func(*types.NetworkInterface)
		want string
	}{
		{"IPv6 primary", func(n *types.NetworkInterface) { n.PrivateIpAddress = aws.String("fd00::1") },
			`ENI "eni-1": EC2 gives a bad primary address: "fd00::1" is not an IPv4 address`},
		{"IPv4-mapped secondary", func(n *types.NetworkInterface) {
			n.PrivateIpAddresses[1].PrivateIpAddress = aws.String("::ffff:10.0.0.11")
		},
			`EC2 gives a bad address: "::ffff:10.0.0.11" is not an IPv4 address`},
		{"unspecified secondary", func(n *types.NetworkInterface) { n.PrivateIpAddresses[1].PrivateIpAddress = aws.String("0.0.0.0") },
			`"0.0.0.0" is the unspecified address`},
		{"prefix not a /28", func(n *types.NetworkInterface) { n.Ipv4Prefixes[0].Ipv4Prefix = aws.String("10.0.0.0/16") },
			`EC2 gives a bad prefix: "10.0.0.0/16" is not a /28`},
		{"IPv6 prefix", func(n *types.NetworkInterface) { n.Ipv4Prefixes[0].Ipv4Prefix = aws.String("fd00::/28") },
			`"fd00::/28" is not an IPv4 CIDR`},
		{"negative device index", func(n *types.NetworkInterface) { n.Attachment.DeviceIndex = aws.Int32(-1) },
			"EC2 gives a bad attachment: device index -1 is outside 0-251"},
		{"device index past the route tables", func(n *types.NetworkInterface) { n.Attachment.DeviceIndex = aws.Int32(1 << 30) },
			"device index 1073741824 is outside 0-251"},
		{"MAC not a MAC", func(n *types.NetworkInterface) { n.MacAddress = aws.String("0a:00:00:00:00") },
			`EC2 gives a bad MAC: MAC "0a:00:00:00:00" is not six hex pairs`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ni := good()
			tt.edit(&ni)
			e, err := eniFromEC2(ni)
			if err == nil {
				t.Fatalf("eniFromEC2 accepted it: %+v", e)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error\n got %v\nwant it to contain %s", err, tt.want)
			}
		})
	}
}

// A subnet's CIDR gives the agent the ENI's mask and gateway; an IPv6 or
// absurdly wide one used to be accepted.
func TestDescribeSubnetsRefusesACIDRAWSWouldNotGive(t *testing.T) {
	for _, cidr := range []string{"fd00::/64", "10.0.0.0/8", "10.0.0.0/30"} {
		f := &fakeEC2{reply: func(int, url.Values) (int, string) {
			return 200, ec2OK("DescribeSubnets", `<subnetSet><item><subnetId>subnet-a</subnetId><cidrBlock>`+cidr+`</cidrBlock></item></subnetSet>`)
		}}
		c, _ := newFakeClient(t, f, nil)
		if _, err := c.DescribeSubnets(context.Background(), "subnet-a"); err == nil || !strings.Contains(err.Error(), `subnet "subnet-a": EC2 gives a bad CIDR`) {
			t.Errorf("DescribeSubnets with CIDR %s: err = %v, want it refused", cidr, err)
		}
	}
}
