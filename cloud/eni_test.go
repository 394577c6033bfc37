package cloud

import (
	"context"
	"net/netip"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

const createdENI = `<networkInterface><networkInterfaceId>eni-new</networkInterfaceId><subnetId>subnet-a</subnetId>
<vpcId>vpc-1</vpcId><availabilityZone>us-west-2a</availabilityZone><status>available</status><macAddress>0A:00:00:00:00:01</macAddress>
<privateIpAddress>10.0.0.10</privateIpAddress><groupSet><item><groupId>sg-1</groupId></item></groupSet>
<privateIpAddressesSet><item><privateIpAddress>10.0.0.10</privateIpAddress><primary>true</primary></item>
<item><privateIpAddress>10.0.0.11</privateIpAddress><primary>false</primary></item></privateIpAddressesSet>
<tagSet><item><key>vpcnet.io/instance-id</key><value>i-test</value></item></tagSet></networkInterface>`

func createFake() *fakeEC2 {
	return &fakeEC2{reply: func(int, url.Values) (int, string) {
		return 200, ec2OK("CreateNetworkInterface", createdENI)
	}}
}

func TestCreateENICarriesAddressesAndOwnerTagsInOneCall(t *testing.T) {
	f := createFake()
	c, _ := newFakeClient(t, f, nil)
	eni, err := c.CreateENI(context.Background(), CreateENIInput{
		SubnetID:           "subnet-a",
		SecurityGroups:     []string{"sg-1", "sg-2"},
		Description:        "vpcnet secondary ENI",
		SecondaryAddresses: 9,
		Tags:               map[string]string{"team": "net", TagInstanceID: "i-someone-else"},
	})
	if err != nil {
		t.Fatal(err)
	}
	reqs := f.requests()
	if len(reqs) != 1 {
		t.Fatalf("EC2 saw %d requests, want one", len(reqs))
	}
	form := reqs[0]
	for k, want := range map[string]string{
		"Action":                          "CreateNetworkInterface",
		"SubnetId":                        "subnet-a",
		"SecondaryPrivateIpAddressCount":  "9",
		"Description":                     "vpcnet secondary ENI",
		"TagSpecification.1.ResourceType": "network-interface",
		"Ipv4PrefixCount":                 "",
		"SecurityGroupId.1":               "sg-1",
		"SecurityGroupId.2":               "sg-2",
		"TagSpecification.2.ResourceType": "",
	} {
		if got := form.Get(k); got != want {
			t.Errorf("%s = %q, want %q", k, got, want)
		}
	}
	if tok := form.Get("ClientToken"); tok == "" || len(tok) > 64 {
		t.Errorf("ClientToken %q: want 1 to 64 characters", tok)
	}
	wantTags := map[string]string{
		"team":            "net",
		TagInstanceID:     "i-test",
		TagAWSInstanceID:  "i-test",
		TagClusterName:    "test-cluster",
		TagAWSClusterName: "test-cluster",
		TagCreatedAt:      "2026-08-01T12:00:00Z",
	}
	if diff := cmp.Diff(wantTags, requestTags(form)); diff != "" {
		t.Errorf("tags in the create request (-want +got):\n%s", diff)
	}
	want := ENI{
		ID: "eni-new", Status: StatusAvailable, SubnetID: "subnet-a", VPCID: "vpc-1", AvailabilityZone: "us-west-2a",
		MAC: "0a:00:00:00:00:01", PrimaryIP: netip.MustParseAddr("10.0.0.10"),
		SecondaryIPs:   []netip.Addr{netip.MustParseAddr("10.0.0.11")},
		SecurityGroups: []string{"sg-1"},
		Tags:           map[string]string{TagInstanceID: "i-test"},
	}
	if diff := cmp.Diff(want, eni, cmp.Comparer(func(a, b netip.Addr) bool { return a == b })); diff != "" {
		t.Errorf("created ENI (-want +got):\n%s", diff)
	}
}

func TestCreateENIWithPrefixes(t *testing.T) {
	f := createFake()
	c, _ := newFakeClient(t, f, nil)
	if _, err := c.CreateENI(context.Background(), CreateENIInput{SubnetID: "subnet-a", Prefixes: 2}); err != nil {
		t.Fatal(err)
	}
	form := f.requests()[0]
	if form.Get("Ipv4PrefixCount") != "2" || form.Get("SecondaryPrivateIpAddressCount") != "" {
		t.Errorf("prefix create sent Ipv4PrefixCount=%q SecondaryPrivateIpAddressCount=%q", form.Get("Ipv4PrefixCount"), form.Get("SecondaryPrivateIpAddressCount"))
	}
}

func TestClientTokenIdentifiesOneLogicalCreate(t *testing.T) {
	f := createFake()
	now := time.Date(2026, 8, 1, 12, 0, 0, 0, time.UTC)
	c, _ := newFakeClient(t, f, func(o *Options) {
		o.Now = func() time.Time { now = now.Add(time.Millisecond); return now }
	})
	ctx := context.Background()
	base := CreateENIInput{SubnetID: "subnet-a", SecondaryAddresses: 4, CreatedAt: time.Date(2026, 8, 1, 0, 0, 0, 0, time.UTC)}
	otherTime := base
	otherTime.CreatedAt = base.CreatedAt.Add(time.Nanosecond)
	otherSubnet := base
	otherSubnet.SubnetID = "subnet-b"
	explicit := base
	explicit.ClientToken = "caller-chose-this"
	unset := base
	unset.CreatedAt = time.Time{}

	for _, in := range []CreateENIInput{base, base, otherTime, otherSubnet, explicit, unset, unset} {
		if _, err := c.CreateENI(ctx, in); err != nil {
			t.Fatal(err)
		}
	}
	var tokens []string
	for _, r := range f.requests() {
		tokens = append(tokens, r.Get("ClientToken"))
	}
	if tokens[0] != tokens[1] {
		t.Error("the same input sent twice (a retry) got two tokens; EC2 would create two ENIs")
	}
	if tokens[2] == tokens[0] || tokens[3] == tokens[0] {
		t.Error("creates differing in time or subnet share a token; EC2 would return the first ENI for both")
	}
	if tokens[4] != "caller-chose-this" {
		t.Errorf("explicit token sent as %q", tokens[4])
	}
	if tokens[5] == tokens[6] {
		t.Error("two creates with no CreatedAt, made at different times, share a token")
	}
}

func TestCreateENIRetryResendsTheSameToken(t *testing.T) {
	f := &fakeEC2{reply: func(n int, _ url.Values) (int, string) {
		if n == 0 {
			return 503, ec2Error("Unavailable", "try again")
		}
		return 200, ec2OK("CreateNetworkInterface", createdENI)
	}}
	c, _ := newFakeClient(t, f, nil)
	if _, err := c.CreateENI(context.Background(), CreateENIInput{SubnetID: "subnet-a"}); err != nil {
		t.Fatal(err)
	}
	reqs := f.requests()
	if len(reqs) != 2 {
		t.Fatalf("EC2 saw %d requests, want 2", len(reqs))
	}
	if reqs[0].Get("ClientToken") != reqs[1].Get("ClientToken") {
		t.Error("the retry sent a different ClientToken")
	}
	if diff := cmp.Diff(requestTags(reqs[0]), requestTags(reqs[1])); diff != "" {
		t.Errorf("the retry sent different tags, which EC2 would call a parameter mismatch:\n%s", diff)
	}
}

func TestCreateENIRefusesBadInputBeforeCallingEC2(t *testing.T) {
	tests := []struct {
		name  string
		owner string
		in    CreateENIInput
		want  string
	}{
		{"no subnet", "i-test", CreateENIInput{SecondaryAddresses: 1}, "no subnet"},
		{"both kinds", "i-test", CreateENIInput{SubnetID: "subnet-a", SecondaryAddresses: 1, Prefixes: 1}, "one kind"},
		{"negative", "i-test", CreateENIInput{SubnetID: "subnet-a", Prefixes: -1}, "negative"},
		{"long token", "i-test", CreateENIInput{SubnetID: "subnet-a", ClientToken: strings.Repeat("x", 65)}, "at most 64"},
		{"no owner", "", CreateENIInput{SubnetID: "subnet-a"}, "Options.InstanceID"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := createFake()
			c, _ := newFakeClient(t, f, func(o *Options) { o.InstanceID = tt.owner })
			_, err := c.CreateENI(context.Background(), tt.in)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err = %v, want one mentioning %q", err, tt.want)
			}
			if n := len(f.requests()); n != 0 {
				t.Errorf("EC2 saw %d requests for a bad input", n)
			}
		})
	}
}

func TestAttachThenKeepDeleteOnTermination(t *testing.T) {
	f := &fakeEC2{reply: func(_ int, form url.Values) (int, string) {
		switch form.Get("Action") {
		case "AttachNetworkInterface":
			return 200, ec2OK("AttachNetworkInterface", `<attachmentId>eni-attach-7</attachmentId><networkCardIndex>0</networkCardIndex>`)
		case "ModifyNetworkInterfaceAttribute":
			return 200, ec2OK("ModifyNetworkInterfaceAttribute", `<return>true</return>`)
		}
		return 400, ec2Error("InvalidAction", form.Get("Action"))
	}}
	c, _ := newFakeClient(t, f, nil)
	ctx := context.Background()
	att, err := c.AttachENI(ctx, "eni-new", "i-test", 2)
	if err != nil {
		t.Fatal(err)
	}
	if att != "eni-attach-7" {
		t.Errorf("attachment id = %q", att)
	}
	if err := c.SetDeleteOnTermination(ctx, "eni-new", att, true); err != nil {
		t.Fatal(err)
	}
	reqs := f.requests()
	if got := reqs[0]; got.Get("NetworkInterfaceId") != "eni-new" || got.Get("InstanceId") != "i-test" || got.Get("DeviceIndex") != "2" {
		t.Errorf("attach request %v", got)
	}
	if got := reqs[1]; got.Get("Attachment.AttachmentId") != "eni-attach-7" || got.Get("Attachment.DeleteOnTermination") != "true" {
		t.Errorf("modify request %v", got)
	}
}

func TestAssignAndUnassignMany(t *testing.T) {
	f := &fakeEC2{reply: func(_ int, form url.Values) (int, string) {
		switch {
		case form.Get("Action") == "UnassignPrivateIpAddresses":
			return 200, ec2OK("UnassignPrivateIpAddresses", `<return>true</return>`)
		case form.Get("Ipv4PrefixCount") != "":
			return 200, ec2OK("AssignPrivateIpAddresses", `<networkInterfaceId>eni-1</networkInterfaceId><assignedIpv4PrefixSet>
<item><ipv4Prefix>10.0.0.16/28</ipv4Prefix></item><item><ipv4Prefix>10.0.0.32/28</ipv4Prefix></item></assignedIpv4PrefixSet>`)
		}
		return 200, ec2OK("AssignPrivateIpAddresses", `<networkInterfaceId>eni-1</networkInterfaceId><assignedPrivateIpAddressesSet>
<item><privateIpAddress>10.0.0.5</privateIpAddress></item><item><privateIpAddress>10.0.0.6</privateIpAddress></item><item><privateIpAddress>10.0.0.7</privateIpAddress></item></assignedPrivateIpAddressesSet>`)
	}}
	c, _ := newFakeClient(t, f, nil)
	ctx := context.Background()
	addrs, err := c.AssignAddresses(ctx, "eni-1", 3)
	if err != nil {
		t.Fatal(err)
	}
	prefixes, err := c.AssignPrefixes(ctx, "eni-1", 2)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.UnassignAddresses(ctx, "eni-1", addrs[:2]); err != nil {
		t.Fatal(err)
	}
	if err := c.UnassignPrefixes(ctx, "eni-1", prefixes[1:]); err != nil {
		t.Fatal(err)
	}
	if err := c.UnassignAddresses(ctx, "eni-1", nil); err != nil {
		t.Fatal(err)
	}
	reqs := f.requests()
	if len(reqs) != 4 {
		t.Fatalf("EC2 saw %d requests, want 4 (one per batch, none for an empty unassign)", len(reqs))
	}
	if reqs[0].Get("SecondaryPrivateIpAddressCount") != "3" || reqs[1].Get("Ipv4PrefixCount") != "2" {
		t.Errorf("assign requests %v, %v", reqs[0], reqs[1])
	}
	if got := numbered(reqs[2], "PrivateIpAddress"); !slices.Equal(got, []string{"10.0.0.5", "10.0.0.6"}) {
		t.Errorf("unassigned addresses %v", got)
	}
	if got := numbered(reqs[3], "Ipv4Prefix"); !slices.Equal(got, []string{"10.0.0.32/28"}) {
		t.Errorf("unassigned prefixes %v", got)
	}
	if len(addrs) != 3 || addrs[2] != netip.MustParseAddr("10.0.0.7") {
		t.Errorf("assigned addresses %v", addrs)
	}
	if len(prefixes) != 2 || prefixes[0] != netip.MustParsePrefix("10.0.0.16/28") {
		t.Errorf("assigned prefixes %v", prefixes)
	}
}

func TestFreeDeviceIndex(t *testing.T) {
	tests := []struct {
		name   string
		used   []int
		max    int
		want   int
		wantOK bool
	}{
		{"primary only", []int{0}, 3, 1, true},
		{"gap", []int{0, 2, 1, 4}, 5, 3, true},
		{"full", []int{0, 1, 2}, 3, -1, false},
		{"nothing used", nil, 2, 0, true},
		{"used beyond max ignored", []int{0, 7}, 2, 1, true},
		{"no slots", nil, 0, -1, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := FreeDeviceIndex(tt.used, tt.max)
			if got != tt.want || ok != tt.wantOK {
				t.Errorf("FreeDeviceIndex(%v, %d) = %d, %t; want %d, %t", tt.used, tt.max, got, ok, tt.want, tt.wantOK)
			}
		})
	}
}
