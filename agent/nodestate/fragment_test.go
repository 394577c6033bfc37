package nodestate

import (
	"errors"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/vpcnet/vpcnet/checkpoint"
	"github.com/vpcnet/vpcnet/ipam"
)

var errFragmented = errors.New("InsufficientCidrBlocks: no free /28")

func fragConfig() Config {
	cfg := testConfig()
	cfg.Plan.PrefixDelegation = true
	cfg.Limits = ipam.Limits{MaxENIs: 3, IPv4PerENI: 20}
	cfg.Classify = func(err error) ErrorClass {
		if errors.Is(err, errFragmented) {
			return ErrorClass{Code: "InsufficientCidrBlocks", SubnetFragmented: true, Refusal: true}
		}
		return ErrorClass{}
	}
	return cfg
}

func isAssign(j Job) bool { return j.Kind == JobAction && j.Action.Kind == ipam.AssignBlocks }

// A prefix refused for fragmentation: the node grows by single addresses
// at once, pods get them and learn nothing is wrong; after the backoff it
// asks for a prefix again, keeping the single addresses, and the first
// prefix granted ends the fallback.
func TestFragmentedSubnetFallsBackToSingleAddressesAndReturnsToPrefixes(t *testing.T) {
	n, err := New(fragConfig(), Boot{CheckpointMissing: true, ENIs: []ENIInfo{primaryENI()}}, t0)
	if err != nil {
		t.Fatal(err)
	}
	jobs, _ := drain(t, n, t0)
	assign, ok := find(jobs, isAssign)
	if !ok || !assign.Action.Prefixes || assign.Action.SubnetID != "subnet-a" {
		t.Fatalf("first growth %+v, want a prefix assign naming subnet-a", assign)
	}
	now := t0.Add(time.Second)
	n.Step(now, ActionResult{JobID: assign.ID, Err: errFragmented, SubnetFree: 55})
	rd := n.Ready()
	if !strings.Contains(noticeText(rd.Notices, "SubnetFragmented"), "55 free addresses") {
		t.Errorf("no SubnetFragmented Event with the free count; notices %+v", rd.Notices)
	}
	v := n.View(now)
	if v.PrefixFallback == nil || v.PrefixFallback.FreeAddresses != 55 || v.PrefixFallback.Reason != ReasonSubnetFragmented {
		t.Fatalf("view's fallback %+v, want subnet_fragmented with 55 free", v.PrefixFallback)
	}
	single, ok := find(rd.Jobs, isAssign)
	if !ok || single.Action.Prefixes || single.Action.Count != 16 {
		t.Fatalf("after the refusal: %+v, want 16 single addresses at once (one /28's worth)", single.Action)
	}
	var ips []netip.Prefix
	for i := range single.Action.Count {
		ips = append(ips, netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 0, 0, byte(20 + i)}), 32))
	}
	n.Step(now, ActionResult{JobID: single.ID, Blocks: ips})
	n.Step(now, AddRequest{ID: 1, Key: ipam.Key{Network: "n", ContainerID: "c1", IfName: "eth0"}, Pod: ipam.Pod{Namespace: "d", Name: "p1"}})
	jobs, replies := drain(t, n, now)
	if r, ok := replyTo(replies, 1); !ok || r.Err != nil || !r.Assignment.Addr.IsValid() {
		t.Fatalf("pod during the fallback: %+v, want an address", r)
	}
	// The pod took one: one more single address keeps 16 available.
	more, ok := find(jobs, isAssign)
	if !ok || more.Action.Prefixes || more.Action.Count != 1 {
		t.Fatalf("after a pod during the fallback: %+v, want one more single address", more.Action)
	}
	n.Step(now, ActionResult{JobID: more.ID, Blocks: []netip.Prefix{netip.MustParsePrefix("10.0.0.40/32")}})
	drain(t, n, now)

	// Before the backoff ends, nothing asks for a prefix; at its end the
	// machine wakes and asks again.
	if w := n.Ready().Wake; w.IsZero() || w.After(now.Add(minPrefixRetry)) {
		t.Errorf("wake %v, want by %v to retry prefixes", w, now.Add(minPrefixRetry))
	}
	retry := now.Add(minPrefixRetry)
	n.Step(retry, Tick{})
	if jobs, _ = drain(t, n, retry); len(jobs) > 0 {
		t.Fatalf("at target after the backoff, yet %+v", jobs)
	}
	// A second pod makes the pool short: growth is by prefixes again.
	n.Step(retry, AddRequest{ID: 2, Key: ipam.Key{Network: "n", ContainerID: "c2", IfName: "eth0"}, Pod: ipam.Pod{Namespace: "d", Name: "p2"}})
	jobs, _ = drain(t, n, retry)
	again, ok := find(jobs, isAssign)
	if !ok || !again.Action.Prefixes {
		t.Fatalf("after the backoff: %+v, want a prefix asked for again", jobs)
	}
	// Refused again: the backoff doubles.
	n.Step(retry, ActionResult{JobID: again.ID, Err: errFragmented, SubnetFree: 40})
	if f := n.View(retry).PrefixFallback; f == nil || f.RetryAt != retry.Add(2*minPrefixRetry) || f.FreeAddresses != 40 {
		t.Fatalf("second refusal: %+v, want a retry in %v with 40 free", f, 2*minPrefixRetry)
	}
	jobs, _ = drain(t, n, retry)
	single, ok = find(jobs, isAssign)
	if !ok || single.Action.Prefixes {
		t.Fatalf("after the second refusal: %+v, want single addresses again", jobs)
	}
	n.Step(retry, ActionResult{JobID: single.ID, Blocks: []netip.Prefix{netip.MustParsePrefix("10.0.0.41/32")}})
	drain(t, n, retry)
	later := retry.Add(2 * minPrefixRetry)
	n.Step(later, AddRequest{ID: 3, Key: ipam.Key{Network: "n", ContainerID: "c3", IfName: "eth0"}, Pod: ipam.Pod{Namespace: "d", Name: "p3"}})
	jobs, _ = drain(t, n, later)
	third, ok := find(jobs, isAssign)
	if !ok || !third.Action.Prefixes {
		t.Fatalf("after the second backoff: %+v, want a prefix", jobs)
	}
	n.Step(later, ActionResult{JobID: third.ID, Blocks: []netip.Prefix{netip.MustParsePrefix("10.0.0.48/28")}})
	rd = n.Ready()
	if n.View(later).PrefixFallback != nil {
		t.Error("a prefix was granted but the fallback goes on")
	}
	if noticeText(rd.Notices, "SubnetFragmentationCleared") == "" {
		t.Errorf("no Event saying prefixes work again; notices %+v", rd.Notices)
	}
	// The free single addresses go back to EC2 (those pods hold stay).
	rel, ok := find(rd.Jobs, func(j Job) bool { return j.Kind == JobAction && j.Action.Kind == ipam.ReleaseBlocks })
	if !ok || len(rel.Action.Blocks) < 14 {
		t.Errorf("after the fallback: %+v, want the free single addresses released", rd.Jobs)
	}
	for _, b := range rel.Action.Blocks {
		if b.Bits() != 32 {
			t.Errorf("released %s, a prefix", b)
		}
	}
}

// A pod that waits while the subnet is fragmented and single addresses
// do not come either is told subnet_fragmented, with the count and fix.
func TestPodWaitingOnAFragmentedSubnetIsToldWhy(t *testing.T) {
	cfg := fragConfig()
	n, err := New(cfg, Boot{CheckpointMissing: true, ENIs: []ENIInfo{primaryENI()}}, t0)
	if err != nil {
		t.Fatal(err)
	}
	jobs, _ := drain(t, n, t0)
	assign, _ := find(jobs, isAssign)
	n.Step(t0, ActionResult{JobID: assign.ID, Err: errFragmented, SubnetFree: 7})
	e := n.explain(ipam.Pod{Namespace: "d", Name: "p"}, t0, 0)
	if e.Reason != ReasonSubnetFragmented || !strings.Contains(e.Detail, "7 free addresses") || !strings.Contains(e.Detail, "create-subnet-cidr-reservation") {
		t.Errorf("explain = %s: %s; want subnet_fragmented with the free count and the fix", e.Reason, e.Detail)
	}
}

func noticeText(ns []Notice, reason string) string {
	for _, x := range ns {
		if x.Reason == reason {
			return x.Message
		}
	}
	return ""
}

func replyTo(rs []Reply, id uint64) (Reply, bool) {
	for _, r := range rs {
		if r.ID == id {
			return r, true
		}
	}
	return Reply{}, false
}

// With subnet discovery, once the backoff passes the prefixes the pool
// needs are asked for on a new ENI (which the executor places in the next
// eligible subnet), not on the fragmented subnet's ENI again.
func TestFragmentedSubnetTriesTheNextSubnetWithDiscovery(t *testing.T) {
	cfg := fragConfig()
	cfg.SubnetDiscovery = true
	n, err := New(cfg, Boot{CheckpointMissing: true, ENIs: []ENIInfo{primaryENI()}, Devices: []int{0}}, t0)
	if err != nil {
		t.Fatal(err)
	}
	jobs, _ := drain(t, n, t0)
	assign, _ := find(jobs, isAssign)
	n.Step(t0, ActionResult{JobID: assign.ID, Err: errFragmented, SubnetFree: 30})
	jobs, _ = drain(t, n, t0)
	single, ok := find(jobs, isAssign)
	if !ok || single.Action.Prefixes {
		t.Fatalf("fallback: %+v, want single addresses", jobs)
	}
	var ips []netip.Prefix
	for i := range single.Action.Count {
		ips = append(ips, netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 0, 0, byte(20 + i)}), 32))
	}
	n.Step(t0, ActionResult{JobID: single.ID, Blocks: ips})
	drain(t, n, t0)
	retry := t0.Add(minPrefixRetry)
	n.Step(retry, AddRequest{ID: 1, Key: ipam.Key{Network: "n", ContainerID: "c1", IfName: "eth0"}, Pod: ipam.Pod{Namespace: "d", Name: "p1"}})
	jobs, _ = drain(t, n, retry)
	if a, ok := find(jobs, isAssign); ok && a.Action.Prefixes {
		t.Errorf("prefix asked of the fragmented subnet's ENI again: %s", a.Action)
	}
	at, ok := find(jobs, isAttach)
	if !ok || !at.Action.Prefixes || at.Device != 1 {
		t.Fatalf("after the backoff: %+v, want a new ENI with prefixes at device 1", jobs)
	}
	// EC2 places it in another subnet and grants the prefix: fallback over.
	n.Step(retry, ActionResult{JobID: at.ID, ENIID: "eni-2", AttachmentID: "att-2", DeleteOnTermination: true, SubnetID: "subnet-cni"})
	if f := n.View(retry).PrefixFallback; f != nil {
		t.Errorf("prefix granted in subnet-cni, yet the fallback goes on: %+v", f)
	}
}

// Found by the simulation (prefixes on a fragmented subnet, then a
// restart with an older checkpoint): an ENI full of single addresses
// from a fallback, a pod the checkpoint lost quarantined. Releasing the
// free single addresses is held while the quarantine lasts, so their
// slots stay taken: the pool must not ask EC2 for prefixes on that ENI
// (PrivateIpAddressLimitExceeded, again and again) but grow elsewhere.
func TestHeldReleasesKeepTheirSlotsWhenPlanningGrowth(t *testing.T) {
	cfg := fragConfig()
	cfg.Limits.IPv4PerENI = 5
	eni := primaryENI("10.0.0.10/32", "10.0.0.11/32", "10.0.0.12/32", "10.0.0.13/32")
	n, err := New(cfg, Boot{CheckpointMissing: true, ENIs: []ENIInfo{eni}, Routed: []Route{{Addr: netip.MustParseAddr("10.0.0.10")}}}, t0)
	if err != nil {
		t.Fatal(err)
	}
	jobs, _ := drain(t, n, t0)
	for _, j := range jobs {
		if isAssign(j) && j.Action.ENIID == eni.ID {
			t.Fatalf("planned %s while its 4 slots hold single addresses that cannot be released during the quarantine", j.Action)
		}
	}
	if _, ok := find(jobs, isAttach); !ok {
		t.Errorf("jobs %+v: want an ENI attached for the prefixes the full one cannot take", jobs)
	}
}

// Found by the simulation (seed 1669 of 2000, I3): the same after a
// restart, when shrinking waits a cooldown for the demand to be heard:
// the free single addresses a fallback left cannot go yet, so the pool
// must not plan a prefix into their slots (PrivateIpAddressLimitExceeded,
// a mutating call a restart with no pod change must not make).
func TestSingleAddressesKeepTheirSlotsWhileShrinkingWaitsAfterABoot(t *testing.T) {
	cfg := fragConfig()
	cfg.Limits.IPv4PerENI = 5
	cfg.Plan.WarmPrefixTarget = 2
	eni := primaryENI("10.0.0.16/28", "10.0.0.80/28", "10.0.0.60/32", "10.0.0.75/32")
	ck := checkpoint.State{ReleasesKnown: true, Entries: []checkpoint.Entry{
		{Key: ipam.Key{Network: "n", ContainerID: "a", IfName: "eth0"}, Addr: netip.MustParseAddr("10.0.0.16"), AssignedAt: t0.Add(-time.Hour)},
	}}
	n, err := New(cfg, Boot{Checkpoint: ck, ENIs: []ENIInfo{eni}, Routed: []Route{{Addr: netip.MustParseAddr("10.0.0.16")}}}, t0)
	if err != nil {
		t.Fatal(err)
	}
	jobs, _ := drain(t, n, t0)
	for _, j := range jobs {
		if isAssign(j) && j.Action.ENIID == eni.ID {
			t.Fatalf("planned %s at boot, while its 4 slots hold 2 prefixes and 2 single addresses that may not be released yet", j.Action)
		}
	}
}
