package ipam

import (
	"net/netip"
	"testing"
	"time"
)

// KeepForeignBlocks (the prefix fallback on a fragmented subnet): free
// /28s are neither released nor counted as free slots while the pool
// grows by single addresses; their free addresses count as available.
func TestKeepForeignBlocks(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	snap := Snapshot{ENIs: []ENIState{{
		ENI: ENI{ID: "eni-p", Primary: true, SubnetID: "subnet-a"},
		Blocks: []BlockState{
			{Prefix: netip.MustParsePrefix("10.0.0.16/28"), Free: 16},
			{Prefix: netip.MustParsePrefix("10.0.0.32/28"), Assigned: 2, Free: 14},
		},
	}}}
	cfg := DefaultPlanConfig()
	cfg.SubnetID = "subnet-a"
	cfg.WarmIPTarget = 16
	lim := Limits{MaxENIs: 2, IPv4PerENI: 4}
	for _, tc := range []struct {
		keep    bool
		release int
		grow    bool
	}{
		{keep: false, release: 1, grow: false}, // the free /28 goes back
		{keep: true, release: 0, grow: false},  // kept: 30 available, nothing to do
	} {
		cfg.KeepForeignBlocks = tc.keep
		acts, _ := Plan(snap, cfg, lim, now)
		release, grow := 0, false
		for _, a := range acts {
			switch a.Kind {
			case ReleaseBlocks:
				release += len(a.Blocks)
			case AssignBlocks, AttachENI:
				grow = true
			}
		}
		if release != tc.release || grow != tc.grow {
			t.Errorf("keep=%v: %v; want %d released, growth %v", tc.keep, acts, tc.release, tc.grow)
		}
	}
}
