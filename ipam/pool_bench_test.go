package ipam_test

import (
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/vpcnet/vpcnet/ipam"
)

// BenchmarkAssignUnassign measures one CNI ADD/DEL pair's worth of pool
// work (Assign then Unassign of a new key) on a busy node: 4 ENIs, about
// 1,000 addresses, 250 pods already running. The clock advances a second
// per pair, so with the 30 s cooldown about 30 addresses are always cooling
// and the cooldown queue is drained as it goes.
func BenchmarkAssignUnassign(b *testing.B) {
	for _, bc := range []struct {
		name      string
		bits      int // block size
		perENI    int // blocks per ENI
		blockStep int // addresses between block starts
	}{
		{"secondary-ips", 32, 250, 1},     // 4 × 250 /32 = 1,000 addresses
		{"prefix-delegation", 28, 16, 16}, // 4 × 16 /28 = 1,024 addresses
	} {
		b.Run(bc.name, func(b *testing.B) {
			p := ipam.NewPool(30 * time.Second)
			for e := range 4 {
				subnet := netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 0, byte(4 * e), 0}), 22)
				eni := ipam.ENI{
					ID:          fmt.Sprintf("eni-%d", e),
					DeviceIndex: e,
					Primary:     e == 0,
					SubnetCIDR:  subnet,
					PrimaryIP:   subnet.Addr().Next(), // x.x.x.1; blocks start at x.x.x.16
				}
				if err := p.AddENI(eni); err != nil {
					b.Fatal(err)
				}
				for i := range bc.perENI {
					a := subnet.Addr().As4()
					off := 16 + i*bc.blockStep
					a[2] += byte(off / 256)
					a[3] = byte(off % 256)
					if err := p.AddBlock(eni.ID, netip.PrefixFrom(netip.AddrFrom4(a), bc.bits)); err != nil {
						b.Fatal(err)
					}
				}
			}
			now := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
			for i := range 250 {
				if _, err := p.Assign(benchKey("running", i), ipam.Pod{Namespace: "default", Name: "running"}, now); err != nil {
					b.Fatal(err)
				}
			}
			keys := make([]ipam.Key, 1024)
			for i := range keys {
				keys[i] = benchKey("churn", i)
			}
			pod := ipam.Pod{Namespace: "default", Name: "churn"}
			i := 0
			for b.Loop() {
				now = now.Add(time.Second)
				k := keys[i%len(keys)]
				i++
				if _, err := p.Assign(k, pod, now); err != nil {
					b.Fatal(err)
				}
				if _, ok := p.Unassign(k, now); !ok {
					b.Fatal("Unassign released nothing")
				}
			}
			if s := p.Stats(now); s.Assigned != 250 {
				b.Fatalf("%d assigned after the run, want the 250 running pods", s.Assigned)
			}
		})
	}
}

func benchKey(prefix string, i int) ipam.Key {
	return ipam.Key{Network: "vpcnet", ContainerID: fmt.Sprintf("%s-%064d", prefix, i), IfName: "eth0"}
}
