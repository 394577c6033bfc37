package ipam

import (
	"net/netip"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestApplyActionsRefusesUnsafeActions(t *testing.T) {
	s := snap(0, eniAt(0, old, addrs(3, 1, 1)), eniAt(1, old, addrs(3, 0, 1)), eniAt(2, old, addrs(2, 0, 0)))
	assigned := s.ENIs[0].Blocks[0].Prefix
	cooling := s.ENIs[0].Blocks[1].Prefix
	tests := []struct {
		name   string
		action Action
		want   string
	}{
		{"release an assigned address", Action{Kind: ReleaseBlocks, ENIID: "eni-0", Blocks: []netip.Prefix{assigned}}, "1 assigned"},
		{"release a cooling address", Action{Kind: ReleaseBlocks, ENIID: "eni-0", Blocks: []netip.Prefix{cooling}}, "1 cooling"},
		{"release a block of another ENI", Action{Kind: ReleaseBlocks, ENIID: "eni-2", Blocks: []netip.Prefix{assigned}}, "eni-2 has no block"},
		{"detach the primary ENI", Action{Kind: DetachENI, ENIID: "eni-0"}, "primary ENI"},
		{"detach an ENI with a cooling address", Action{Kind: DetachENI, ENIID: "eni-1"}, "cooling"},
		{"act on an unknown ENI", Action{Kind: AssignBlocks, ENIID: "eni-9", Count: 1}, `no ENI "eni-9"`},
		{"assign past the ENI's limit", Action{Kind: AssignBlocks, ENIID: "eni-2", Count: 8}, "cannot assign 8"},
		{"attach past the instance limit", Action{Kind: AttachENI, Count: 1, SubnetID: "subnet-a"}, "limit is 3"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ApplyActions(s, []Action{tt.action}, m5large, t0)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want one saying %q", err, tt.want)
			}
		})
	}
}

func TestApplyActionsIsPure(t *testing.T) {
	s := snap(0, eniAt(0, old, addrs(4, 1, 0)), eniAt(2, old, addrs(3, 0, 0)))
	want := snap(0, eniAt(0, old, addrs(4, 1, 0)), eniAt(2, old, addrs(3, 0, 0)))
	_, err := ApplyActions(s, []Action{
		{Kind: ReleaseBlocks, ENIID: "eni-0", Blocks: []netip.Prefix{s.ENIs[0].Blocks[3].Prefix}},
		{Kind: AssignBlocks, ENIID: "eni-0", Count: 2},
		{Kind: DetachENI, ENIID: "eni-2"},
	}, m5large, t0)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(s, want) {
		t.Fatalf("ApplyActions changed its input")
	}
}

func TestApplyActionsAttachesAtTheLowestFreeDeviceIndex(t *testing.T) {
	s := snap(0, eniAt(0, old, addrs(9, 9, 0)), eniAt(2, old, addrs(9, 9, 0)))
	now := t0.Add(time.Minute)
	got, err := ApplyActions(s, []Action{{Kind: AttachENI, Count: 4, Prefixes: true, SubnetID: "subnet-a", SecurityGroups: []string{"sg-1"}}}, m5large, now)
	if err != nil {
		t.Fatal(err)
	}
	e := got.ENIs[1]
	if e.ID != "eni-1" || e.DeviceIndex != 1 || e.Primary || !e.CreatedAt.Equal(now) || e.SubnetID != "subnet-a" {
		t.Fatalf("new ENI = %+v, want eni-1 at device 1 created now in subnet-a", e.ENI)
	}
	seen := map[netip.Addr]bool{}
	for _, e := range got.ENIs {
		for _, b := range e.Blocks {
			for a := b.Prefix.Masked().Addr(); b.Prefix.Contains(a); a = a.Next() {
				if seen[a] {
					t.Fatalf("address %s handed out twice", a)
				}
				seen[a] = true
			}
		}
	}
	for _, b := range e.Blocks {
		if b.Prefix.Bits() != 28 || b.Prefix.Masked() != b.Prefix || b.Free != 16 {
			t.Fatalf("new block %+v, want an aligned, free /28", b)
		}
	}
	if len(e.Blocks) != 4 {
		t.Fatalf("new ENI has %d blocks, want 4", len(e.Blocks))
	}
}

func TestValidateNamesTheSetting(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want string
	}{
		{"negative warm ip", testConfig(warmIP(-1)).Validate(), "WARM_IP_TARGET=-1"},
		{"negative minimum", testConfig(minIP(-2)).Validate(), "MINIMUM_IP_TARGET=-2"},
		{"negative warm eni", testConfig(warmENI(-1)).Validate(), "WARM_ENI_TARGET=-1"},
		{"negative warm prefix", testConfig(warmPfx(-1)).Validate(), "WARM_PREFIX_TARGET=-1"},
		{"negative grace", testConfig(grace(-time.Second)).Validate(), "grace period"},
		{"no subnet", DefaultPlanConfig().Validate(), "SubnetID"},
		{"no ENIs", Limits{MaxENIs: 0, IPv4PerENI: 10}.Validate(), "ENI limit 0"},
		{"no secondary addresses", Limits{MaxENIs: 3, IPv4PerENI: 1}.Validate(), "IPv4 limit per ENI 1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.err == nil || !strings.Contains(tt.err.Error(), tt.want) {
				t.Fatalf("err = %v, want one naming %q", tt.err, tt.want)
			}
		})
	}
	if err := testConfig().Validate(); err != nil {
		t.Fatalf("defaults with a subnet: %v", err)
	}
}

func TestShortfallSaysWhatRanOut(t *testing.T) {
	tests := []struct {
		s    Shortfall
		want []string
	}{
		{Shortfall{}, []string{"no shortfall"}},
		{Shortfall{Missing: 9, Limit: InstanceENILimit, Max: 3}, []string{"9 addresses short", "3 ENIs the instance type allows"}},
		{Shortfall{Missing: 1, Limit: MaxENILimit, Max: 2}, []string{"1 address short", "MAX_ENI=2", "raise MAX_ENI"}},
		{Shortfall{Missing: 16, Limit: MaxPodsLimit, Max: 110}, []string{"16 addresses", "max pods (110)"}},
	}
	for _, tt := range tests {
		got := tt.s.String()
		for _, w := range tt.want {
			if !strings.Contains(got, w) {
				t.Errorf("%+v.String() = %q, want it to say %q", tt.s, got, w)
			}
		}
	}
}

func TestActionStringNamesTheChange(t *testing.T) {
	p := netip.MustParsePrefix("10.0.1.16/28")
	tests := []struct {
		a    Action
		want string
	}{
		{Action{Kind: AssignBlocks, ENIID: "eni-1", Count: 1, Reason: "why"}, "assign 1 address to eni-1: why"},
		{Action{Kind: AssignBlocks, ENIID: "eni-1", Count: 2, Prefixes: true}, "assign 2 /28 prefixes to eni-1"},
		{Action{Kind: AttachENI, Count: 9, SubnetID: "subnet-a", SecurityGroups: []string{"sg-1", "sg-2"}},
			"attach a new ENI in subnet-a with 9 addresses (security groups sg-1,sg-2)"},
		{Action{Kind: ReleaseBlocks, ENIID: "eni-2", Blocks: []netip.Prefix{p}}, "release 1 prefix from eni-2 [10.0.1.16/28]"},
		{Action{Kind: DetachENI, ENIID: "eni-2", Blocks: []netip.Prefix{p, p}}, "detach and delete eni-2 and its 2 prefixes"},
	}
	for _, tt := range tests {
		if got := tt.a.String(); got != tt.want {
			t.Errorf("String() = %q, want %q", got, tt.want)
		}
	}
}

func TestPlanPanicsOnInvalidInput(t *testing.T) {
	defer func() {
		if r := recover(); r == nil || !strings.Contains(r.(string), "SubnetID") {
			t.Fatalf("recovered %v, want a panic naming SubnetID", r)
		}
	}()
	Plan(Snapshot{}, DefaultPlanConfig(), m5large, t0)
}
