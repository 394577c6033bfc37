package ipam_test

import (
	"net/netip"
	"reflect"
	"testing"

	"github.com/vpcnet/vpcnet/ipam"
)

func TestPlanIPv6AsksOnceForOnePrefixOnThePrimaryENIAndNeverShrinks(t *testing.T) {
	primary := ipam.ENI{ID: "eni-a", Primary: true, SubnetID: "subnet-a"}
	v4 := ipam.BlockState{Prefix: netip.MustParsePrefix("10.0.0.16/28"), Free: 16}
	v6Free := ipam.BlockState{Prefix: netip.MustParsePrefix("2600:1f14:abc:de01:12::/80"), Free: 1 << 48}
	secondary := ipam.ENIState{ENI: ipam.ENI{ID: "eni-b", DeviceIndex: 1, SubnetID: "subnet-a"}, Blocks: []ipam.BlockState{v4}}
	tests := []struct {
		name string
		snap ipam.Snapshot
		want []ipam.Action
	}{
		{"no prefix yet, pods waiting", ipam.Snapshot{ENIs: []ipam.ENIState{{ENI: primary}}, Waiting: 300},
			[]ipam.Action{{Kind: ipam.AssignBlocks, ENIID: "eni-a", SubnetID: "subnet-a", Count: 1, Prefixes: true, IPv6: true,
				Reason: "IPv6 mode (ENABLE_IPv6=true): pods take their addresses from one /80 prefix on the primary ENI, which has none"}}},
		{"only IPv4 blocks on the primary", ipam.Snapshot{ENIs: []ipam.ENIState{{ENI: primary, Blocks: []ipam.BlockState{v4}}}},
			[]ipam.Action{{Kind: ipam.AssignBlocks, ENIID: "eni-a", SubnetID: "subnet-a", Count: 1, Prefixes: true, IPv6: true,
				Reason: "IPv6 mode (ENABLE_IPv6=true): pods take their addresses from one /80 prefix on the primary ENI, which has none"}}},
		{"a prefix there (after a restart)", ipam.Snapshot{ENIs: []ipam.ENIState{{ENI: primary, Blocks: []ipam.BlockState{v6Free}}}, Waiting: 5}, nil},
		{"an unused prefix and a free secondary ENI are kept", ipam.Snapshot{ENIs: []ipam.ENIState{{ENI: primary, Blocks: []ipam.BlockState{v6Free, v4}}, secondary}}, nil},
		{"no primary ENI known", ipam.Snapshot{ENIs: []ipam.ENIState{secondary}}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := ipam.PlanIPv6(tt.snap); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("PlanIPv6 = %+v\nwant %+v", got, tt.want)
			}
		})
	}
}
