package ipam_test

import (
	"errors"
	"net/netip"
	"testing"
	"time"

	"github.com/vpcnet/vpcnet/ipam"
)

// poolT0 is an arbitrary instant the pool tests start from.
var poolT0 = time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)

const poolCooldown = 30 * time.Second

// poolNode returns a pool with the node most tests use:
//
//	eni-a  device 0, primary, subnet 10.0.0.0/24, primary address 10.0.0.10
//	eni-b  device 1,          subnet 10.0.1.0/24, primary address 10.0.1.10
//	eni-c  device 2,          subnet 10.0.0.0/24, primary address 10.0.0.11
//
// and no blocks.
func poolNode(t testing.TB) *ipam.Pool {
	t.Helper()
	p := ipam.NewPool(poolCooldown)
	for _, e := range []ipam.ENI{
		poolENI("eni-a", 0, "10.0.0.0/24", "10.0.0.10"),
		poolENI("eni-b", 1, "10.0.1.0/24", "10.0.1.10"),
		poolENI("eni-c", 2, "10.0.0.0/24", "10.0.0.11"),
	} {
		if err := p.AddENI(e); err != nil {
			t.Fatal(err)
		}
	}
	return p
}

func poolENI(id string, dev int, subnet, primary string) ipam.ENI {
	return ipam.ENI{
		ID:             id,
		DeviceIndex:    dev,
		Primary:        dev == 0,
		SubnetID:       "subnet-" + subnet,
		SubnetCIDR:     netip.MustParsePrefix(subnet),
		SecurityGroups: []string{"sg-1"},
		PrimaryIP:      netip.MustParseAddr(primary),
		CreatedAt:      poolT0,
	}
}

func poolAddBlocks(t testing.TB, p *ipam.Pool, eniID string, prefixes ...string) {
	t.Helper()
	for _, s := range prefixes {
		if err := p.AddBlock(eniID, netip.MustParsePrefix(s)); err != nil {
			t.Fatal(err)
		}
	}
}

func poolKey(container string) ipam.Key {
	return ipam.Key{Network: "vpcnet", ContainerID: container, IfName: "eth0"}
}

func poolAssign(t testing.TB, p *ipam.Pool, container string, now time.Time) ipam.Assignment {
	t.Helper()
	a, err := p.Assign(poolKey(container), ipam.Pod{Namespace: "default", Name: container}, now)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// poolWantErr fails unless err matches target's type (a pointer to an
// error pointer, as errors.As takes), or is nil when target is nil.
func poolWantErr(t *testing.T, err error, target any) {
	t.Helper()
	switch {
	case target == nil && err != nil:
		t.Fatalf("unexpected error: %v", err)
	case target == nil:
	case err == nil:
		t.Fatalf("succeeded, want %T", target)
	case !errors.As(err, target):
		t.Fatalf("error %q (%T), want %T", err, errors.Unwrap(err), target)
	}
}

func TestAddENI(t *testing.T) {
	tests := []struct {
		name    string
		eni     ipam.ENI
		wantErr any
	}{
		{"new eni", poolENI("eni-d", 3, "10.0.2.0/24", "10.0.2.5"), nil},
		{"empty id", poolENI("", 3, "10.0.2.0/24", "10.0.2.5"), new(*ipam.InvalidENIError)},
		{"negative device index", poolENI("eni-d", -1, "10.0.2.0/24", "10.0.2.5"), new(*ipam.InvalidENIError)},
		{"ipv6 subnet", poolENI("eni-d", 3, "fd00::/64", "fd00::5"), new(*ipam.InvalidENIError)},
		{"subnet with host bits", poolENI("eni-d", 3, "10.0.2.7/24", "10.0.2.5"), new(*ipam.InvalidENIError)},
		{"primary address outside subnet", poolENI("eni-d", 3, "10.0.2.0/24", "10.0.3.5"), new(*ipam.InvalidENIError)},
		{"primary address of another eni", poolENI("eni-d", 3, "10.0.1.0/24", "10.0.1.10"), new(*ipam.InvalidENIError)},
		{"repeated id", poolENI("eni-b", 3, "10.0.2.0/24", "10.0.2.5"), new(*ipam.DuplicateENIError)},
		{"device index taken", poolENI("eni-d", 1, "10.0.2.0/24", "10.0.2.5"), new(*ipam.DuplicateENIError)},
		{"primary address inside a block", poolENI("eni-d", 3, "10.0.1.0/24", "10.0.1.20"), new(*ipam.PrimaryIPError)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := poolNode(t)
			poolAddBlocks(t, p, "eni-b", "10.0.1.16/28")
			err := p.AddENI(tt.eni)
			poolWantErr(t, err, tt.wantErr)
			_, found := p.ENI("eni-d")
			if want := tt.wantErr == nil; found != want {
				t.Errorf("eni-d in pool = %v, want %v", found, want)
			}
			want := 3
			if tt.wantErr == nil {
				want = 4
			}
			if got := len(p.ENIs()); got != want {
				t.Errorf("pool has %d ENIs, want %d", got, want)
			}
		})
	}
}

func TestDuplicateENIErrorNamesHolder(t *testing.T) {
	p := poolNode(t)
	err := p.AddENI(poolENI("eni-d", 1, "10.0.2.0/24", "10.0.2.5"))
	var dup *ipam.DuplicateENIError
	if !errors.As(err, &dup) || dup.Other != "eni-b" {
		t.Fatalf("got %v, want device index 1 reported as taken by eni-b", err)
	}
}

func TestENIsAreCopies(t *testing.T) {
	p := poolNode(t)
	e, _ := p.ENI("eni-b")
	e.SecurityGroups[0] = "sg-changed"
	if e2, _ := p.ENI("eni-b"); e2.SecurityGroups[0] != "sg-1" {
		t.Errorf("changing a returned ENI changed the pool: security groups %v", e2.SecurityGroups)
	}
}

func TestRemoveENI(t *testing.T) {
	tests := []struct {
		name    string
		id      string
		setup   func(t *testing.T, p *ipam.Pool)
		now     time.Time
		wantErr any
	}{
		{"eni without blocks", "eni-c", nil, poolT0, nil},
		{"eni with free blocks", "eni-b", nil, poolT0, nil},
		{"unknown eni", "eni-z", nil, poolT0, new(*ipam.UnknownENIError)},
		{"primary eni", "eni-a", nil, poolT0, new(*ipam.PrimaryENIError)},
		{"address assigned", "eni-b", func(t *testing.T, p *ipam.Pool) {
			poolAssign(t, p, "c1", poolT0)
		}, poolT0, new(*ipam.InUseError)},
		{"address cooling", "eni-b", func(t *testing.T, p *ipam.Pool) {
			poolAssign(t, p, "c1", poolT0)
			p.Unassign(poolKey("c1"), poolT0)
		}, poolT0.Add(poolCooldown - time.Nanosecond), new(*ipam.InUseError)},
		{"cooldown over", "eni-b", func(t *testing.T, p *ipam.Pool) {
			poolAssign(t, p, "c1", poolT0)
			p.Unassign(poolKey("c1"), poolT0)
		}, poolT0.Add(poolCooldown), nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := poolNode(t)
			poolAddBlocks(t, p, "eni-b", "10.0.1.16/28", "10.0.1.40/32")
			if tt.setup != nil {
				tt.setup(t, p)
			}
			before := p.Stats(tt.now)
			err := p.RemoveENI(tt.id, tt.now)
			poolWantErr(t, err, tt.wantErr)
			after := p.Stats(tt.now)
			if tt.wantErr != nil {
				if after.Total != before.Total || len(after.ENIs) != len(before.ENIs) {
					t.Errorf("refused removal changed the pool: %v -> %v", before, after)
				}
				return
			}
			if _, ok := p.ENI(tt.id); ok {
				t.Errorf("%s still in the pool", tt.id)
			}
			// Its blocks went with it: the same prefixes fit on another ENI.
			if tt.id == "eni-b" {
				if after.Total != before.Total-17 {
					t.Errorf("total %d after removal, want %d", after.Total, before.Total-17)
				}
				if err := p.AddENI(poolENI("eni-d", 5, "10.0.1.0/24", "10.0.1.11")); err != nil {
					t.Fatal(err)
				}
				poolAddBlocks(t, p, "eni-d", "10.0.1.16/28", "10.0.1.40/32")
			}
		})
	}
}

func TestRemoveENIInUseCounts(t *testing.T) {
	p := poolNode(t)
	poolAddBlocks(t, p, "eni-b", "10.0.1.16/28")
	for _, c := range []string{"c1", "c2", "c3"} {
		poolAssign(t, p, c, poolT0)
	}
	p.Unassign(poolKey("c2"), poolT0.Add(time.Second))
	err := p.RemoveENI("eni-b", poolT0.Add(2*time.Second))
	var inUse *ipam.InUseError
	if !errors.As(err, &inUse) {
		t.Fatalf("got %v, want *InUseError", err)
	}
	want := ipam.InUseError{ENIID: "eni-b", Assigned: 2, Cooling: 1, Until: poolT0.Add(time.Second + poolCooldown)}
	if *inUse != want {
		t.Errorf("got %+v, want %+v", *inUse, want)
	}
}
