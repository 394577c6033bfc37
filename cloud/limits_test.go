package cloud

import (
	"context"
	"errors"
	"net/url"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/vpcnet/vpcnet/limits"
)

func TestInstanceLimitsPrefersTheTable(t *testing.T) {
	f := &fakeEC2{reply: func(int, url.Values) (int, string) { return 500, ec2Error("InternalError", "must not be asked") }}
	c, _ := newFakeClient(t, f, nil)
	want, ok := limits.Lookup("m5.large")
	if !ok {
		t.Skip("the limits table does not know m5.large")
	}
	got, err := c.InstanceLimits(context.Background(), "m5.large")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("limits (-table +got):\n%s", diff)
	}
	if n := len(f.requests()); n != 0 {
		t.Errorf("EC2 was asked %d times about a type in the table", n)
	}
}

const multiCardType = `<instanceTypeSet><item><instanceType>zz9.fake</instanceType><hypervisor>nitro</hypervisor><bareMetal>false</bareMetal>
<networkInfo><maximumNetworkInterfaces>8</maximumNetworkInterfaces><ipv4AddressesPerInterface>6</ipv4AddressesPerInterface>
<defaultNetworkCardIndex>0</defaultNetworkCardIndex><networkCards>
<item><networkCardIndex>0</networkCardIndex><maximumNetworkInterfaces>3</maximumNetworkInterfaces></item>
<item><networkCardIndex>1</networkCardIndex><maximumNetworkInterfaces>5</maximumNetworkInterfaces></item>
</networkCards></networkInfo></item></instanceTypeSet>`

func TestInstanceLimitsFallsBackToEC2AndRemembers(t *testing.T) {
	f := &fakeEC2{reply: func(int, url.Values) (int, string) {
		return 200, ec2OK("DescribeInstanceTypes", multiCardType)
	}}
	c, _ := newFakeClient(t, f, nil)
	want := limits.Limits{
		InstanceType: "zz9.fake",
		// The default card's 3, not the instance's 8: an ENI attached
		// without a card index can only go to card 0.
		MaxENIs:     3,
		IPv4PerENI:  6,
		Hypervisor:  limits.Nitro,
		DefaultCard: 0,
		Cards:       []limits.Card{{Index: 0, MaxENIs: 3}, {Index: 1, MaxENIs: 5}},
	}
	for i := range 3 {
		got, err := c.InstanceLimits(context.Background(), "zz9.fake")
		if err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("call %d: limits (-want +got):\n%s", i, diff)
		}
		if !got.SupportsPrefixDelegation() {
			t.Error("a Nitro type learned from EC2 does not support prefixes")
		}
		got.Cards[0].MaxENIs = 99 // must not reach the cache
	}
	reqs := f.requests()
	if len(reqs) != 1 {
		t.Errorf("EC2 was asked %d times; the answer should be kept after the first", len(reqs))
	}
	if reqs[0].Get("InstanceType.1") != "zz9.fake" {
		t.Errorf("asked about %q", reqs[0].Get("InstanceType.1"))
	}
}

func TestUnknownInstanceTypeIsATypedError(t *testing.T) {
	tests := []struct {
		name        string
		status      int
		body        string
		wantUnknown bool
	}{
		{"EC2 rejects the name", 400, ec2Error("InvalidInstanceType", "The following supplied instance types do not exist: [zz9.nope]"), true},
		{"EC2 lists nothing", 200, ec2OK("DescribeInstanceTypes", `<instanceTypeSet/>`), true},
		{"EC2 throttles", 400, ec2Error("RequestLimitExceeded", "Request limit exceeded."), false},
		{"no permission", 400, ec2Error("UnauthorizedOperation", "You are not authorized to perform this operation."), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := &fakeEC2{reply: func(int, url.Values) (int, string) { return tt.status, tt.body }}
			c, _ := newFakeClient(t, f, func(o *Options) { o.MaxAttempts = 2 })
			_, err := c.InstanceLimits(context.Background(), "zz9.nope")
			if err == nil {
				t.Fatal("InstanceLimits succeeded without limits")
			}
			if got := errors.Is(err, ErrUnknownInstanceType); got != tt.wantUnknown {
				t.Errorf("errors.Is(%v, ErrUnknownInstanceType) = %t, want %t", err, got, tt.wantUnknown)
			}
		})
	}
}
