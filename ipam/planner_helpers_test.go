package ipam

import (
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"
)

// m5large is the instance most examples use: 3 ENIs, 10 IPv4 addresses
// per ENI (9 secondary addresses or 9 /28 prefixes).
var m5large = Limits{MaxENIs: 3, IPv4PerENI: 10}

var t0 = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

// testConfig is aws-node's defaults with a subnet, changed by opts.
func testConfig(opts ...func(*PlanConfig)) PlanConfig {
	c := DefaultPlanConfig()
	c.SubnetID = "subnet-a"
	c.SecurityGroups = []string{"sg-1"}
	for _, o := range opts {
		o(&c)
	}
	return c
}

// blk describes blocks for the snapshot builders: n blocks with the
// given number of assigned and cooling blocks (or, for prefixes, the
// assigned and cooling addresses of each prefix).
type blk struct {
	free, assigned, cooling int
}

// addrs is n /32 blocks: a assigned, c cooling, the rest free.
func addrs(n, a, c int) blk { return blk{free: n - a - c, assigned: a, cooling: c} }

// eniAt builds an ENI at device index dev, created age before t0, with
// /32 blocks b and the given /28 prefixes. Addresses are made unique by
// device index.
func eniAt(dev int, age time.Duration, b blk, prefixes ...BlockState) ENIState {
	e := ENIState{ENI: ENI{
		ID:          fmt.Sprintf("eni-%d", dev),
		DeviceIndex: dev,
		Primary:     dev == 0,
		SubnetID:    "subnet-a",
		PrimaryIP:   netip.AddrFrom4([4]byte{10, 0, byte(dev), 4}),
		CreatedAt:   t0.Add(-age),
	}}
	host := byte(10)
	add := func(n int, st BlockState) {
		for range n {
			st.Prefix = netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 0, byte(dev), host}), 32)
			e.Blocks = append(e.Blocks, st)
			host++
		}
	}
	add(b.assigned, BlockState{Assigned: 1})
	add(b.cooling, BlockState{Cooling: 1})
	add(b.free, BlockState{Free: 1})
	for i, p := range prefixes {
		p.Prefix = netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(100 + dev), byte(i), 0}), 28)
		e.Blocks = append(e.Blocks, p)
	}
	return e
}

// prefix is one /28 with a assigned and c cooling addresses.
func prefix(a, c int) BlockState { return BlockState{Assigned: a, Cooling: c, Free: 16 - a - c} }

func snap(waiting int, enis ...ENIState) Snapshot { return Snapshot{ENIs: enis, Waiting: waiting} }

// brief renders actions compactly for table tests: "assign eni-0 9",
// "attach 7", "release eni-2 3", "detach eni-2".
func brief(actions []Action) []string {
	out := []string{}
	for _, a := range actions {
		switch a.Kind {
		case AssignBlocks:
			out = append(out, fmt.Sprintf("assign %s %d", a.ENIID, a.Count))
		case AttachENI:
			out = append(out, fmt.Sprintf("attach %d", a.Count))
		case ReleaseBlocks:
			out = append(out, fmt.Sprintf("release %s %d", a.ENIID, len(a.Blocks)))
		case DetachENI:
			out = append(out, "detach "+a.ENIID)
		}
	}
	return out
}

// poolOf counts a snapshot's addresses the way the targets do: blocks
// of the kind in use (bits), and blocks of the other kind while an
// address in them is in use.
type poolCount struct{ enis, blocks, total, assigned, cooling, avail int }

func poolOf(s Snapshot, bits int) poolCount {
	c := poolCount{enis: len(s.ENIs)}
	for _, e := range s.ENIs {
		for _, b := range e.Blocks {
			if b.Prefix.Bits() != bits {
				if b.Assigned+b.Cooling == 0 {
					continue
				}
			} else {
				c.blocks++
			}
			c.total += b.Assigned + b.Cooling + b.Free
			c.assigned += b.Assigned
			c.cooling += b.Cooling
			c.avail += b.Free
		}
	}
	return c
}

// settle plans and applies until a pass plans nothing, and returns the
// final snapshot and the last pass's shortfall.
func settle(t *testing.T, s Snapshot, cfg PlanConfig, lim Limits, now time.Time) (Snapshot, Shortfall) {
	t.Helper()
	for range 10 {
		actions, short := Plan(s, cfg, lim, now)
		if len(actions) == 0 {
			return s, short
		}
		var err error
		if s, err = ApplyActions(s, actions, lim, now); err != nil {
			t.Fatalf("apply: %v", err)
		}
	}
	t.Fatalf("still planning after 10 passes")
	return s, Shortfall{}
}

func eq(a, b []string) bool { return strings.Join(a, "|") == strings.Join(b, "|") }
