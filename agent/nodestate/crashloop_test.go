package nodestate

import (
	"strings"
	"testing"
	"time"

	"github.com/vpcnet/vpcnet/ipam"
)

// fullOfGonePods is a node at its ENI limit whose three pod addresses are
// all held for pods the runtime deleted while no DEL reached the agent:
// the host routes none of them, and no CNI GC comes.
func fullOfGonePods(t *testing.T) (*disk, ENIInfo) {
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
	for i := range 3 {
		n.Step(t0, AddRequest{ID: uint64(i + 1), Key: podKey(i)})
		if _, rs := d.settle(n, t0); len(rs) != 1 || rs[0].Err != nil {
			t.Fatalf("Add %d: %+v", i, rs)
		}
	}
	return d, eni
}

func bootAtLimit(t *testing.T, d *disk, eni ENIInfo, now time.Time) *Node {
	t.Helper()
	cfg := testConfig()
	cfg.Limits = ipam.Limits{MaxENIs: 1, IPv4PerENI: 4}
	n, err := New(cfg, Boot{Checkpoint: d.read(), ENIs: []ENIInfo{eni}}, now)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// Issue 25, "a crash loop without the runtime's CNI GC": with vpcnetd
// killed every few seconds, the reclaim clock started again at every
// boot, addresses held for pods the host no longer had were never
// reclaimed, and no ADD succeeded until the restarts stopped. The clock
// survives restarts: the pool comes back within VPCNET_RECLAIM_AFTER and
// a cooldown, restarts or not.
func TestACrashLoopStillReclaimsAddressesOfPodsTheHostNoLongerHas(t *testing.T) {
	d, eni := fullOfGonePods(t)
	const life = 5 * time.Second // killed 5 s after each start
	cfg := testConfig()
	start := t0.Add(time.Minute)
	for boot := start; boot.Before(start.Add(10 * time.Minute)); boot = boot.Add(life) {
		n := bootAtLimit(t, d, eni, boot)
		d.settle(n, boot)
		n.Step(boot, AddRequest{ID: 100, Key: podKey(100)})
		for now := boot; now.Before(boot.Add(life)); {
			_, rs := d.settle(n, now)
			for _, r := range rs {
				if r.ID == 100 && r.Err == nil {
					if took, limit := now.Sub(start), cfg.ReclaimAfter+cfg.Cooldown+life; took > limit {
						t.Fatalf("a new pod got an address %s into the crash loop; want within %s (VPCNET_RECLAIM_AFTER, a cooldown and one life)", took, limit)
					}
					return
				}
			}
			now = n.Ready().Wake
			if now.IsZero() {
				break
			}
			n.Step(now, Tick{})
		}
	}
	t.Fatal("no Add succeeded in 10 minutes of restarts every 5 s: the addresses held for deleted pods were never reclaimed")
}

// The pool-full error says when the addresses are held for pods the host
// no longer has, rather than only that the instance is out of ENIs.
func TestThePoolFullErrorSaysAddressesAreHeldForPodsTheHostNoLongerHas(t *testing.T) {
	d, eni := fullOfGonePods(t)
	boot := t0.Add(time.Minute)
	n := bootAtLimit(t, d, eni, boot)
	d.settle(n, boot)
	at := boot.Add(15 * time.Second)
	n.Step(at, AddRequest{ID: 100, Key: podKey(100)})
	d.settle(n, at)
	end := at.Add(testConfig().AddWait)
	n.Step(end, Tick{})
	_, rs := d.settle(n, end)
	r, ok := replyTo(rs, 100)
	if !ok || r.Err == nil {
		t.Fatalf("Add answered %+v; want it to fail after waiting", rs)
	}
	if msg := r.Err.Error(); !strings.Contains(msg, "3 address(es) are held for pods the host no longer has") {
		t.Fatalf("pool-full error %q does not say the addresses are held for pods the host no longer has", msg)
	}
}
