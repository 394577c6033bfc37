package ipam_test

import (
	"net/netip"
	"testing"
	"time"

	"github.com/vpcnet/vpcnet/ipam"
)

func TestUnassign(t *testing.T) {
	p := poolNode(t)
	poolAddBlocks(t, p, "eni-b", "10.0.1.5/32")
	held := poolAssign(t, p, "c1", poolT0)

	if _, ok := p.Unassign(poolKey("never-assigned"), poolT0); ok {
		t.Error("Unassign of an unknown key reported a release")
	}
	got, ok := p.Unassign(poolKey("c1"), poolT0)
	if !ok || got != held {
		t.Errorf("Unassign = %+v, %v; want %+v, true", got, ok, held)
	}
	if _, ok := p.Unassign(poolKey("c1"), poolT0); ok {
		t.Error("second Unassign of the same key reported a release")
	}
	if _, ok := p.Lookup(poolKey("c1")); ok {
		t.Error("key still holds an address after Unassign")
	}
	if _, ok := p.LookupAddr(held.Addr); ok {
		t.Error("address still has a holder after Unassign")
	}
}

// TestCooldown walks one /32 through release and reuse under clocks that
// advance, stand still and go backwards. Reuse must wait until the pool's
// clock (the latest now it was given) is a cooldown past the release.
func TestCooldown(t *testing.T) {
	at := func(s int) time.Time { return poolT0.Add(time.Duration(s) * time.Second) }
	tests := []struct {
		name       string
		clock      time.Time // an Assign elsewhere sets the pool's clock first
		unassignAt time.Time
		tries      []time.Time
		wantFirst  int // index in tries of the first Assign that succeeds; -1 for none
	}{
		{"advancing clock", at(0), at(10), []time.Time{at(20), at(39), at(40)}, 2},
		{"clock standing still", at(0), at(10), []time.Time{at(10), at(10), at(10)}, -1},
		{"assign clock behind the release", at(0), at(100), []time.Time{at(10), at(129), at(130)}, 2},
		{"release clock behind the pool's", at(100), at(50), []time.Time{at(80), at(129), at(130)}, 2},
		{"exactly at the end of cooldown", at(0), at(0), []time.Time{at(30)}, 0},
		{"a nanosecond early", at(0), at(0), []time.Time{at(30).Add(-time.Nanosecond)}, -1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := poolNode(t)
			poolAddBlocks(t, p, "eni-b", "10.0.1.5/32")
			poolAssign(t, p, "c1", at(0))
			p.Stats(tt.clock)
			p.Unassign(poolKey("c1"), tt.unassignAt)
			first := -1
			for i, now := range tt.tries {
				if _, err := p.Assign(poolKey("c2"), ipam.Pod{}, now); err == nil {
					first = i
					break
				}
			}
			if first != tt.wantFirst {
				t.Errorf("first successful Assign was try %d, want %d", first, tt.wantFirst)
			}
		})
	}
}

func TestZeroCooldownReusesAtOnce(t *testing.T) {
	p := ipam.NewPool(0)
	if err := p.AddENI(poolENI("eni-a", 0, "10.0.0.0/24", "10.0.0.10")); err != nil {
		t.Fatal(err)
	}
	poolAddBlocks(t, p, "eni-a", "10.0.0.5/32")
	a := poolAssign(t, p, "c1", poolT0)
	p.Unassign(poolKey("c1"), poolT0)
	if b := poolAssign(t, p, "c2", poolT0); b.Addr != a.Addr {
		t.Errorf("assigned %s, want %s reused at once", b.Addr, a.Addr)
	}
}

func TestNegativeCooldownPanics(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("NewPool(-1s) did not panic")
		}
	}()
	ipam.NewPool(-time.Second)
}

func TestLookups(t *testing.T) {
	p := poolNode(t)
	poolAddBlocks(t, p, "eni-b", "10.0.1.32/28")
	pod := ipam.Pod{Namespace: "ns", Name: "web"}
	a, err := p.Assign(poolKey("c1"), pod, poolT0)
	if err != nil {
		t.Fatal(err)
	}
	want := ipam.Assignment{
		Key: poolKey("c1"), Pod: pod, Addr: netip.MustParseAddr("10.0.1.32"),
		ENIID: "eni-b", Block: netip.MustParsePrefix("10.0.1.32/28"), AssignedAt: poolT0,
	}
	if a != want {
		t.Fatalf("Assign = %+v, want %+v", a, want)
	}
	if got, ok := p.Lookup(poolKey("c1")); !ok || got != want {
		t.Errorf("Lookup = %+v, %v", got, ok)
	}
	if got, ok := p.LookupAddr(want.Addr); !ok || got != want {
		t.Errorf("LookupAddr = %+v, %v", got, ok)
	}
	poolAssign(t, p, "c2", poolT0)
	p.Unassign(poolKey("c2"), poolT0)
	for _, addr := range []string{"10.0.1.33", "10.0.1.40", "10.0.1.10", "192.168.0.1", "fd00::1"} {
		if got, ok := p.LookupAddr(netip.MustParseAddr(addr)); ok {
			t.Errorf("LookupAddr(%s) = %+v, want nothing (cooling, free, primary, foreign, ipv6)", addr, got)
		}
	}
	if got := p.Assignments(); len(got) != 1 || got[0] != want {
		t.Errorf("Assignments = %+v, want just %+v", got, want)
	}
}

func TestAssignmentsByAddress(t *testing.T) {
	p := poolNode(t)
	poolAddBlocks(t, p, "eni-b", "10.0.1.32/28")
	poolAddBlocks(t, p, "eni-a", "10.0.0.64/28")
	for _, c := range []string{"c1", "c2", "c3"} {
		poolAssign(t, p, c, poolT0)
	}
	if _, err := p.Restore(poolKey("r1"), ipam.Pod{}, netip.MustParseAddr("10.0.1.40"), poolT0); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, a := range p.Assignments() {
		got = append(got, a.Addr.String()+"="+a.Key.ContainerID)
	}
	want := []string{"10.0.0.64=c1", "10.0.0.65=c2", "10.0.0.66=c3", "10.0.1.40=r1"}
	if len(got) != len(want) {
		t.Fatalf("Assignments = %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("Assignments = %v, want %v", got, want)
			break
		}
	}
}
