package nodestate

import (
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/vpcnet/vpcnet/checkpoint"
	"github.com/vpcnet/vpcnet/ipam"
)

var (
	v6Subnet = netip.MustParsePrefix("2600:1f14:abc:de01::/64")
	v6Prefix = netip.MustParsePrefix("2600:1f14:abc:de01:12::/80")
)

func ipv6Config() Config {
	c := testConfig()
	c.IPv6 = true
	c.Plan.PrefixDelegation = true
	return c
}

// ipv6Primary is the primary ENI of a dual-stack subnet holding blocks,
// IPv4 or IPv6.
func ipv6Primary(blocks ...string) ENIInfo {
	e := primaryENI(blocks...)
	e.SubnetIPv6CIDR = v6Subnet
	return e
}

func isAssignIPv6(j Job) bool {
	return j.Kind == JobAction && j.Action.Kind == ipam.AssignBlocks && j.Action.IPv6
}

func v6key(s string) ipam.Key { return ipam.Key{Network: "aws-cni", ContainerID: s, IfName: "eth0"} }

// A new IPv6 node asks EC2 for one /80 on its primary ENI, once; Adds
// that came meanwhile are served from it when it lands, with IPv6
// addresses, and nothing more is asked for however many pods come.
func TestIPv6NodeAsksOnceForAPrimaryPrefixAndServesAddsFromIt(t *testing.T) {
	n, err := New(ipv6Config(), Boot{CheckpointMissing: true, ENIs: []ENIInfo{ipv6Primary("10.0.0.5/32", "10.0.0.16/28")}}, t0)
	if err != nil {
		t.Fatal(err)
	}
	jobs, _ := drain(t, n, t0)
	assign, ok := find(jobs, isAssignIPv6)
	if !ok || len(jobs) != 1 || assign.Action.ENIID != "eni-p" || assign.Action.Count != 1 {
		t.Fatalf("jobs %+v, want one IPv6 prefix asked for on eni-p", jobs)
	}
	if got := assign.Calls(); len(got) != 1 || got[0] != "AssignIpv6Addresses" {
		t.Errorf("the assign's EC2 calls %v, want AssignIpv6Addresses", got)
	}
	n.Step(t0, AddRequest{ID: 1, Key: v6key("a")})
	if _, replies := drain(t, n, t0); len(replies) != 0 {
		t.Fatalf("Add answered %+v before the prefix landed: the node's IPv4 addresses must not serve IPv6 pods", replies)
	}
	n.Step(t0, ActionResult{JobID: assign.ID, Blocks: []netip.Prefix{v6Prefix}})
	jobs, replies := drain(t, n, t0)
	if len(replies) != 1 || replies[0].Err != nil || replies[0].Assignment.Addr != v6Prefix.Addr() {
		t.Fatalf("replies %+v, want the prefix's first address, as aws-node gives", replies)
	}
	for i := range 300 {
		n.Step(t0, AddRequest{ID: uint64(10 + i), Key: v6key(string(rune(0x100 + i)))})
	}
	more, replies := drain(t, n, t0)
	jobs = append(jobs, more...)
	if len(replies) != 300 {
		t.Fatalf("%d of 300 Adds answered", len(replies))
	}
	for _, r := range replies {
		if r.Err != nil || !v6Prefix.Contains(r.Assignment.Addr) {
			t.Fatalf("reply %+v, want an address of %s", r, v6Prefix)
		}
	}
	for _, j := range jobs {
		if j.Kind == JobAction {
			t.Errorf("job %+v: an IPv6 node with its prefix asks EC2 for nothing more", j.Action)
		}
	}
}

// A restart finds the /80 attached and the pods in the checkpoint: no
// EC2 change (I3), the pods keep their addresses, and a /80 no pod uses
// is never given back.
func TestIPv6RestartKeepsThePrefixAndAsksEC2ForNothing(t *testing.T) {
	ck := checkpoint.State{ReleasesKnown: true, Entries: []checkpoint.Entry{
		{Key: v6key("a"), Addr: netip.MustParseAddr("2600:1f14:abc:de01:12::7"), AssignedAt: t0},
		// An IPv4 entry of an earlier IPv4 run: kept on disk, never
		// restored into the IPv6 pool, never released.
		{Key: v6key("old"), Addr: netip.MustParseAddr("10.0.0.5"), AssignedAt: t0},
	}}
	boot := Boot{Checkpoint: ck, ENIs: []ENIInfo{ipv6Primary("10.0.0.5/32", v6Prefix.String())},
		Routed: []Route{{Addr: netip.MustParseAddr("2600:1f14:abc:de01:12::7")}}}
	n, err := New(ipv6Config(), boot, t0)
	if err != nil {
		t.Fatal(err)
	}
	jobs, _ := drain(t, n, t0)
	for _, j := range jobs {
		if j.Kind == JobAction {
			t.Errorf("restart job %+v, want no EC2 change", j.Action)
		}
	}
	n.Step(t0, AddRequest{ID: 1, Key: v6key("a")})
	_, replies := drain(t, n, t0)
	if len(replies) != 1 || replies[0].Assignment.Addr != netip.MustParseAddr("2600:1f14:abc:de01:12::7") {
		t.Fatalf("replies %+v, want the restored address", replies)
	}
	n.Step(t0, DelRequest{ID: 2, Key: v6key("a")})
	later := t0.Add(time.Hour)
	n.Step(later, Tick{})
	jobs, _ = drain(t, n, later)
	if acts, _ := n.Plan(later); len(acts) != 0 {
		t.Errorf("plan with an unused /80: %v, want nothing", acts)
	}
	for _, j := range jobs {
		if j.Kind == JobAction {
			t.Errorf("job %+v after the last pod left, want the /80 kept", j.Action)
		}
	}
	st := n.state(later)
	if len(st.Entries) != 1 || st.Entries[0].Key != v6key("old") {
		t.Errorf("checkpoint entries %+v, want the IPv4 entry kept as stale", st.Entries)
	}
}

// An IPv4 node leaves an IPv6 /80 on its ENI alone: none of its pods may
// be given an IPv6 address, and the IPv4 planner, to which it is a free
// block of no kind it uses, must not give it back.
func TestIPv4NodeLeavesAnIPv6PrefixAlone(t *testing.T) {
	n, err := New(testConfig(), Boot{CheckpointMissing: true, ENIs: []ENIInfo{ipv6Primary(v6Prefix.String(), "10.0.0.5/32")}}, t0)
	if err != nil {
		t.Fatal(err)
	}
	later := t0.Add(time.Hour) // past every hold on shrinking
	n.Step(later, Tick{})
	jobs, _ := drain(t, n, later)
	for _, j := range jobs {
		if j.Kind == JobAction && slices.Contains(j.Action.Blocks, v6Prefix) {
			t.Fatalf("job %+v touches the IPv6 prefix", j.Action)
		}
	}
	n.Step(later, AddRequest{ID: 1, Key: v6key("a")})
	_, replies := drain(t, n, later)
	if len(replies) != 1 || replies[0].Assignment.Addr != netip.MustParseAddr("10.0.0.5") {
		t.Fatalf("replies %+v, want 10.0.0.5", replies)
	}
	if v := n.View(later); v.Stats.Total != 1 {
		t.Errorf("pool holds %d addresses, want the one IPv4 address only", v.Stats.Total)
	}
}
