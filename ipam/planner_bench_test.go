package ipam

import (
	"fmt"
	"net/netip"
	"testing"
	"time"
)

// benchNode is a node with 250 pods on about 1,000 addresses: 20 ENIs of
// 50 secondary addresses (limits 20 ENIs × 51 IPv4), or 63 /28 prefixes
// on 7 ENIs (limits 8 ENIs × 10 IPv4). Pods fill the lowest device
// indexes first, as the pool places them.
func benchNode(prefixes bool) (Snapshot, Limits) {
	lim, enis, perENI, size, bits := Limits{MaxENIs: 20, IPv4PerENI: 51}, 20, 50, 1, 32
	if prefixes {
		lim, enis, perENI, size, bits = Limits{MaxENIs: 8, IPv4PerENI: 10}, 7, 9, 16, 28
	}
	pods := 250
	next := uint32(10<<24 | 16)
	var s Snapshot
	for dev := range enis {
		e := ENIState{ENI: ENI{ID: fmt.Sprintf("eni-%d", dev), DeviceIndex: dev, Primary: dev == 0,
			SubnetID: "subnet-a", CreatedAt: t0.Add(-30 * time.Second)}}
		for range perENI {
			b := BlockState{Prefix: netip.PrefixFrom(numAddr(next), bits), Assigned: min(pods, size)}
			b.Free = size - b.Assigned
			pods -= b.Assigned
			next += uint32(size)
			e.Blocks = append(e.Blocks, b)
		}
		s.ENIs = append(s.ENIs, e)
	}
	return s, lim
}

// BenchmarkPlan measures one planner pass on the bench node: "steady" is
// the common pass that finds nothing to do, "release" gives back about
// 740 addresses one by one (the ENIs are inside their grace period, so
// none is detached whole).
func BenchmarkPlan(b *testing.B) {
	for _, bc := range []struct {
		name     string
		prefixes bool
		cfg      PlanConfig
	}{
		{"secondary/steady", false, testConfig(minIP(1000))},
		{"secondary/release", false, testConfig(warmIP(10))},
		{"prefix/steady", true, testConfig(prefixMode, warmPfx(47), maxPods(1100))},
	} {
		b.Run(bc.name, func(b *testing.B) {
			s, lim := benchNode(bc.prefixes)
			actions, _ := Plan(s, bc.cfg, lim, t0)
			b.ReportMetric(float64(len(actions)), "actions")
			b.ReportAllocs()
			for b.Loop() {
				Plan(s, bc.cfg, lim, t0)
			}
		})
	}
}
