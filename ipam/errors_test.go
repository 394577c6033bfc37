package ipam_test

import (
	"net/netip"
	"testing"

	"github.com/vpcnet/vpcnet/ipam"
)

// The messages reach operators through kubelet events and logs; each must
// name the thing that is wrong.
func TestErrorMessages(t *testing.T) {
	pfx := netip.MustParsePrefix
	addr := netip.MustParseAddr
	tests := []struct {
		err  error
		want string
	}{
		{&ipam.NoFreeAddressError{Stats: ipam.Stats{Assigned: 14, Cooling: 2, NextFree: poolT0, ENIs: make([]ipam.ENIStats, 2)}},
			"no free address: 14 assigned, 2 cooling (first free at 2025-01-02T03:04:05Z), 0 free on 2 ENIs"},
		{&ipam.NoFreeAddressError{}, "no free address: the pool has no ENI yet"},
		{&ipam.InvalidKeyError{Key: ipam.Key{Network: "vpcnet", IfName: "eth0"}},
			`invalid key "vpcnet//eth0": network, container id and interface name must all be set`},
		{&ipam.InvalidENIError{ID: "eni-1", Reason: "empty id"}, `invalid eni "eni-1": empty id`},
		{&ipam.DuplicateENIError{ID: "eni-1", DeviceIndex: 1, Other: "eni-1"}, "eni eni-1 is already in the pool"},
		{&ipam.DuplicateENIError{ID: "eni-2", DeviceIndex: 1, Other: "eni-1"}, "eni eni-2: device index 1 is already taken by eni eni-1"},
		{&ipam.UnknownENIError{ID: "eni-9"}, `unknown eni "eni-9": add it with AddENI first`},
		{&ipam.PrimaryENIError{ID: "eni-0"}, "eni eni-0 is the instance's primary ENI and cannot be removed"},
		{&ipam.UnknownBlockError{Block: pfx("10.0.0.16/28")}, "unknown block 10.0.0.16/28"},
		{&ipam.InvalidBlockError{Block: pfx("10.0.0.16/27"), Reason: "bad size"}, "invalid block 10.0.0.16/27: bad size"},
		{&ipam.BlockOutsideSubnetError{Block: pfx("10.0.1.16/28"), ENIID: "eni-1", Subnet: pfx("10.0.0.0/24")},
			"block 10.0.1.16/28 is outside subnet 10.0.0.0/24 of eni eni-1"},
		{&ipam.OverlapError{Block: pfx("10.0.0.16/28"), Other: pfx("10.0.0.17/32"), OtherENI: "eni-2"},
			"block 10.0.0.16/28 overlaps block 10.0.0.17/32 on eni eni-2"},
		{&ipam.OverlapError{Block: pfx("10.0.0.16/28"), Other: pfx("10.0.0.16/28"), OtherENI: "eni-2"},
			"block 10.0.0.16/28 is already on eni eni-2"},
		{&ipam.PrimaryIPError{Block: pfx("10.0.0.0/28"), BlockENI: "eni-1", Addr: addr("10.0.0.5"), ENIID: "eni-0"},
			"block 10.0.0.0/28 on eni eni-1 holds 10.0.0.5, the primary address of eni eni-0"},
		{&ipam.AddrNotOnNodeError{Addr: addr("10.9.9.9")}, "address 10.9.9.9 is not on this node: no block holds it"},
		{&ipam.AddrNotOnNodeError{Addr: addr("10.0.0.5"), PrimaryOf: "eni-0"}, "address 10.0.0.5 is the primary address of eni eni-0, not a pod address"},
		{&ipam.AddrHeldError{Addr: addr("10.0.0.5"), Holder: poolKey("c1"), Pod: ipam.Pod{Namespace: "ns", Name: "web"}},
			"address 10.0.0.5 is held by vpcnet/c1/eth0 (pod ns/web)"},
		{&ipam.AddrCoolingError{Addr: addr("10.0.0.5"), Until: poolT0}, "address 10.0.0.5 was released and cools down until 2025-01-02T03:04:05Z"},
		{&ipam.KeyConflictError{Key: poolKey("c1"), Held: addr("10.0.0.5"), Want: addr("10.0.0.6")},
			"vpcnet/c1/eth0 already holds 10.0.0.5, not 10.0.0.6"},
		{&ipam.InUseError{ENIID: "eni-1", Assigned: 3, Cooling: 1, Until: poolT0},
			"eni eni-1 is in use: 3 assigned, 1 cooling until 2025-01-02T03:04:05Z; it can go only once every address is released and cooled down"},
		{&ipam.InUseError{ENIID: "eni-1", Block: pfx("10.0.0.16/28"), Assigned: 1},
			"block 10.0.0.16/28 on eni eni-1 is in use: 1 assigned, 0 cooling; it can go only once every address is released and cooled down"},
	}
	for _, tt := range tests {
		if got := tt.err.Error(); got != tt.want {
			t.Errorf("%T:\n got %q\nwant %q", tt.err, got, tt.want)
		}
	}
}
