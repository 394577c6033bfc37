package nodestate

import (
	"errors"
	"slices"
	"time"

	"github.com/vpcnet/vpcnet/checkpoint"
	"github.com/vpcnet/vpcnet/ipam"
)

// waiter is an Add blocked for lack of a free address.
type waiter struct {
	id       uint64
	key      ipam.Key
	pod      ipam.Pod
	deadline time.Time
	// judgeAt is when the Add fails if no address is on its way (see
	// hopelessWait); judging, once it has come: from then on it is
	// judged at every step, not woken for, since what ends the hope (a
	// refusal from EC2, a cordon) comes as an event.
	judgeAt time.Time
	judging bool
	// since is when the Add began waiting; heldFor how much of a budget
	// failover (BudgetFailover) its deadline has been pushed back by.
	since   time.Time
	heldFor time.Duration
}

// limit is the latest w is answered: AddWait and AnswerSlack after it
// came (its deadline before any failover moved it, plus AnswerSlack).
func (w waiter) limit() time.Time { return w.deadline.Add(AnswerSlack - w.heldFor) }

// hopelessWait is how long an Add waits when no address is on its way
// (the subnet is out of addresses, the instance out of ENIs, the node
// cordoned, EC2 refusing the node's role): the time every Add waited
// before AddWait grew, so the reason reaches kubelet as soon as before.
// An Add whose address is on its way (an ENI attaching, addresses being
// assigned, a grant of the cluster's EC2 budget, a cooldown ending)
// waits up to AddWait instead: failing it makes kubelet tear the
// sandbox down and try again only after its backoff (10 to 15 s), so
// the pod starts that much after its address came.
const hopelessWait = 10 * time.Second

// AnswerSlack is how long past AddWait an Add may still be answered: the
// plugin waits that and 5 s more (pluginTimeoutSlack in package agent),
// 90 s in all with the default AddWait, inside the 2 min kubelet gives
// the runtime to make a sandbox (runtimeRequestTimeout's default). Both
// ways an Add waits past its deadline stay inside it: a budget failover
// (failoverWait), and addresses EC2 is already making for the node
// (arriving), which would otherwise come moments after the Add failed,
// and its pod would start only after kubelet's backoff (10 to 15 s) and
// a new sandbox.
const AnswerSlack = 25 * time.Second

// failoverWait is the most an Add's deadline is pushed back while the
// cluster's budget controller fails over (BudgetFailover): the Lease's
// takeover, 15 to 24 s with the controller's defaults, and within
// AnswerSlack, so the plugin still hears the answer.
const failoverWait = 20 * time.Second

// BudgetFailover says whether the node's budget client holds the node's
// EC2 calls for the budget controller's next leader (the leader died,
// and its standby takes the Lease over). While it does, waiting Adds'
// deadlines stand still, up to failoverWait: their addresses come that
// much later, and an Add failed for it costs the pod kubelet's backoff
// (10 to 15 s) on top, after the address came.
type BudgetFailover struct {
	Holding bool
}

// requests are the Adds waiting for an address, and the demand of those
// that gave up: kubelet retries a failed ADD, so for DemandMemory it still
// counts, and a burst cannot make the pool detach and re-attach.
//
// requests keeps only that state and its rules (deadlines, the failover
// hold, remembered demand); what an Add or a Del does to the pool, the
// checkpoint and the host is the Node's (onAdd, onDel, release, ...).
type requests struct {
	waiters []waiter
	demand  map[ipam.Key]time.Time
	// heldSince is when the budget controller began failing over;
	// zero while it is not (BudgetFailover).
	heldSince time.Time
}

func (r *requests) init() { r.demand = make(map[ipam.Key]time.Time) }

func (r *requests) waiting() int { return len(r.waiters) }

// since is when the longest-waiting Add began waiting; zero if none.
// Waiters are kept in the order they came (served oldest first), so it
// is the first one's: Summary asks it after every event.
func (r *requests) since() time.Time {
	if len(r.waiters) == 0 {
		return time.Time{}
	}
	return r.waiters[0].since
}

// demandCount is waiting Adds plus remembered ones, for the planner.
func (r *requests) demandCount() int { return len(r.waiters) + len(r.demand) }

// deadline is when w fails at the latest: while the budget controller
// fails over, the deadline stands still until failoverWait is used up.
func (r *requests) deadline(w waiter) time.Time {
	if r.heldSince.IsZero() {
		return w.deadline
	}
	return w.deadline.Add(failoverWait - w.heldFor)
}

// expiry is when w fails: its deadline, or its limit if the addresses
// EC2 is making for the node now will serve it (served; see arriving).
func (r *requests) expiry(w waiter, served bool) time.Time {
	if served {
		return maxTime(r.deadline(w), w.limit())
	}
	return r.deadline(w)
}

// failover starts or ends the budget controller's failover: at its end
// each waiting Add's deadline moves by how long it waited through it.
func (r *requests) failover(ev BudgetFailover, now time.Time) {
	switch {
	case ev.Holding && r.heldSince.IsZero():
		r.heldSince = now
	case !ev.Holding && !r.heldSince.IsZero():
		for i := range r.waiters {
			w := &r.waiters[i]
			d := min(now.Sub(maxTime(r.heldSince, w.since)), failoverWait-w.heldFor)
			w.deadline, w.heldFor = w.deadline.Add(d), w.heldFor+d
		}
		r.heldSince = time.Time{}
	}
}

// nextDeadline is when a waiting Add or a remembered demand next comes
// due; the oldest arriving waiting Adds wait for the addresses on their
// way (arriving).
func (r *requests) nextDeadline(arriving int) time.Time {
	var t time.Time
	for i, w := range r.waiters {
		if d := r.expiry(w, i < arriving); t.IsZero() || d.Before(t) {
			t = d
		}
		if !w.judging && w.judgeAt.Before(t) {
			t = w.judgeAt
		}
	}
	for _, until := range r.demand {
		if t.IsZero() || until.Before(t) {
			t = until
		}
	}
	return t
}

func (r *requests) expireDemand(now time.Time) {
	for k, until := range r.demand {
		if !now.Before(until) {
			delete(r.demand, k)
		}
	}
}

// cancel drops waiter id; its demand is remembered.
func (r *requests) cancel(id uint64, now time.Time, memory time.Duration) {
	i := slices.IndexFunc(r.waiters, func(w waiter) bool { return w.id == id })
	if i < 0 {
		return
	}
	r.demand[r.waiters[i].key] = now.Add(memory)
	r.waiters = slices.Delete(r.waiters, i, i+1)
}

func (n *Node) onAdd(ev AddRequest, now time.Time) {
	delete(n.reqs.demand, ev.Key)
	if as, ok := n.pool.Lookup(ev.Key); ok && !n.dur.releasing[ev.Key] {
		eni, _ := n.pool.ENI(as.ENIID)
		// Already durable, or on its way: either way the reply waits for
		// the version that holds it, and only then may the plugin wire.
		// A reclaim clock on disk is cleared by that version too: the
		// pod is about to be wired, and after a crash that clock must
		// not make it look long gone.
		key := ev.Key
		if _, was := n.host.unrouted[key]; was {
			delete(n.host.unrouted, key)
			n.dur.changed()
		}
		n.dur.assigned(Reply{ID: ev.ID, Assignment: as, ENI: eni, Existing: true}, func(_ *Reply, ok bool) {
			if ok {
				n.answeredNow(key, n.last)
			}
		})
		return
	}
	if n.dur.releasing[ev.Key] {
		// The runtime never runs two operations on one attachment at once;
		// a new Add during a release is a retry after the Del: fail it so
		// it comes back once the release is durable.
		n.out.Replies = append(n.out.Replies, Reply{ID: ev.ID, Err: errors.New("the attachment's previous address is still being released; retry")})
		return
	}
	if n.tryAssign(ev.ID, ev.Key, ev.Pod, now) {
		return
	}
	n.reqs.waiters = append(n.reqs.waiters, waiter{id: ev.ID, key: ev.Key, pod: ev.Pod,
		deadline: now.Add(n.cfg.AddWait), judgeAt: now.Add(min(hopelessWait, n.cfg.AddWait)), since: now})
	n.burst.waited(now)
}

// tryAssign gives key an address if one is free; the reply waits for the
// checkpoint that records it, and a failed write takes it back.
func (n *Node) tryAssign(id uint64, key ipam.Key, pod ipam.Pod, now time.Time) bool {
	as, err := n.pool.Assign(key, pod, now)
	if err != nil {
		var nf *ipam.NoFreeAddressError
		if !errors.As(err, &nf) {
			n.out.Replies = append(n.out.Replies, Reply{ID: id, Err: err})
			return true
		}
		return false
	}
	if i := n.staleIndex(key); i >= 0 {
		n.log.Warn("stale checkpoint entry replaced: the runtime added the attachment again", "key", key.String())
		n.stale = slices.Delete(n.stale, i, i+1)
	}
	// A stale entry naming this address is disproved: the address is on
	// the node, free, and routed to no pod, so no pod of that entry lives.
	n.stale = slices.DeleteFunc(n.stale, func(e checkpoint.Entry) bool {
		if e.Addr != as.Addr {
			return false
		}
		n.log.Warn("stale checkpoint entry dropped: its address is free on the node and routed to no pod", "key", e.Key.String(), "addr", e.Addr.String())
		return true
	})
	n.dur.changed()
	eni, _ := n.pool.ENI(as.ENIID)
	n.dur.assigned(Reply{ID: id, Assignment: as, ENI: eni}, func(r *Reply, ok bool) {
		if ok {
			n.answeredNow(key, n.last)
			n.log.Info("assigned", "key", key.String(), "pod", pod.String(), "addr", as.Addr.String(), "eni", as.ENIID)
			return
		}
		// Not durable, so not given: the address cools down as if freed,
		// which is the safe side if the write did reach the disk.
		if cur, held := n.pool.Lookup(key); held && cur.Addr == as.Addr {
			n.pool.Unassign(key, n.last)
			n.dur.changed()
		}
	})
	return true
}

// serveWaiters hands free addresses to waiting Adds, oldest first.
func (n *Node) serveWaiters(now time.Time) {
	for len(n.reqs.waiters) > 0 {
		w := n.reqs.waiters[0]
		if !n.tryAssign(w.id, w.key, w.pod, now) {
			return
		}
		n.reqs.waiters = n.reqs.waiters[1:]
	}
}

// arriving counts the addresses EC2 is making for the node now: those of
// ENIs attaching and of granted jobs in flight (JobGrant). No budget
// wait stands between them and the pool, so the Adds they will serve,
// oldest first, wait for them. An Add whose job still waits for the
// budget does not: that wait has no bound known here, and a budget
// failover moves it by its takeover, so an Add held for it without a
// failover and failed with one would lose its place in line.
func (n *Node) arriving() int {
	if len(n.reqs.waiters) == 0 {
		return 0 // no Add to serve: every step asks
	}
	k := n.jobs.brings()
	for _, at := range n.cloud.attaching {
		k += at.action.Brings()
	}
	return k
}

// expireWaiters fails the Adds whose wait is over, each with the reason:
// after AddWait (later for those addresses on their way will serve), or
// after hopelessWait when no address is on its way.
func (n *Node) expireWaiters(now time.Time) {
	var keep []waiter
	var why *NoAddressError // the node's, made once
	arriving := n.arriving()
	for i, w := range n.reqs.waiters {
		hopeless := false
		deadline := n.reqs.expiry(w, i < arriving)
		if !now.Before(w.judgeAt) && now.Before(deadline) {
			w.judging = true
			if why == nil {
				why = n.explain(w.pod, now, 0)
			}
			hopeless = !why.onItsWay()
		}
		if now.Before(deadline) && !hopeless {
			keep = append(keep, w)
			continue
		}
		n.reqs.demand[w.key] = now.Add(n.cfg.DemandMemory)
		e := n.explain(w.pod, now, now.Sub(w.since))
		n.out.Replies = append(n.out.Replies, Reply{ID: w.id, Err: e})
	}
	n.reqs.waiters = keep
}

// onDel takes key out of the checkpoint, and only once that is on disk
// lets the pool free the address, into cooldown. Unknown keys succeed: the
// runtime may repeat a Del, or the agent may have restarted in between.
func (n *Node) onDel(ev DelRequest, now time.Time) {
	n.dropWaiter(ev.Key)
	delete(n.reqs.demand, ev.Key)
	_, held := n.pool.Lookup(ev.Key)
	if !held && n.staleIndex(ev.Key) < 0 {
		n.dur.after(Reply{ID: ev.ID}, nil)
		return
	}
	n.release(ev.Key, "released", func(as ipam.Assignment, ok bool, err error) Reply {
		return Reply{ID: ev.ID, Assignment: as, Released: ok && held, Err: err}
	})
}

func (n *Node) dropWaiter(key ipam.Key) {
	n.reqs.waiters = slices.DeleteFunc(n.reqs.waiters, func(w waiter) bool {
		if w.key == key {
			n.out.Replies = append(n.out.Replies, Reply{ID: w.id, Err: errors.New("the runtime deleted the attachment while its ADD waited for an address")})
			return true
		}
		return false
	})
}

// release drops key from the checkpoint; once durable, the address leaves
// the pool's hands (cooling) and reply builds the answer, if any.
func (n *Node) release(key ipam.Key, why string, reply func(as ipam.Assignment, ok bool, err error) Reply) {
	if n.dur.releasing == nil {
		n.dur.releasing = make(map[ipam.Key]bool)
	}
	n.dur.releasing[key] = true
	n.dur.changed()
	as, _ := n.pool.Lookup(key)
	r := Reply{}
	if reply != nil {
		r = reply(as, false, nil)
	}
	n.dur.after(r, func(out *Reply, ok bool) {
		delete(n.dur.releasing, key)
		if !ok {
			// The key is back in what must be written; the reply carries
			// the write's own error (onPersisted adds it).
			n.dur.changed()
			if reply != nil {
				*out = reply(as, false, nil)
			}
			return
		}
		if i := n.staleIndex(key); i >= 0 {
			n.stale = slices.Delete(n.stale, i, i+1)
		}
		freed, held := n.pool.Unassign(key, n.last)
		if held {
			n.host.releasedAt[freed.Addr] = n.last
			n.log.Info(why, "key", key.String(), "pod", freed.Pod.String(), "addr", freed.Addr.String(), "cooldown", n.cfg.Cooldown.String())
		}
		if reply != nil {
			*out = reply(freed, held, nil)
		}
	})
}

// onGC releases every assignment of the network the runtime no longer
// has, once older than the cooldown: an attachment whose ADD is still in
// flight is not yet in the runtime's list and must not be collected.
func (n *Node) onGC(ev GCRequest, now time.Time) {
	var gone []ipam.Assignment
	for _, as := range n.pool.Assignments() {
		if as.Key.Network != ev.Network || ev.Valid[as.Key] || IsQuarantine(as.Key) || n.dur.releasing[as.Key] || n.replying(as.Key) || now.Sub(as.AssignedAt) < n.cfg.Cooldown {
			continue
		}
		gone = append(gone, as)
	}
	for _, as := range gone {
		n.release(as.Key, "released by GC: the runtime no longer has the attachment", nil)
	}
	n.dur.after(Reply{ID: ev.ID, Gone: gone}, nil)
}
