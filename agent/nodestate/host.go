package nodestate

import (
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"time"

	"github.com/vpcnet/vpcnet/checkpoint"
	"github.com/vpcnet/vpcnet/ipam"
)

// quietAfterDel: the plugin's DEL releases the address before it unwires
// the pod, so a just-released address may still be routed for a moment.
// Within this window its quarantine is expected and logged quietly.
const quietAfterDel = time.Minute

// hostView is what the host last said about live pods: the first truth
// about them.
type hostView struct {
	// ok says the last read of the pod routes succeeded; hold says why
	// nothing may be released now, or "".
	ok   bool
	hold string
	// routed are the addresses the host routes to pods, last read.
	routed map[netip.Addr]bool
	// quarantined are routed addresses the checkpoint does not know: held
	// under a synthetic key so nobody gets them, and while any exist,
	// nothing is released.
	quarantined map[netip.Addr]bool
	// unrouted records since when an assignment's address has been
	// missing from the host's pod routes. It is in the checkpoint
	// (Entry.UnroutedSince), so a restart does not start it again.
	unrouted map[ipam.Key]time.Time
	// answered records when each assignment's Add was answered (or the
	// agent started, for restored ones): before that the plugin cannot
	// have wired the pod, so a missing route proves nothing.
	answered map[ipam.Key]time.Time
	// releasedAt are addresses given back by a Del, for quietAfterDel.
	releasedAt map[netip.Addr]time.Time
	// restartCooling are the addresses cooled only because the agent
	// restarted: the planner counts them as available.
	restartCooling map[netip.Addr]bool
	nextReclaim    time.Time
	reclaimed      int
}

func (h *hostView) init() {
	h.routed = make(map[netip.Addr]bool)
	h.quarantined = make(map[netip.Addr]bool)
	h.unrouted = make(map[ipam.Key]time.Time)
	h.releasedAt = make(map[netip.Addr]time.Time)
	h.answered = make(map[ipam.Key]time.Time)
	h.restartCooling = make(map[netip.Addr]bool)
}

func (n *Node) onHost(ev HostResult, now time.Time) {
	n.jobs.done(ev.JobID)
	if ev.Err != nil {
		n.host.ok = false
		n.host.hold = fmt.Sprintf("cannot read the host's pod routes (%v): what live pods use is unknown", ev.Err)
		n.log.Error("host check failed; nothing will be released until it succeeds", "err", ev.Err)
		return
	}
	n.observeRoutes(ev.Routed, now, false)
	n.reclaim(now)
}

// observeRoutes quarantines every routed address the pool does not hold
// for a pod, cooling or not, and lifts the quarantine of addresses no
// longer routed.
func (n *Node) observeRoutes(routed []Route, now time.Time, boot bool) {
	h := &n.host
	h.ok = true
	h.routed = make(map[netip.Addr]bool, len(routed))
	for _, rt := range routed {
		h.routed[rt.Addr] = true
	}
	for _, rt := range routed {
		n.checkOwner(rt, now)
		n.quarantineIfFree(rt.Addr, now, boot)
	}
	// In address order: a seed of the simulation replays its trace, and
	// the pool's cooldowns, line for line.
	for _, ip := range slices.SortedFunc(maps.Keys(h.quarantined), netip.Addr.Compare) {
		if h.routed[ip] {
			continue
		}
		n.pool.Unassign(QuarantineKey(ip), now)
		delete(h.quarantined, ip)
		n.dur.changed() // its release time goes on disk (see state)
		n.log.Info("quarantine lifted: the host no longer routes to the address", "addr", ip.String())
	}
	for ip, at := range h.releasedAt {
		if now.Sub(at) > quietAfterDel {
			delete(h.releasedAt, ip)
		}
	}
	h.hold = ""
	if k := len(h.quarantined); k > 0 {
		h.hold = fmt.Sprintf("%d pod address(es) routed on the host are not in the checkpoint; see /v1/status", k)
	}
}

// checkOwner: when the host routes an address to the veth of another pod
// than the one the pool says holds it, the pool's record is wrong (an
// older checkpoint was restored, and the address has since gone to a new
// pod). The record is kept aside as stale and reported, never released,
// and the address is quarantined for the pod the host shows.
func (n *Node) checkOwner(rt Route, now time.Time) {
	if rt.Link == "" || n.cfg.HostVeth == nil {
		return
	}
	as, held := n.pool.LookupAddr(rt.Addr)
	if !held || IsQuarantine(as.Key) || as.Pod.Name == "" || n.dur.releasing[as.Key] {
		return
	}
	if n.cfg.HostVeth(as.Pod) == rt.Link {
		return
	}
	n.pool.Unassign(as.Key, now)
	delete(n.host.answered, as.Key)
	n.stale = append(n.stale, checkpoint.Entry{Key: as.Key, Addr: as.Addr, Pod: as.Pod, AssignedAt: as.AssignedAt})
	n.dur.changed()
	n.log.Warn("checkpoint says a pod holds an address the host routes to another pod's veth: the record is kept aside as stale and the address held for the pod the host shows",
		"addr", rt.Addr.String(), "key", as.Key.String(), "pod", as.Pod.String(), "routedTo", rt.Link)
}

// quarantineIfFree holds ip for the host if the pool has it free or
// cooling: a pod uses it, whatever the checkpoint says.
func (n *Node) quarantineIfFree(ip netip.Addr, now time.Time, boot bool) {
	h := &n.host
	if h.quarantined[ip] {
		return
	}
	if _, held := n.pool.LookupAddr(ip); held {
		return
	}
	if _, err := n.pool.Seize(QuarantineKey(ip), ip, now); err != nil {
		return // not on any ENI of the pool: not ours to give
	}
	h.quarantined[ip] = true
	delete(h.restartCooling, ip)
	if at, ok := h.releasedAt[ip]; ok && now.Sub(at) <= quietAfterDel {
		n.log.Debug("released pod address still routed while its DEL finishes: held until the route goes", "addr", ip.String())
		return
	}
	n.log.Warn("host routes a pod address the checkpoint does not know: quarantined, and nothing is released until the route is gone",
		"addr", ip.String(), "atStart", boot)
	n.out.Notices = append(n.out.Notices, Notice{Warning: true, Reason: "AddressQuarantined",
		Message: fmt.Sprintf("address %s is routed to a pod on this node but vpcnetd's checkpoint has no record of it (an older or lost checkpoint): it is held for that pod and nothing is released until its route is gone", ip)})
}

// reclaim releases assignments whose pod has been gone from the host for
// ReclaimAfter: the runtime deleted the pod while the agent was down or
// its DEL never arrived, and CNI GC may never come.
func (n *Node) reclaim(now time.Time) {
	h := &n.host
	h.nextReclaim = time.Time{}
	if n.cfg.ReclaimAfter <= 0 || !h.ok {
		return
	}
	for _, as := range n.pool.Assignments() {
		if IsQuarantine(as.Key) || n.dur.releasing[as.Key] {
			continue
		}
		if h.routed[as.Addr] {
			if _, was := h.unrouted[as.Key]; was {
				delete(h.unrouted, as.Key)
				n.dur.changed()
			}
			continue
		}
		answered, ok := h.answered[as.Key]
		if !ok || n.replying(as.Key) {
			continue // its Add is still in flight
		}
		since, seen := h.unrouted[as.Key]
		if !seen {
			h.unrouted[as.Key] = now
			since = now
			n.dur.changed() // the clock goes on disk (see unrouted)
		}
		// Both the answer to its Add and its absence must be older than
		// the grace: a pod being wired is young.
		due := maxTime(since, answered).Add(n.cfg.ReclaimAfter)
		if now.Before(due) {
			if h.nextReclaim.IsZero() || due.Before(h.nextReclaim) {
				h.nextReclaim = due
			}
			continue
		}
		delete(h.unrouted, as.Key)
		h.reclaimed++
		n.log.Warn("released: the pod is gone from the host (no route to its address) and no DEL came; the runtime deleted it while the agent could not hear",
			"key", as.Key.String(), "pod", as.Pod.String(), "addr", as.Addr.String(), "missingSince", since)
		n.release(as.Key, "reclaimed", nil)
	}
	for k := range h.unrouted {
		if _, held := n.pool.Lookup(k); !held {
			delete(h.unrouted, k)
		}
	}
	for k := range h.answered {
		if _, held := n.pool.Lookup(k); !held {
			delete(h.answered, k)
		}
	}
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// answeredNow records that key's Add was answered at now: before the
// plugin wires the pod its route is missing for good reason, so the
// reclaim clock starts again from here (and on disk with the next write).
func (n *Node) answeredNow(key ipam.Key, now time.Time) {
	n.host.answered[key] = now
	if _, was := n.host.unrouted[key]; was {
		delete(n.host.unrouted, key)
		n.dur.changed()
	}
}

// heldForGone counts the assignments whose address the host has not
// routed for a while (pods deleted while no DEL reached the agent), and
// when the first of them is reclaimed. A while is longer than an Add
// may wait: a pod being wired is missing only for moments.
func (n *Node) heldForGone(now time.Time) (int, time.Time) {
	var first time.Time
	k := 0
	for key, since := range n.host.unrouted {
		if _, held := n.pool.Lookup(key); !held || n.dur.releasing[key] || now.Sub(since) < n.cfg.AddWait {
			continue
		}
		k++
		due := maxTime(since, n.host.answered[key]).Add(n.cfg.ReclaimAfter)
		if first.IsZero() || due.Before(first) {
			first = due
		}
	}
	return k, first
}
