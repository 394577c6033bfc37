package cloud

import (
	"context"
	"fmt"
	"net/netip"
	"net/url"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func eniItem(id string, dev int) string {
	return fmt.Sprintf(`<item><networkInterfaceId>%s</networkInterfaceId><subnetId>subnet-a</subnetId><status>in-use</status>
<macAddress>0a:00:00:00:00:0%d</macAddress><privateIpAddress>10.0.0.%d</privateIpAddress>
<attachment><attachmentId>att-%s</attachmentId><instanceId>i-test</instanceId><deviceIndex>%d</deviceIndex><status>attached</status><deleteOnTermination>true</deleteOnTermination></attachment>
<privateIpAddressesSet><item><privateIpAddress>10.0.0.%d</privateIpAddress><primary>true</primary></item></privateIpAddressesSet>
<ipv4PrefixSet><item><ipv4Prefix>10.0.%d.0/28</ipv4Prefix></item></ipv4PrefixSet>
<tagSet><item><key>vpcnet.io/cluster-name</key><value>test-cluster</value></item></tagSet></item>`, id, dev, 10+dev, id, dev, 10+dev, 100+dev)
}

func TestListENIsFollowsEveryPage(t *testing.T) {
	f := &fakeEC2{reply: func(n int, form url.Values) (int, string) {
		switch form.Get("NextToken") {
		case "":
			return 200, ec2OK("DescribeNetworkInterfaces", `<networkInterfaceSet>`+eniItem("eni-b", 1)+`</networkInterfaceSet><nextToken>page2</nextToken>`)
		case "page2":
			return 200, ec2OK("DescribeNetworkInterfaces", `<networkInterfaceSet>`+eniItem("eni-a", 2)+`</networkInterfaceSet>`)
		}
		return 400, ec2Error("InvalidPaginationToken", form.Get("NextToken"))
	}}
	c, _ := newFakeClient(t, f, nil)
	enis, err := c.ListENIs(context.Background(), ENIFilter{
		InstanceID: "i-test",
		Status:     StatusInUse,
		Tags:       map[string]string{TagClusterName: "test-cluster", TagInstanceID: ""},
	})
	if err != nil {
		t.Fatal(err)
	}
	reqs := f.requests()
	if len(reqs) != 2 {
		t.Fatalf("EC2 saw %d requests, want one per page (2)", len(reqs))
	}
	wantFilters := map[string]string{
		"attachment.instance-id": "i-test",
		"status":                 "in-use",
		"tag:" + TagClusterName:  "test-cluster",
		"tag-key":                TagInstanceID,
	}
	if diff := cmp.Diff(wantFilters, requestFilters(reqs[0])); diff != "" {
		t.Errorf("filters (-want +got):\n%s", diff)
	}
	if reqs[0].Get("MaxResults") == "" {
		t.Error("no MaxResults: an unpaginated call draws on EC2's smaller bucket")
	}
	want := []ENI{{
		ID: "eni-a", Status: StatusInUse, SubnetID: "subnet-a", MAC: "0a:00:00:00:00:02",
		Attachment: &Attachment{ID: "att-eni-a", InstanceID: "i-test", DeviceIndex: 2, State: AttachmentAttached, DeleteOnTermination: true},
		PrimaryIP:  netip.MustParseAddr("10.0.0.12"),
		Prefixes:   []netip.Prefix{netip.MustParsePrefix("10.0.102.0/28")},
		Tags:       map[string]string{TagClusterName: "test-cluster"},
	}, {
		ID: "eni-b", Status: StatusInUse, SubnetID: "subnet-a", MAC: "0a:00:00:00:00:01",
		Attachment: &Attachment{ID: "att-eni-b", InstanceID: "i-test", DeviceIndex: 1, State: AttachmentAttached, DeleteOnTermination: true},
		PrimaryIP:  netip.MustParseAddr("10.0.0.11"),
		Prefixes:   []netip.Prefix{netip.MustParsePrefix("10.0.101.0/28")},
		Tags:       map[string]string{TagClusterName: "test-cluster"},
	}}
	cmpNetip := cmp.Options{cmp.Comparer(func(a, b netip.Addr) bool { return a == b }), cmp.Comparer(func(a, b netip.Prefix) bool { return a == b })}
	if diff := cmp.Diff(want, enis, cmpNetip); diff != "" {
		t.Errorf("ENIs (-want +got):\n%s", diff)
	}
}

func TestListENIsRefusesToListTheAccount(t *testing.T) {
	f := &fakeEC2{reply: func(int, url.Values) (int, string) { return 200, ec2OK("DescribeNetworkInterfaces", "") }}
	c, _ := newFakeClient(t, f, nil)
	if _, err := c.ListENIs(context.Background(), ENIFilter{}); err == nil {
		t.Error("an empty filter was accepted")
	}
	if n := len(f.requests()); n != 0 {
		t.Errorf("EC2 saw %d requests", n)
	}
}

func TestDescribeENIsFiltersByIDSoMissingOnesAreAbsent(t *testing.T) {
	f := &fakeEC2{reply: func(int, url.Values) (int, string) {
		return 200, ec2OK("DescribeNetworkInterfaces", `<networkInterfaceSet>`+eniItem("eni-a", 1)+`</networkInterfaceSet>`)
	}}
	c, _ := newFakeClient(t, f, nil)
	enis, err := c.DescribeENIs(context.Background(), "eni-a", "eni-gone")
	if err != nil {
		t.Fatal(err)
	}
	if len(enis) != 1 || enis[0].ID != "eni-a" {
		t.Errorf("ENIs = %+v, want eni-a only", enis)
	}
	form := f.requests()[0]
	if got := requestFilters(form)["network-interface-id"]; got != "eni-a,eni-gone" {
		t.Errorf("network-interface-id filter = %q", got)
	}
	if none, err := c.DescribeENIs(context.Background()); err != nil || none != nil {
		t.Errorf("DescribeENIs() = %v, %v; want nothing and no call", none, err)
	}
	if n := len(f.requests()); n != 1 {
		t.Errorf("EC2 saw %d requests, want 1", n)
	}
}

func TestDescribeSubnets(t *testing.T) {
	f := &fakeEC2{reply: func(int, url.Values) (int, string) {
		return 200, ec2OK("DescribeSubnets", `<subnetSet><item><subnetId>subnet-a</subnetId><vpcId>vpc-1</vpcId><cidrBlock>10.0.0.0/24</cidrBlock>
<availabilityZone>us-west-2a</availabilityZone><availableIpAddressCount>7</availableIpAddressCount>
<tagSet><item><key>kubernetes.io/role/cni</key><value>1</value></item></tagSet></item></subnetSet>`)
	}}
	c, _ := newFakeClient(t, f, nil)
	got, err := c.DescribeSubnets(context.Background(), "subnet-a")
	if err != nil {
		t.Fatal(err)
	}
	want := []Subnet{{ID: "subnet-a", VPCID: "vpc-1", AvailabilityZone: "us-west-2a", CIDR: netip.MustParsePrefix("10.0.0.0/24"),
		AvailableAddresses: 7, Tags: map[string]string{"kubernetes.io/role/cni": "1"}}}
	if diff := cmp.Diff(want, got, cmp.Comparer(func(a, b netip.Prefix) bool { return a == b })); diff != "" {
		t.Errorf("subnets (-want +got):\n%s", diff)
	}
	if id := f.requests()[0].Get("SubnetId.1"); id != "subnet-a" {
		t.Errorf("asked for subnet %q", id)
	}
}

// requestFilters maps Filter.N.Name to its values joined by commas.
func requestFilters(form url.Values) map[string]string {
	out := map[string]string{}
	for k, v := range form {
		if rest, ok := strings.CutPrefix(k, "Filter."); ok && strings.HasSuffix(rest, ".Name") {
			n := strings.TrimSuffix(rest, ".Name")
			out[v[0]] = strings.Join(numbered(form, "Filter."+n+".Value"), ",")
		}
	}
	return out
}
