package dataplane

import (
	"fmt"
	"net/netip"
	"syscall"
	"testing"
	"time"

	"github.com/vpcnet/vpcnet/dataplane/netnstest"
	"github.com/vpcnet/vpcnet/verdicts"
)

// benchRuleset isolates pods: ingress only, or both ways, each direction
// with allows Allows of peers /32 peers and a TCP port (port, then
// port+1...). With distinct, every Allow of every pod has its own peers;
// otherwise the pods share one peer list per Allow, as the compiler
// hands out the peers of the pods one policy selects.
func benchRuleset(pods, allows, peers int, bothWays, distinct bool, port uint16) verdicts.Ruleset {
	shared := make([][]netip.Prefix, allows)
	n := 0
	peerList := func() []netip.Prefix {
		var ps []netip.Prefix
		for range peers {
			ps = append(ps, netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 1 + byte(n>>16), byte(n >> 8), byte(n)}), 32))
			n += 2 // apart, so that no two merge into one range
		}
		return ps
	}
	for a := range shared {
		shared[a] = peerList()
	}
	iso := func() *verdicts.Isolation {
		i := &verdicts.Isolation{Policies: []string{"bench/p"}}
		for a := range allows {
			ps := shared[a]
			if distinct {
				ps = peerList()
			}
			i.Allows = append(i.Allows, verdicts.Allow{Rule: fmt.Sprintf("bench/p ingress[%d]", a), Peers: ps,
				Ports: []verdicts.Port{{Protocol: verdicts.TCP, First: port + uint16(a), Last: port + uint16(a)}}})
		}
		return i
	}
	var rs verdicts.Ruleset
	for p := range pods {
		r := verdicts.PodRules{Pod: verdicts.PodRef{Namespace: "bench", Name: fmt.Sprint("p", p), IP: netip.AddrFrom4([4]byte{10, 0, byte(p / 250), byte(1 + p%250)})},
			Ingress: iso()}
		if bothWays {
			r.Egress = iso()
		}
		rs.Pods = append(rs.Pods, r)
	}
	return rs
}

// BenchmarkSetPolicyPaths times each way SetPolicy can go, in a
// throwaway namespace:
//   - unchanged: the same rules again (the digest and the table's use
//     count);
//   - restart-unchanged: the same rules from a new Dataplane, which reads
//     the whole table and compares it;
//   - restart-changed: other rules (one port) from a new Dataplane, which
//     rewrites the whole table in place;
//   - change-one-pod: one pod's chain differs each time, as an ADD makes
//     it (BenchmarkSetPolicy is that case at 110 pods).
//
// Besides wall time per call it reports the process's CPU time per call
// (user and system, the kernel's commit included), which other load on
// the machine changes less.
func BenchmarkSetPolicyPaths(b *testing.B) {
	for _, shape := range []struct {
		name string
		rs   func(port uint16) verdicts.Ruleset
	}{
		// 110 pods, each with 5 Allows of 10 peers (shared), ingress.
		{"110pods-5allows-10peers", func(port uint16) verdicts.Ruleset { return benchRuleset(110, 5, 10, false, false, port) }},
		// 100 pods both ways with 5 Allows of 10 peers each, all
		// distinct: 1,000 peer sets.
		{"1000sets-10peers", func(port uint16) verdicts.Ruleset { return benchRuleset(100, 5, 10, true, true, port) }},
	} {
		for _, mode := range []string{"unchanged", "restart-unchanged", "restart-changed", "change-one-pod"} {
			b.Run(shape.name+"/"+mode, func(b *testing.B) {
				node := netnstest.NewNS(b)
				newDP := func() *Dataplane {
					dp, err := New(Options{NetNS: node.Path(), PollInterval: 20 * time.Millisecond})
					if err != nil {
						b.Fatal(err)
					}
					return dp
				}
				dp := newDP()
				rs := [2]verdicts.Ruleset{shape.rs(80), shape.rs(90)}
				if err := dp.SetPolicy(b.Context(), rs[0], true); err != nil {
					b.Fatal(err)
				}
				m, err := policyModelOf(rs[0], true)
				if err != nil {
					b.Fatal(err)
				}
				b.ReportMetric(float64(len(m.sets)), "sets")
				b.ReportMetric(float64(len(m.chains)), "pod-chains")
				cpu0 := cpuTime()
				i := 0
				for b.Loop() {
					i++
					next := rs[0]
					switch mode {
					case "restart-unchanged":
						dp = newDP()
					case "restart-changed":
						dp, next = newDP(), rs[i%2]
					case "change-one-pod":
						next.Pods[len(next.Pods)-1].Pod.Name = fmt.Sprint("changed", i)
					}
					writes := dp.policyWrites.Load()
					if err := dp.SetPolicy(b.Context(), next, true); err != nil {
						b.Fatal(err)
					}
					if wrote := dp.policyWrites.Load() != writes; wrote != (mode == "restart-changed" || mode == "change-one-pod") {
						b.Fatalf("%s: wrote %v", mode, wrote)
					}
				}
				b.ReportMetric(float64(cpuTime()-cpu0)/float64(time.Millisecond)/float64(i), "cpu-ms/op")
			})
		}
	}
}

// cpuTime is the process's user and system CPU time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkIPv6AddWithV4Egress times an ADD's and a DEL's write on an
// IPv6 node of 110 egress-isolated pods (5 Allows each of 10 IPv6 and
// 10 IPv4 peers, shared), the last pod going from bound to added and
// back: without IPv4 egress (its address's map entries in table ip6)
// and with it (its egress veth's entry in table ip too).
func BenchmarkIPv6AddWithV4Egress(b *testing.B) {
	var peers [5][]netip.Prefix
	for a := range peers {
		for p := range 10 {
			peers[a] = append(peers[a], netip.PrefixFrom(netip.AddrFrom16([16]byte{0x26, 0, 0x1f, 0x14, 15: byte(a*16 + p)}), 128),
				netip.PrefixFrom(netip.AddrFrom4([4]byte{198, 51, byte(a), byte(p * 7)}), 32))
		}
	}
	iso := &verdicts.Isolation{Policies: []string{"bench/p"}}
	for a := range 5 {
		iso.Allows = append(iso.Allows, verdicts.Allow{Rule: fmt.Sprintf("bench/p egress[%d]", a), Peers: peers[a],
			Ports: []verdicts.Port{{Protocol: verdicts.TCP, First: uint16(8000 + a), Last: uint16(8000 + a)}}})
	}
	for _, v4 := range []bool{false, true} {
		b.Run(fmt.Sprintf("v4egress=%t", v4), func(b *testing.B) {
			node := netnstest.NewNS(b)
			dp, err := New(Options{NetNS: node.Path(), IPv6Policy: true, EgressV4Policy: v4})
			if err != nil {
				b.Fatal(err)
			}
			added := verdicts.Ruleset{}
			for p := range 110 {
				added.Pods = append(added.Pods, verdicts.PodRules{
					Pod:    verdicts.PodRef{Namespace: "bench", Name: fmt.Sprint("p", p), IP: netip.AddrFrom16([16]byte{0x26, 0, 0x1f, 0x14, 0xab, 14: byte(p >> 8), 15: byte(p)})},
					Egress: iso, EgressV4Veth: fmt.Sprintf("v4bench%d", p)})
			}
			bound := verdicts.Ruleset{Pods: append([]verdicts.PodRules(nil), added.Pods...)}
			last := &bound.Pods[len(bound.Pods)-1]
			last.Pod.IP, last.EgressV4Veth = netip.Addr{}, ""
			if err := dp.SetPolicy(b.Context(), bound, false); err != nil {
				b.Fatal(err)
			}
			rewrites := dp.policyV4Rewrites.Load()
			cpu0 := cpuTime()
			i := 0
			for b.Loop() {
				i++
				rs := added
				if i%2 == 0 {
					rs = bound
				}
				if err := dp.SetPolicy(b.Context(), rs, false); err != nil {
					b.Fatal(err)
				}
			}
			if dp.policyV4Rewrites.Load() != rewrites {
				b.Fatal("an ADD or a DEL rewrote table ip whole")
			}
			b.ReportMetric(float64(cpuTime()-cpu0)/float64(time.Millisecond)/float64(i), "cpu-ms/op")
		})
	}
}
