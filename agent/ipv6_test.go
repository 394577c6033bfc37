package agent

import (
	"context"
	"net/netip"
	"strings"
	"testing"

	"github.com/vpcnet/vpcnet/ipam"
)

const dualStackTopology = `
region: us-west-2
vpc: {id: vpc-0sim, cidrs: [10.0.0.0/16], ipv6Cidr: '2600:1f14:abc:de00::/56'}
subnets:
- {id: subnet-a, az: us-west-2a, cidr: 10.0.0.0/24, ipv6Cidr: '2600:1f14:abc:de01::/64'}
- {id: subnet-v4, az: us-west-2a, cidr: 10.0.16.0/20}
securityGroups: [sg-0sim]
instances:
- {id: i-v6, type: m5.large, subnet: subnet-a}
- {id: i-v4only, type: m5.large, subnet: subnet-v4}
- {id: i-xen, type: m4.large, subnet: subnet-a}
attachDelay: 0s
imdsLag: 0s
seed: 1
`

var ipv6Env = map[string]string{"ENABLE_IPv6": "true", "ENABLE_IPv4": "false", "ENABLE_PREFIX_DELEGATION": "true"}

// A node that cannot run aws-node's IPv6 mode stops at start with one
// line naming what is missing and the fix, and has asked EC2 for nothing.
func TestIPv6ModeRefusesANodeThatCannotTakeAPrefixAndAssignsNothing(t *testing.T) {
	for _, tt := range []struct {
		instance string
		want     []string
	}{
		{"i-v4only", []string{"subnet subnet-v4 of the primary ENI has no IPv6 CIDR", "associate-subnet-cidr-block", "ENABLE_IPv6=false"}},
		{"i-xen", []string{"instance type m4.large is not a Nitro instance", "Nitro instance type", "ENABLE_IPv6=false"}},
	} {
		t.Run(tt.instance, func(t *testing.T) {
			w := newWorldOf(t, dualStackTopology)
			a, err := New(w.node(tt.instance, ipv6Env).options(t))
			if err != nil {
				t.Fatal(err)
			}
			err = a.Start(context.Background())
			if err == nil {
				t.Fatal("Start succeeded")
			}
			for _, s := range tt.want {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("Start = %v\nwant it to say %q", err, s)
				}
			}
			for _, action := range []string{"AssignIpv6Addresses", "AssignPrivateIpAddresses", "CreateNetworkInterface", "AttachNetworkInterface"} {
				if n := w.callCount(action); n != 0 {
					t.Errorf("%d %s calls, want none", n, action)
				}
			}
		})
	}
}

// aws-node's IPv6 mode through the whole agent: one /80 asked for once on
// the primary ENI, pods given addresses from it, no ENI attached, and a
// restart with no pod change makes no mutating EC2 call (I3).
func TestIPv6NodeGivesPodsAddressesFromOnePrimaryENIPrefixAskedForOnce(t *testing.T) {
	w := newWorldOf(t, dualStackTopology)
	n := w.node("i-v6", ipv6Env)
	a := n.start(t)
	a.waitReady(t)
	ctx := context.Background()
	var prefix netip.Prefix
	held := map[ipam.Key]ipam.Assignment{}
	for i := range 40 {
		as, err := a.Add(ctx, key(i), pod(i))
		if err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			prefix = as.Block
		}
		if !as.Addr.Is6() || as.Block != prefix || prefix.Bits() != 80 || !netip.MustParsePrefix("2600:1f14:abc:de01::/64").Contains(as.Addr) {
			t.Fatalf("pod %d got %s from %s, want an address of one /80 in the subnet's /64", i, as.Addr, as.Block)
		}
		held[key(i)] = as
	}
	if got := w.callCount("AssignIpv6Addresses"); got != 1 {
		t.Errorf("%d AssignIpv6Addresses calls, want 1", got)
	}
	for _, action := range []string{"AssignPrivateIpAddresses", "CreateNetworkInterface", "AttachNetworkInterface", "UnassignIpv6Addresses"} {
		if got := w.callCount(action); got != 0 {
			t.Errorf("%d %s calls, want none in IPv6 mode", got, action)
		}
	}
	if err := a.stop(); err != nil {
		t.Fatal(err)
	}
	before := map[string]int{}
	for _, action := range []string{"AssignIpv6Addresses", "AssignPrivateIpAddresses", "CreateNetworkInterface", "AttachNetworkInterface", "UnassignIpv6Addresses", "UnassignPrivateIpAddresses"} {
		before[action] = w.callCount(action)
	}
	b := n.start(t)
	b.waitReady(t)
	for k, as := range held {
		got, err := b.Add(ctx, k, ipam.Pod{})
		if err != nil || got.Addr != as.Addr {
			t.Errorf("after restart %s holds %v (%v), want %s", k, got.Addr, err, as.Addr)
		}
	}
	for action, n := range before {
		if got := w.callCount(action); got != n {
			t.Errorf("restart made %d %s calls, want none", got-n, action)
		}
	}
}
