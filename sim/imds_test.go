package sim_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/ec2/imds"
	"github.com/aws/aws-sdk-go-v2/service/ec2"

	"github.com/vpcnet/vpcnet/sim"
)

// metadata reads one path under /latest/meta-data/ with the SDK's IMDS
// client, returning "" with the error on failure.
func metadata(t *testing.T, c *imds.Client, path string) (string, error) {
	t.Helper()
	out, err := c.GetMetadata(context.Background(), &imds.GetMetadataInput{Path: path})
	if err != nil {
		return "", err
	}
	defer out.Content.Close()
	b, err := io.ReadAll(out.Content)
	return string(b), err
}

func mustMetadata(t *testing.T, c *imds.Client, path string) string {
	t.Helper()
	s, err := metadata(t, c, path)
	if err != nil {
		t.Fatalf("IMDS %s: %v", path, err)
	}
	return s
}

func TestIMDSServesTheInstance(t *testing.T) {
	e := newEnv(t, baseTopology, nil)
	node := e.cloud.Instances()[0]
	c, _ := e.imds(node.ID)
	extra := e.createENI(&ec2.CreateNetworkInterfaceInput{SubnetId: aws.String("subnet-a"), Groups: []string{"sg-other", "sg-0sim"}, SecondaryPrivateIpAddressCount: aws.Int32(1)})
	e.attach(aws.ToString(extra.NetworkInterfaceId), node.ID, 1)
	if _, err := e.ec2.AssignPrivateIpAddresses(e.ctx, &ec2.AssignPrivateIpAddressesInput{NetworkInterfaceId: aws.String(node.PrimaryENI), Ipv4PrefixCount: aws.Int32(1)}); err != nil {
		t.Fatal(err)
	}
	prefix := e.describeENI(node.PrimaryENI).Ipv4Prefixes[0].Ipv4Prefix
	extraMAC := aws.ToString(extra.MacAddress)
	extraIPs := aws.ToString(extra.PrivateIpAddresses[0].PrivateIpAddress) + "\n" + aws.ToString(extra.PrivateIpAddresses[1].PrivateIpAddress)

	tests := map[string]string{
		"instance-id":                 "i-node1",
		"instance-type":               "m5.large",
		"placement/availability-zone": "us-west-2a",
		"placement/region":            "us-west-2",
		"local-ipv4":                  node.PrivateIP.String(),
		"mac":                         node.MAC,
		"network/interfaces/macs/":    node.MAC + "/\n" + extraMAC + "/",
		"network/interfaces/macs/" + node.MAC + "/device-number":          "0",
		"network/interfaces/macs/" + node.MAC + "/interface-id":           node.PrimaryENI,
		"network/interfaces/macs/" + node.MAC + "/ipv4-prefix":            aws.ToString(prefix),
		"network/interfaces/macs/" + extraMAC + "/device-number":          "1",
		"network/interfaces/macs/" + extraMAC + "/interface-id":           aws.ToString(extra.NetworkInterfaceId),
		"network/interfaces/macs/" + extraMAC + "/local-ipv4s":            extraIPs,
		"network/interfaces/macs/" + extraMAC + "/subnet-id":              "subnet-a",
		"network/interfaces/macs/" + extraMAC + "/subnet-ipv4-cidr-block": "10.0.0.0/24",
		"network/interfaces/macs/" + extraMAC + "/vpc-id":                 "vpc-0sim",
		"network/interfaces/macs/" + extraMAC + "/vpc-ipv4-cidr-blocks":   "10.0.0.0/16",
		"network/interfaces/macs/" + extraMAC + "/security-group-ids":     "sg-other\nsg-0sim",
	}
	if strings.Compare(node.MAC, extraMAC) > 0 {
		tests["network/interfaces/macs/"] = extraMAC + "/\n" + node.MAC + "/"
	}
	for path, want := range tests {
		if got := mustMetadata(t, c, path); got != want {
			t.Errorf("%s = %q, want %q", path, got, want)
		}
	}
	if _, err := metadata(t, c, "network/interfaces/macs/"+extraMAC+"/ipv4-prefix"); err == nil {
		t.Error("ipv4-prefix of an ENI without prefixes answered; IMDS answers 404")
	}
	region, err := c.GetRegion(e.ctx, &imds.GetRegionInput{})
	if err != nil || region.Region != "us-west-2" {
		t.Errorf("GetRegion = %+v, %v", region, err)
	}
	doc, err := c.GetInstanceIdentityDocument(e.ctx, &imds.GetInstanceIdentityDocumentInput{})
	if err != nil || doc.InstanceID != "i-node1" || doc.PrivateIP != node.PrivateIP.String() {
		t.Errorf("identity document = %+v, %v", doc, err)
	}
}

func TestIMDSv2TokenRules(t *testing.T) {
	e := newEnv(t, baseTopology, nil)
	_, url := e.imds("i-node1")
	_, otherURL := e.imds("i-node2")
	do := func(method, url string, header map[string]string) (int, string) {
		t.Helper()
		req, err := http.NewRequest(method, url, nil)
		if err != nil {
			t.Fatal(err)
		}
		for k, v := range header {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	const ttlHeader = "X-aws-ec2-metadata-token-ttl-seconds"
	if code, _ := do("GET", url+"/latest/meta-data/instance-id", nil); code != 401 {
		t.Errorf("GET without a token: %d, want 401", code)
	}
	if code, _ := do("PUT", url+"/latest/api/token", nil); code != 400 {
		t.Errorf("PUT without a TTL: %d, want 400", code)
	}
	for _, ttl := range []string{"0", "21601", "x"} {
		if code, _ := do("PUT", url+"/latest/api/token", map[string]string{ttlHeader: ttl}); code != 400 {
			t.Errorf("PUT with TTL %q: %d, want 400", ttl, code)
		}
	}
	if code, _ := do("PUT", url+"/latest/api/token", map[string]string{ttlHeader: "60", "X-Forwarded-For": "10.0.0.9"}); code != 403 {
		t.Errorf("PUT through a proxy: %d, want 403", code)
	}
	code, tok := do("PUT", url+"/latest/api/token", map[string]string{ttlHeader: "60"})
	if code != 200 || tok == "" {
		t.Fatalf("PUT token: %d %q", code, tok)
	}
	if code, _ := do("GET", url+"/latest/meta-data/instance-id", map[string]string{"X-aws-ec2-metadata-token": "forged"}); code != 401 {
		t.Errorf("GET with a forged token: %d, want 401", code)
	}
	if code, _ := do("GET", otherURL+"/latest/meta-data/instance-id", map[string]string{"X-aws-ec2-metadata-token": tok}); code != 401 {
		t.Errorf("another instance's token: %d, want 401", code)
	}
	code, body := do("GET", url+"/latest/meta-data/instance-id", map[string]string{"X-aws-ec2-metadata-token": tok})
	if code != 200 || body != "i-node1" {
		t.Errorf("GET with the token: %d %q", code, body)
	}
}

func TestIMDSLagsBehindEC2(t *testing.T) {
	e := newEnv(t, baseTopology, func(t *sim.Topology) { t.IMDSLag = sim.Duration(500 * time.Millisecond) })
	node := e.cloud.Instances()[0]
	c, _ := e.imds(node.ID)
	macs := func() int {
		return strings.Count(mustMetadata(t, c, "network/interfaces/macs/"), "\n") + 1
	}
	e.clock.Advance(time.Second) // past the lag of the launch
	extra := aws.ToString(e.createENI(&ec2.CreateNetworkInterfaceInput{SubnetId: aws.String("subnet-a")}).NetworkInterfaceId)
	e.attach(extra, node.ID, 1)
	if n := macs(); n != 1 {
		t.Errorf("right after attach IMDS lists %d MACs, want still 1", n)
	}
	e.clock.Advance(499 * time.Millisecond)
	if n := macs(); n != 1 {
		t.Errorf("1ms before the lag IMDS lists %d MACs, want 1", n)
	}
	e.clock.Advance(time.Millisecond)
	if n := macs(); n != 2 {
		t.Errorf("after the lag IMDS lists %d MACs, want 2", n)
	}

	ipsPath := "network/interfaces/macs/" + node.MAC + "/local-ipv4s"
	before := mustMetadata(t, c, ipsPath)
	if _, err := e.ec2.AssignPrivateIpAddresses(e.ctx, &ec2.AssignPrivateIpAddressesInput{NetworkInterfaceId: aws.String(node.PrimaryENI), SecondaryPrivateIpAddressCount: aws.Int32(2)}); err != nil {
		t.Fatal(err)
	}
	if got := mustMetadata(t, c, ipsPath); got != before {
		t.Errorf("local-ipv4s changed at once to %q", got)
	}
	e.clock.Advance(500 * time.Millisecond)
	if got := mustMetadata(t, c, ipsPath); strings.Count(got, "\n") != 2 {
		t.Errorf("after the lag local-ipv4s = %q, want 3 addresses", got)
	}
}

func TestIMDSShowsAnENIOnlyOnceAttached(t *testing.T) {
	e := newEnv(t, baseTopology, withDelays(time.Second, 0))
	node := e.cloud.Instances()[0]
	c, _ := e.imds(node.ID)
	extra := aws.ToString(e.createENI(&ec2.CreateNetworkInterfaceInput{SubnetId: aws.String("subnet-a")}).NetworkInterfaceId)
	e.attach(extra, node.ID, 1)
	if got := mustMetadata(t, c, "network/interfaces/macs/"); strings.Contains(got, "\n") {
		t.Errorf("an attaching ENI is listed: %q", got)
	}
	e.clock.Advance(time.Second)
	if got := mustMetadata(t, c, "network/interfaces/macs/"); !strings.Contains(got, "\n") {
		t.Errorf("the attached ENI is not listed: %q", got)
	}
}
