package cloud

import (
	"context"
	"net/http"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/google/go-cmp/cmp"

	"github.com/vpcnet/vpcnet/sim/simtest"
)

// fakeIMDS serves IMDSv2: a token from PUT /latest/api/token, required on
// every GET of /latest/meta-data/PATH, answered from a map (404 if absent).
func fakeIMDS(t *testing.T, data map[string]string) string {
	t.Helper()
	const token = "tok-123"
	return simtest.Serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPut && r.URL.Path == "/latest/api/token" {
			w.Header().Set("X-Aws-Ec2-Metadata-Token-Ttl-Seconds", r.Header.Get("X-Aws-Ec2-Metadata-Token-Ttl-Seconds"))
			w.Write([]byte(token))
			return
		}
		if r.Header.Get("X-aws-ec2-metadata-token") != token {
			http.Error(w, "no token", http.StatusUnauthorized)
			return
		}
		body, ok := data[strings.TrimPrefix(r.URL.Path, "/latest/meta-data/")]
		if !ok {
			http.NotFound(w, r)
			return
		}
		w.Write([]byte(body))
	}))
}

const (
	primaryMAC = "0a:00:00:00:00:01"
	secondMAC  = "0a:00:00:00:00:02"
	laggingMAC = "0a:00:00:00:00:03"
)

func nodeMetadata() map[string]string {
	m := map[string]string{
		"instance-id":                 "i-node1",
		"instance-type":               "m5.large",
		"placement/availability-zone": "us-west-2a",
		"mac":                         primaryMAC,
		"network/interfaces/macs/":    primaryMAC + "/\n" + laggingMAC + "/\n" + secondMAC + "/",
	}
	for mac, v := range map[string][]string{
		// device, id, local-ipv4s
		primaryMAC: {"0", "eni-primary", "10.0.0.10\n10.0.0.11"},
		secondMAC:  {"1", "eni-second", "10.0.0.20"},
	} {
		base := "network/interfaces/macs/" + mac + "/"
		m[base+"device-number"] = v[0]
		m[base+"interface-id"] = v[1]
		m[base+"local-ipv4s"] = v[2]
		m[base+"subnet-id"] = "subnet-a"
		m[base+"subnet-ipv4-cidr-block"] = "10.0.0.0/24"
		m[base+"security-group-ids"] = "sg-1\nsg-2"
		m[base+"vpc-ipv4-cidr-blocks"] = "10.0.0.0/16\n100.64.0.0/16"
	}
	m["network/interfaces/macs/"+secondMAC+"/ipv4-prefix"] = "10.0.0.32/28\n10.0.0.48/28"
	// IMDS lists a MAC whose details have not arrived yet.
	m["network/interfaces/macs/"+laggingMAC+"/device-number"] = "2"
	return m
}

func TestDescribeSelfReadsIMDSAndSkipsHalfKnownENIs(t *testing.T) {
	simtest.IsolateAWSEnv(t)
	c, err := New(context.Background(), Options{
		IMDSEndpoint: fakeIMDS(t, nodeMetadata()),
		EC2Endpoint:  "http://127.0.0.1:1",
		Credentials:  credentials.NewStaticCredentialsProvider("AKIDTEST", "secret", ""),
	})
	if err != nil {
		t.Fatal(err)
	}
	if c.Region() != "us-west-2" || c.InstanceID() != "i-node1" {
		t.Errorf("New learned region %q and instance %q from IMDS", c.Region(), c.InstanceID())
	}
	self, err := c.DescribeSelf(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	primary := Interface{
		MAC: primaryMAC, DeviceNumber: 0, ID: "eni-primary", SubnetID: "subnet-a",
		SubnetCIDR:     netip.MustParsePrefix("10.0.0.0/24"),
		SecurityGroups: []string{"sg-1", "sg-2"},
		IPv4s:          []netip.Addr{netip.MustParseAddr("10.0.0.10"), netip.MustParseAddr("10.0.0.11")},
	}
	second := Interface{
		MAC: secondMAC, DeviceNumber: 1, ID: "eni-second", SubnetID: "subnet-a",
		SubnetCIDR:     netip.MustParsePrefix("10.0.0.0/24"),
		SecurityGroups: []string{"sg-1", "sg-2"},
		IPv4s:          []netip.Addr{netip.MustParseAddr("10.0.0.20")},
		Prefixes:       []netip.Prefix{netip.MustParsePrefix("10.0.0.32/28"), netip.MustParsePrefix("10.0.0.48/28")},
	}
	want := Self{
		InstanceID: "i-node1", InstanceType: "m5.large", AvailabilityZone: "us-west-2a", Region: "us-west-2",
		Primary:    primary,
		VPCCIDRs:   []netip.Prefix{netip.MustParsePrefix("10.0.0.0/16"), netip.MustParsePrefix("100.64.0.0/16")},
		Interfaces: []Interface{primary, second},
	}
	opts := cmp.Options{cmp.Comparer(func(a, b netip.Addr) bool { return a == b }), cmp.Comparer(func(a, b netip.Prefix) bool { return a == b })}
	if diff := cmp.Diff(want, self, opts); diff != "" {
		t.Errorf("self (-want +got):\n%s", diff)
	}
	if self.Primary.PrimaryIP() != netip.MustParseAddr("10.0.0.10") {
		t.Errorf("primary IP %v", self.Primary.PrimaryIP())
	}
}

func TestDescribeSelfFailsWhenThePrimaryENIIsIncomplete(t *testing.T) {
	simtest.IsolateAWSEnv(t)
	md := nodeMetadata()
	delete(md, "network/interfaces/macs/"+primaryMAC+"/local-ipv4s")
	c, err := New(context.Background(), Options{
		Region:       "us-west-2",
		IMDSEndpoint: fakeIMDS(t, md),
		EC2Endpoint:  "http://127.0.0.1:1",
		Credentials:  credentials.NewStaticCredentialsProvider("AKIDTEST", "secret", ""),
	})
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.DescribeSelf(context.Background())
	if err == nil || !strings.Contains(err.Error(), "primary ENI") || !strings.Contains(err.Error(), "local-ipv4s") {
		t.Errorf("err = %v, want one naming the primary ENI and the missing path", err)
	}
}

// The region errors name what an operator can set (AWS_REGION), never a
// Go field; they used to say "set Options.Region".
func TestNewWithoutIMDSNeedsARegion(t *testing.T) {
	simtest.IsolateAWSEnv(t)
	_, err := New(context.Background(), Options{NoIMDS: true, EC2Endpoint: "http://127.0.0.1:1"})
	if err == nil || !strings.Contains(err.Error(), "AWS_REGION") || strings.Contains(err.Error(), "Options.") {
		t.Errorf("err = %v, want one naming AWS_REGION and no Go field", err)
	}
}

// When IMDS refuses the IMDSv2 token (a proxy or firewall blocking the
// PUT, as a hop limit of 1 does from a container), New names the
// endpoint, the setting that skips the lookup, and the likely causes.
func TestNewWithoutTheIMDSTokenNamesTheSettingAndCauses(t *testing.T) {
	simtest.IsolateAWSEnv(t)
	endpoint := simtest.Serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "blocked", http.StatusForbidden)
	}))
	_, err := New(context.Background(), Options{IMDSEndpoint: endpoint, EC2Endpoint: "http://127.0.0.1:1", CallTimeout: 5 * time.Second})
	if err == nil {
		t.Fatal("New succeeded with IMDS refusing every request")
	}
	for _, want := range []string{endpoint, "AWS_REGION", "hop limit", "token PUT", "VPCNET_IMDS_ENDPOINT"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("err = %v\nwant it to mention %q", err, want)
		}
	}
	if strings.Contains(err.Error(), "Options.") {
		t.Errorf("err = %v names a Go field no operator can set", err)
	}
}
