package nodestate

import (
	"fmt"
	"log/slog"
	"net/netip"
	"slices"
	"time"

	"github.com/vpcnet/vpcnet/checkpoint"
	"github.com/vpcnet/vpcnet/ipam"
)

// QuarantineNetwork marks the synthetic owners of quarantined addresses.
// No CNI network can carry the name: it is not a valid network name.
const QuarantineNetwork = "vpcnet:quarantine"

// QuarantineKey is the synthetic owner of a quarantined address.
func QuarantineKey(addr netip.Addr) ipam.Key {
	return ipam.Key{Network: QuarantineNetwork, ContainerID: addr.String(), IfName: "host-route"}
}

// IsQuarantine says whether k is a quarantine owner.
func IsQuarantine(k ipam.Key) bool { return k.Network == QuarantineNetwork }

// eniMeta is what the machine keeps about an ENI beyond the pool.
type eniMeta struct {
	MAC          string
	AttachmentID string
	DOT          bool
}

// Node is one node's state. Only its owner goroutine calls it.
type Node struct {
	cfg  Config
	log  *slog.Logger
	pool *ipam.Pool
	meta map[string]eniMeta
	// stale are checkpoint entries whose address is on no attached ENI:
	// kept on disk, never released automatically, and reported.
	stale []checkpoint.Entry

	// The machine's parts, each with state and rules of its own:
	// durability (checkpoint versions and the replies that wait for
	// them), requests (waiting Adds, remembered demand), host (routes,
	// quarantine), cloud (what EC2 said beyond the pool). What an event
	// does across them (an Add, a resync, an attach's result, a plan) is
	// the Node's: the files name the subject (requests.go, cloud.go,
	// host.go, plan.go, durable.go), not a type of its own.
	dur   durability
	reqs  requests
	host  hostView
	jobs  jobTable
	cloud cloudView
	burst burst
	// unmanaged are the interfaces attached that are not vpcnet's.
	unmanaged unmanaged
	// frag is the prefix fallback on a fragmented subnet.
	frag fallback
	// urgentJobs are the jobs in flight that pods wait for (markUrgent),
	// sorted.
	urgentJobs []uint64
	// pressure is the subnet-pressure mode.
	pressure pressure
	// sched are the pods the API server has bound to this node.
	sched boundPods
	// ckAddrs are the checkpoint's addresses while the pool is built at
	// boot: with custom networking, the only primary-ENI addresses used.
	ckAddrs map[netip.Addr]bool

	out  Ready
	last time.Time
}

// New builds the machine from what the agent read at boot. An address
// the host routes to a pod but the checkpoint lacks is quarantined before
// anything else happens; after a restart each address the checkpoint
// says was released lately cools for what is left of its cooldown (every
// free address cools once when the checkpoint does not say, as older
// ones do not), but that cooling alone never makes the pool grow.
func New(cfg Config, boot Boot, now time.Time) (*Node, error) {
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	n := &Node{
		cfg:  cfg,
		log:  cfg.Log,
		pool: ipam.NewPool(cfg.Cooldown),
		meta: make(map[string]eniMeta),
		last: now,
	}
	n.dur.out = &n.out
	n.reqs.init()
	n.host.init()
	n.jobs.init()
	n.cloud.init(cfg.Plan, boot.Devices)
	n.unmanaged.set(n, boot.Unmanaged)
	n.cloud.grow.seed = hashID(cfg.InstanceID)
	n.cloud.shrink.seed = n.cloud.grow.seed ^ 1
	// After a boot the pool gives nothing back for one cooldown: the
	// demand the previous run planned with (the pods the API server has
	// bound here, Adds about to come) is not heard yet, and an ENI
	// detached now would be attached again for them. Before release
	// times were kept, every free address cooled this long after a
	// restart, which held shrinking the same way; new pods are served at
	// once either way.
	if !boot.CheckpointMissing {
		n.cloud.shrink.until = now.Add(cfg.Cooldown)
	}
	n.ckAddrs = make(map[netip.Addr]bool, len(boot.Checkpoint.Entries))
	for _, e := range boot.Checkpoint.Entries {
		n.ckAddrs[e.Addr] = true
	}
	for _, e := range boot.ENIs {
		if err := n.adopt(e, now); err != nil {
			return nil, err
		}
	}
	n.ckAddrs = nil
	for _, e := range boot.Checkpoint.Entries {
		n.host.answered[e.Key] = now
		if u := e.UnroutedSince; !u.IsZero() {
			// The reclaim clock survives the restart: the pod was wired,
			// or its Add answered, before its route was first missed, so
			// that instant stands for both.
			u = minTime(now, u)
			n.host.unrouted[e.Key], n.host.answered[e.Key] = u, u
		}
		if _, err := n.pool.Restore(e.Key, e.Pod, e.Addr, e.AssignedAt); err != nil {
			n.stale = append(n.stale, e)
			n.log.Error("checkpoint entry not restored: kept on disk and never released automatically",
				"key", e.Key.String(), "pod", e.Pod.String(), "addr", e.Addr.String(), "err", err)
		}
	}
	n.observeRoutes(boot.Routed, now, true)
	if !boot.CheckpointMissing {
		n.coolAfterRestart(boot.Checkpoint, now)
	}
	if boot.CheckpointMissing && len(n.host.quarantined) > 0 {
		n.log.Warn("checkpoint missing while the host routes live pods: not a new node; nothing is released until every such route is gone",
			"routed", len(n.host.quarantined))
	}
	n.cloud.nextResync = now.Add(cfg.ResyncInterval)
	n.cloud.ok = true
	// What the pool holds now is what the checkpoint must say: entries
	// dropped as stale stay, nothing new is added, so one write settles it.
	n.dur.version = 1
	// The boot's routes start (or continue) the reclaim clock now, not
	// at the first periodic host check: an agent restarted every few
	// seconds may never reach one. After the version is set: a release
	// waits for the write of the version it makes.
	n.reclaim(now)
	n.plan(now)
	markUrgent(n, now)
	n.persist(now)
	return n, nil
}

// coolAfterRestart cools the addresses released within the cooldown
// before the restart, each until its own cooldown ends, or every free
// address when the checkpoint does not say when any was released. The
// set is remembered so the planner still counts them as available.
func (n *Node) coolAfterRestart(ck checkpoint.State, now time.Time) {
	cool := func(ip netip.Addr, at time.Time) {
		if err := n.pool.RestoreCooldown(ip, at); err == nil && n.pool.IsCooling(ip) {
			n.host.restartCooling[ip] = true
		}
	}
	if ck.ReleasesKnown {
		for _, r := range ck.Released {
			if _, held := n.pool.LookupAddr(r.Addr); !held {
				cool(r.Addr, r.At)
			}
		}
		return
	}
	for _, es := range n.pool.Snapshot(now).ENIs {
		for _, b := range es.Blocks {
			if b.Prefix.Addr().Is6() {
				// 2^48 addresses are too many to cool one by one. Only
				// aws-node's checkpoint lacks release times (vpcnet's
				// own always has them), so an address aws-node freed
				// within its cooldown before the switch may be given
				// again sooner than the cooldown: a known gap.
				continue
			}
			for ip := b.Prefix.Addr(); b.Prefix.Contains(ip); ip = ip.Next() {
				if _, held := n.pool.LookupAddr(ip); !held {
					cool(ip, now)
				}
			}
		}
	}
}

// Step feeds one event to the machine at now.
func (n *Node) Step(now time.Time, ev Event) {
	if now.Before(n.last) {
		now = n.last // a clock never runs backwards for the machine
	}
	n.last = now
	switch ev := ev.(type) {
	case AddRequest:
		n.onAdd(ev, now)
	case DelRequest:
		n.onDel(ev, now)
	case GCRequest:
		n.onGC(ev, now)
	case Cancel:
		n.reqs.cancel(ev.ID, now, n.cfg.DemandMemory)
	case Tick:
	case ResyncNow:
		n.cloud.nextResync, n.cloud.wantEC2 = now, true
	case Persisted:
		n.onPersisted(ev, now)
	case ENIConfigUpdate:
		n.onENIConfig(ev)
	case MaxPodsUpdate:
		if ev.MaxPods > 0 {
			n.cloud.plan.MaxPods = ev.MaxPods
		}
	case CordonUpdate:
		switch {
		case ev.Hold && !n.cloud.cordonHold:
			n.log.Info("node cordoned: no address is assigned and no ENI attached or detached until it is uncordoned (AWS_MANAGE_ENIS_NON_SCHEDULABLE=false)")
		case !ev.Hold && n.cloud.cordonHold:
			n.log.Info("node uncordoned, or AWS_MANAGE_ENIS_NON_SCHEDULABLE=true: the pool follows its targets again")
		}
		n.cloud.cordonHold = ev.Hold
	case ResyncResult:
		n.onResync(ev, now)
	case HostResult:
		n.onHost(ev, now)
	case ActionResult:
		n.onAction(ev, now)
	case AttachResult:
		n.onAttach(ev, now)
	case DOTResult:
		n.onDOT(ev, now)
	case DeleteResult:
		n.onDelete(ev, now)
	case SubnetPressure:
		n.pressure.set(ev)
	case BudgetFailover:
		n.reqs.failover(ev, now)
	case JobGrant:
		n.jobs.grant(ev.JobID)
	case PodsScheduled:
		n.sched.set(ev)
	default:
		panic(fmt.Sprintf("nodestate: unknown event %T", ev))
	}
	n.afterStep(now)
}

// afterStep does what every event may have made due: timed-out Adds,
// waiting Adds that can now be served, periodic reads, a plan, a write.
func (n *Node) afterStep(now time.Time) {
	n.reqs.expireDemand(now)
	n.serveWaiters(now)
	n.expireWaiters(now)
	n.periodic(now)
	n.plan(now)
	markUrgent(n, now)
	n.persist(now)
}

// Ready returns what the machine wants done and forgets it: the caller
// owns it now.
func (n *Node) Ready() Ready {
	rd := n.out
	n.out = Ready{}
	rd.Wake = n.wake()
	return rd
}

// wake is the earliest instant something comes due.
func (n *Node) wake() time.Time {
	var w time.Time
	earliest := func(t time.Time) {
		if !t.IsZero() && (w.IsZero() || t.Before(w)) {
			w = t
		}
	}
	earliest(n.cloud.nextResync)
	earliest(n.reqs.nextDeadline(n.arriving()))
	earliest(n.jobs.nextScheduled())
	// NextFree is zero when nothing cools; one Stats per Ready.
	earliest(n.pool.Stats(n.last).NextFree)
	if n.cloud.grow.blocked(n.last) {
		earliest(n.cloud.grow.until)
	}
	if n.cloud.shrink.blocked(n.last) {
		earliest(n.cloud.shrink.until)
	}
	earliest(n.dur.retryAt)
	earliest(n.host.nextReclaim)
	if t := n.cloud.throttledAt; !t.IsZero() && n.last.Before(t.Add(demandOnlyAfterThrottle)) {
		earliest(t.Add(demandOnlyAfterThrottle)) // the warm target comes back
	}
	if dw := n.cloud.detachWanted; !dw.IsZero() && n.last.Before(dw.Add(n.cfg.DetachHold)) {
		earliest(dw.Add(n.cfg.DetachHold))
	}
	earliest(n.frag.wakeAt(n.last))
	return w
}

// state is what the checkpoint must hold: every real assignment and every
// stale entry, less the attachments being released, and when each
// address freed within the cooldown was released. An address being
// released is recorded as released now, the write's own instant: it is
// free once this write is on disk.
func (n *Node) state(now time.Time) checkpoint.State {
	s := checkpoint.State{ReleasesKnown: true}
	held := make(map[netip.Addr]bool)
	for _, as := range n.pool.Assignments() {
		if IsQuarantine(as.Key) {
			continue
		}
		if n.dur.releasing[as.Key] {
			s.Released = append(s.Released, checkpoint.Release{Addr: as.Addr, At: now})
			continue
		}
		s.Entries = append(s.Entries, checkpoint.Entry{Key: as.Key, Addr: as.Addr, Pod: as.Pod, AssignedAt: as.AssignedAt,
			UnroutedSince: n.host.unrouted[as.Key]})
		held[as.Addr] = true
	}
	for _, e := range n.stale {
		if !n.dur.releasing[e.Key] {
			s.Entries = append(s.Entries, e)
			held[e.Addr] = true
		}
	}
	cd := n.pool.Cooldown()
	for _, c := range n.pool.Cooling(now) {
		s.Released = append(s.Released, checkpoint.Release{Addr: c.Addr, At: c.Until.Add(-cd)})
	}
	// A stale entry may name an address that has since cooled (its
	// quarantine lifted): the entry is what is kept, and one address is
	// never both held and released in the record.
	s.Released = slices.DeleteFunc(s.Released, func(r checkpoint.Release) bool { return held[r.Addr] })
	slices.SortFunc(s.Entries, func(x, y checkpoint.Entry) int { return x.Addr.Compare(y.Addr) })
	slices.SortFunc(s.Released, func(x, y checkpoint.Release) int { return x.Addr.Compare(y.Addr) })
	return s
}

func (n *Node) staleIndex(key ipam.Key) int {
	return slices.IndexFunc(n.stale, func(e checkpoint.Entry) bool { return e.Key == key })
}

func (n *Node) job(j Job) Job {
	j = n.jobs.start(j)
	n.out.Jobs = append(n.out.Jobs, j)
	return j
}

// hashID is FNV-1a of an instance id: each node's backoff jitter seed.
func hashID(id string) uint64 {
	h := uint64(14695981039346656037)
	for i := 0; i < len(id); i++ {
		h ^= uint64(id[i])
		h *= 1099511628211
	}
	return h
}
