package nodestate

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/vpcnet/vpcnet/checkpoint"
	"github.com/vpcnet/vpcnet/ipam"
)

// disk is a checkpoint file for the machine: every Persist is encoded
// and acknowledged, and a restart decodes what was last written.
type disk struct {
	t    *testing.T
	data []byte
}

// settle acknowledges n's writes until none is wanted, keeping the last,
// and returns the jobs and replies meanwhile.
func (d *disk) settle(n *Node, now time.Time) ([]Job, []Reply) {
	d.t.Helper()
	var jobs []Job
	var replies []Reply
	for range 10 {
		rd := n.Ready()
		jobs = append(jobs, rd.Jobs...)
		replies = append(replies, rd.Replies...)
		if rd.Persist == nil {
			return jobs, replies
		}
		data, err := checkpoint.Encode(rd.Persist.State)
		if err != nil {
			d.t.Fatalf("checkpoint not written: %v", err)
		}
		d.data = data
		n.Step(now, Persisted{Version: rd.Persist.Version})
	}
	d.t.Fatal("writes never settle")
	return nil, nil
}

func (d *disk) read() checkpoint.State {
	d.t.Helper()
	s, err := checkpoint.Decode(d.data)
	if err != nil {
		d.t.Fatal(err)
	}
	return s
}

func podKey(i int) ipam.Key {
	return ipam.Key{Network: "n", ContainerID: fmt.Sprint(i), IfName: "eth0"}
}

// atLimit is a node whose only ENI (its instance allows one) has three
// pod addresses: pod 0 holds one since t0, and pod 1 held one until it
// was deleted at releasedAt. It returns the node's checkpoint and its
// ENI as EC2 shows it.
func atLimit(t *testing.T, releasedAt time.Time) (*disk, ENIInfo, netip.Addr, netip.Addr) {
	t.Helper()
	cfg := testConfig()
	cfg.Limits = ipam.Limits{MaxENIs: 1, IPv4PerENI: 4}
	eni := primaryENI("10.0.0.5/32", "10.0.0.6/32", "10.0.0.7/32")
	n, err := New(cfg, Boot{CheckpointMissing: true, ENIs: []ENIInfo{eni}}, t0)
	if err != nil {
		t.Fatal(err)
	}
	d := &disk{t: t}
	d.settle(n, t0)
	var addrs []netip.Addr
	for i := range 2 {
		n.Step(t0, AddRequest{ID: uint64(i + 1), Key: podKey(i)})
		_, rs := d.settle(n, t0)
		if len(rs) != 1 || rs[0].Err != nil {
			t.Fatalf("Add %d: %+v", i, rs)
		}
		addrs = append(addrs, rs[0].Assignment.Addr)
	}
	n.Step(releasedAt, DelRequest{ID: 3, Key: podKey(1)})
	d.settle(n, releasedAt)
	return d, eni, addrs[0], addrs[1]
}

// restart boots a new machine at now from d, the host routing live.
func restart(t *testing.T, d *disk, eni ENIInfo, live netip.Addr, now time.Time) *Node {
	t.Helper()
	cfg := testConfig()
	cfg.Limits = ipam.Limits{MaxENIs: 1, IPv4PerENI: 4}
	n, err := New(cfg, Boot{Checkpoint: d.read(), ENIs: []ENIInfo{eni}, Routed: []Route{{Addr: live}}}, now)
	if err != nil {
		t.Fatal(err)
	}
	d.settle(n, now)
	return n
}

// Issue 25, "a restart makes new pods wait for a whole cooldown": beside
// aws-node on an m5.large at its ENI limit, the first pod after vpcnetd
// restarted waited until 30 s after the agent was ready, since every free
// address cooled (release times were not recorded). An address released
// long before the restart is free at once.
func TestARestartAtTheENILimitServesTheNextPodAtOnce(t *testing.T) {
	d, eni, live, _ := atLimit(t, t0.Add(time.Minute))
	boot := t0.Add(10 * time.Minute)
	n := restart(t, d, eni, live, boot)
	n.Step(boot, AddRequest{ID: 10, Key: podKey(10)})
	_, rs := d.settle(n, boot)
	if len(rs) != 1 || rs[0].Err != nil || !rs[0].Assignment.Addr.IsValid() {
		t.Fatalf("the first Add after a restart got %+v; want an address at once (nothing was released within the cooldown)", rs)
	}
}

// An address released just before the restart still cools for what is
// left of its own cooldown, and no longer.
func TestAnAddressReleasedJustBeforeARestartCoolsOnlyForTheRestOfItsCooldown(t *testing.T) {
	released := t0.Add(time.Minute)
	d, eni, live, freed := atLimit(t, released)
	boot := released.Add(25 * time.Second)
	n := restart(t, d, eni, live, boot)
	// The address never used is free; the one just released is not.
	n.Step(boot, AddRequest{ID: 10, Key: podKey(10)})
	_, rs := d.settle(n, boot)
	if len(rs) != 1 || rs[0].Err != nil || rs[0].Assignment.Addr == freed {
		t.Fatalf("first Add after the restart got %+v; want the address not released lately (%s cools)", rs, freed)
	}
	n.Step(boot, AddRequest{ID: 11, Key: podKey(11)})
	for now := boot; now.Before(boot.Add(testConfig().AddWait)); {
		_, rs = d.settle(n, now)
		if len(rs) > 0 {
			if want := released.Add(testConfig().Cooldown); !now.Equal(want) || rs[0].Err != nil || rs[0].Assignment.Addr != freed {
				t.Fatalf("the waiting Add got %+v %s after the restart; want %s at %s, when the cooldown from its release ends", rs, now.Sub(boot), freed, want.Sub(boot))
			}
			return
		}
		now = n.Ready().Wake
		n.Step(now, Tick{})
	}
	t.Fatalf("the waiting Add was not answered within %s of the restart", testConfig().AddWait)
}

// Issue 24: after a restart from a checkpoint that does not say when its
// addresses were freed (aws-node's ipam.json on a switch-over, or an older
// vpcnet's), every free address cools for a whole cooldown. The planner
// counted them as free so the restart would not grow the pool, and so an
// Add found nothing to take and nothing coming: the agent said ready
// while every Add failed for 30 s. An Add that finds nothing free grows
// the pool at once, and is answered as soon as EC2 delivers.
func TestAnAddAfterARestartThatCooledEveryFreeAddressIsServedWithoutWaitingForTheCooldown(t *testing.T) {
	cfg := testConfig()
	cfg.Limits = ipam.Limits{MaxENIs: 2, IPv4PerENI: 6}
	live := netip.MustParseAddr("10.0.0.5")
	ck := checkpoint.State{Entries: []checkpoint.Entry{{Key: podKey(0), Addr: live,
		Pod: ipam.Pod{Namespace: "default", Name: "p0"}, AssignedAt: t0.Add(-time.Hour)}}}
	boot := t0.Add(2 * time.Hour)
	eni := primaryENI("10.0.0.5/32", "10.0.0.6/32", "10.0.0.7/32", "10.0.0.8/32", "10.0.0.9/32")
	second := ENIInfo{ID: "eni-s", DeviceIndex: 1, SubnetID: "subnet-a", SubnetCIDR: netip.MustParsePrefix("10.0.0.0/24"),
		PrimaryIP: netip.MustParseAddr("10.0.0.20"), AttachmentID: "att-s", DeleteOnTermination: true, CreatedAt: t0.Add(-time.Hour),
		Blocks: []netip.Prefix{netip.MustParsePrefix("10.0.0.21/32"), netip.MustParsePrefix("10.0.0.22/32")}}
	n, err := New(cfg, Boot{Checkpoint: ck, ENIs: []ENIInfo{eni, second}, Routed: []Route{{Addr: live}}}, boot)
	if err != nil {
		t.Fatal(err)
	}
	jobs, _ := drain(t, n, boot)
	if g, ok := find(jobs, func(j Job) bool { return j.Kind == JobAction && isGrowth(j.Action) }); ok {
		t.Fatalf("the restart alone grows the pool: %s", g.Action)
	}
	if st := n.View(boot).Stats; st.Free != 0 || st.Cooling == 0 {
		t.Fatalf("after the restart %d addresses are free and %d cool; want every free address cooling", st.Free, st.Cooling)
	}

	n.Step(boot, AddRequest{ID: 1, Key: podKey(1)})
	jobs, replies := drain(t, n, boot)
	grow, ok := find(jobs, func(j Job) bool { return j.Kind == JobAction && j.Action.Kind == ipam.AssignBlocks })
	if !ok || len(replies) != 0 {
		t.Fatalf("an Add after the restart got %+v and the jobs %+v; want EC2 asked for addresses at once", replies, jobs)
	}
	got := netip.MustParsePrefix("10.0.0.23/32")
	delivered := boot.Add(time.Second)
	n.Step(delivered, ActionResult{JobID: grow.ID, Blocks: []netip.Prefix{got}})
	_, replies = drain(t, n, delivered)
	if len(replies) != 1 || replies[0].Err != nil || replies[0].Assignment.Addr != got.Addr() {
		t.Fatalf("once EC2 delivered %s the waiting Add got %+v; want that address", got, replies)
	}
}

// releasingSurplus is a node an hour after boot with four free addresses
// and a warm target of one: the jobs it hands out release three.
func releasingSurplus(t *testing.T) (n *Node, eni ENIInfo, now time.Time, jobs []Job) {
	t.Helper()
	cfg := testConfig()
	cfg.Limits.IPv4PerENI = 5
	cfg.Plan.WarmENITarget, cfg.Plan.WarmIPTarget = 0, 1
	eni = primaryENI("10.0.0.10/32", "10.0.0.11/32", "10.0.0.12/32", "10.0.0.13/32")
	n, err := New(cfg, Boot{CheckpointMissing: true, ENIs: []ENIInfo{eni}}, t0)
	if err != nil {
		t.Fatal(err)
	}
	now = t0.Add(time.Hour)
	n.Step(now, Tick{})
	jobs, _ = drain(t, n, now)
	return n, eni, now, jobs
}

// Found by the simulation (prefixes-fragmented, seed 749 of 2000, I6): a
// resync that read EC2 before a release finished still showed the block
// being released; it was brought back into the pool, EC2 then took it,
// and a pod was given an address no ENI had. A read older than the
// release does not bring its blocks back.
func TestAResyncOlderThanAReleaseDoesNotBringTheBlockBack(t *testing.T) {
	n, eni, now, jobs := releasingSurplus(t)
	rel, ok := find(jobs, func(j Job) bool { return j.Kind == JobAction && j.Action.Kind == ipam.ReleaseBlocks })
	if !ok {
		t.Fatalf("jobs %+v: want a release of the surplus addresses", jobs)
	}
	// A resync that read EC2 before the release ran answers first:
	// while the release runs, no pod may be given what it gives back.
	n.Step(now, ResyncResult{JobID: rel.ID - 1, ENIs: []ENIInfo{eni}})
	if st := n.pool.Stats(now).ENIs[0]; st.Free != 4-len(rel.Action.Blocks) {
		t.Fatalf("while %v are released, the pool has %+v: the stale read brought them back for pods to take", rel.Action.Blocks, st.Blocks)
	}
}

// EC2 may have done a release it answered with an error (a 5xx after
// acting, an answer lost on the way): its addresses stay out of the pool
// until EC2 is read again, and come back if that read still shows them.
// Before, they went back at once, and the next pod could be given an
// address on no ENI (the simulation's I6, seed 5233).
func TestAFailedReleaseKeepsItsAddressesOutUntilEC2IsReadAgain(t *testing.T) {
	n, eni, now, jobs := releasingSurplus(t)
	rel, ok := find(jobs, func(j Job) bool { return j.Kind == JobAction && j.Action.Kind == ipam.ReleaseBlocks })
	stale, ok2 := find(jobs, func(j Job) bool { return j.Kind == JobResync })
	if !ok || !ok2 {
		t.Fatalf("jobs %+v: want a release of the surplus addresses and a resync", jobs)
	}
	free := func() int { return n.pool.Stats(now).ENIs[0].Free }
	kept := free()
	n.Step(now, ActionResult{JobID: rel.ID, Err: errors.New("unassign: InternalError")})
	drain(t, n, now)
	if got := free(); got != kept {
		t.Fatalf("after a failed release of %v the pool has %d free, want %d: EC2 may have taken them", rel.Action.Blocks, got, kept)
	}
	// A read that began before the failure proves nothing.
	n.Step(now, ResyncResult{JobID: stale.ID, ENIs: []ENIInfo{eni}})
	if got := free(); got != kept {
		t.Fatalf("a read older than the failed release brought its addresses back: %d free, want %d", got, kept)
	}
	// A read from now on decides: EC2 still shows them, so they are back.
	var resync Job
	for i := 0; !ok || resync.Kind != JobResync; i++ {
		if i == 10 {
			t.Fatalf("no EC2 read by %s after a failed release at %s", now, t0.Add(time.Hour))
		}
		now = n.Ready().Wake
		n.Step(now, Tick{})
		jobs, _ = drain(t, n, now)
		resync, ok = find(jobs, func(j Job) bool { return j.Kind == JobResync })
	}
	if now.Sub(t0.Add(time.Hour)) > time.Minute {
		t.Errorf("EC2 read %s after the failed release: want it soon", now.Sub(t0.Add(time.Hour)))
	}
	n.Step(now, ResyncResult{JobID: resync.ID, ENIs: []ENIInfo{eni}})
	// Back in the pool, they are the surplus again: released once more.
	jobs, _ = drain(t, n, now)
	again, ok := find(jobs, func(j Job) bool { return j.Kind == JobAction && j.Action.Kind == ipam.ReleaseBlocks })
	if !ok || !slices.Equal(again.Action.Blocks, rel.Action.Blocks) {
		t.Fatalf("after EC2 showed %v still assigned: jobs %+v, want them back in the pool and released again", rel.Action.Blocks, jobs)
	}
}
