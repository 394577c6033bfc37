package ipam_test

import (
	"net/netip"
	"reflect"
	"testing"
	"time"

	"github.com/vpcnet/vpcnet/ipam"
)

// statsNode is a node with blocks added out of order and some use:
// eni-a holds 10.0.0.64/28 (3 assigned, 1 cooling); eni-b holds
// 10.0.1.40/32 (restored) and 10.0.1.16/28 (free).
func statsNode(t *testing.T) *ipam.Pool {
	p := poolNode(t)
	poolAddBlocks(t, p, "eni-b", "10.0.1.40/32", "10.0.1.16/28")
	poolAddBlocks(t, p, "eni-a", "10.0.0.64/28")
	for _, c := range []string{"c1", "c2", "c3", "c4"} {
		poolAssign(t, p, c, poolT0)
	}
	p.Unassign(poolKey("c2"), poolT0)
	if _, err := p.Restore(poolKey("r1"), ipam.Pod{}, netip.MustParseAddr("10.0.1.40"), poolT0); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestStats(t *testing.T) {
	p := statsNode(t)
	bs := func(pfx string, assigned, cooling, free int) ipam.BlockState {
		return ipam.BlockState{Prefix: netip.MustParsePrefix(pfx), Assigned: assigned, Cooling: cooling, Free: free}
	}
	want := ipam.Stats{
		Total: 33, Assigned: 4, Cooling: 1, Free: 28,
		NextFree: poolT0.Add(poolCooldown),
		ENIs: []ipam.ENIStats{
			{ID: "eni-a", DeviceIndex: 0, Total: 16, Assigned: 3, Cooling: 1, Free: 12,
				Blocks: []ipam.BlockState{bs("10.0.0.64/28", 3, 1, 12)}},
			{ID: "eni-b", DeviceIndex: 1, Total: 17, Assigned: 1, Cooling: 0, Free: 16,
				Blocks: []ipam.BlockState{bs("10.0.1.16/28", 0, 0, 16), bs("10.0.1.40/32", 1, 0, 0)}},
			{ID: "eni-c", DeviceIndex: 2, Blocks: []ipam.BlockState{}},
		},
	}
	if got := p.Stats(poolT0.Add(time.Second)); !reflect.DeepEqual(got, want) {
		t.Errorf("Stats =\n%+v\nwant\n%+v", got, want)
	}
	want.Cooling, want.Free, want.NextFree = 0, 29, time.Time{}
	want.ENIs[0].Cooling, want.ENIs[0].Free = 0, 13
	want.ENIs[0].Blocks[0] = bs("10.0.0.64/28", 3, 0, 13)
	if got := p.Stats(poolT0.Add(poolCooldown)); !reflect.DeepEqual(got, want) {
		t.Errorf("Stats after cooldown =\n%+v\nwant\n%+v", got, want)
	}
}

func TestStatsString(t *testing.T) {
	tests := []struct {
		s    ipam.Stats
		want string
	}{
		{ipam.Stats{Assigned: 14, Cooling: 2, NextFree: poolT0, ENIs: make([]ipam.ENIStats, 2)},
			"14 assigned, 2 cooling (first free at 2025-01-02T03:04:05Z), 0 free on 2 ENIs"},
		{ipam.Stats{Assigned: 1, Free: 15, ENIs: make([]ipam.ENIStats, 1)},
			"1 assigned, 0 cooling, 15 free on 1 ENI"},
	}
	for _, tt := range tests {
		if got := tt.s.String(); got != tt.want {
			t.Errorf("String() = %q, want %q", got, tt.want)
		}
	}
}

func TestSnapshot(t *testing.T) {
	p := ipam.NewPool(poolCooldown)
	// Added out of device-index order.
	for _, e := range []ipam.ENI{
		poolENI("eni-c", 2, "10.0.0.0/24", "10.0.0.11"),
		poolENI("eni-a", 0, "10.0.0.0/24", "10.0.0.10"),
	} {
		if err := p.AddENI(e); err != nil {
			t.Fatal(err)
		}
	}
	poolAddBlocks(t, p, "eni-a", "10.0.0.48/28", "10.0.0.5/32", "10.0.0.32/28")
	poolAssign(t, p, "c1", poolT0) // 10.0.0.5, the fullest block
	poolAssign(t, p, "c2", poolT0) // 10.0.0.32
	p.Unassign(poolKey("c2"), poolT0)

	s := p.Snapshot(poolT0)
	wantENIs := []string{"eni-a", "eni-c"}
	var gotENIs []string
	for _, e := range s.ENIs {
		gotENIs = append(gotENIs, e.ID)
	}
	if !reflect.DeepEqual(gotENIs, wantENIs) {
		t.Fatalf("snapshot ENIs %v, want %v by device index", gotENIs, wantENIs)
	}
	wantBlocks := []ipam.BlockState{
		{Prefix: netip.MustParsePrefix("10.0.0.5/32"), Assigned: 1},
		{Prefix: netip.MustParsePrefix("10.0.0.32/28"), Cooling: 1, Free: 15},
		{Prefix: netip.MustParsePrefix("10.0.0.48/28"), Free: 16},
	}
	if !reflect.DeepEqual(s.ENIs[0].Blocks, wantBlocks) {
		t.Errorf("eni-a blocks %+v, want %+v", s.ENIs[0].Blocks, wantBlocks)
	}
	if want := poolENI("eni-a", 0, "10.0.0.0/24", "10.0.0.10"); !reflect.DeepEqual(s.ENIs[0].ENI, want) {
		t.Errorf("snapshot ENI %+v, want %+v", s.ENIs[0].ENI, want)
	}
	if s.Waiting != 0 {
		t.Errorf("Waiting = %d; the pool never knows it, want 0", s.Waiting)
	}
	s.ENIs[0].SecurityGroups[0] = "sg-changed"
	if again := p.Snapshot(poolT0); again.ENIs[0].SecurityGroups[0] != "sg-1" {
		t.Error("changing a snapshot changed the pool")
	}
}
