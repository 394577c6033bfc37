package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"sync"
	"time"

	"github.com/vpcnet/vpcnet/agent/nodestate"
	"github.com/vpcnet/vpcnet/clock"
	"github.com/vpcnet/vpcnet/introspect"
	"github.com/vpcnet/vpcnet/ipam"
	"github.com/vpcnet/vpcnet/netpol"
)

// PolicySource is what NetworkPolicy enforcement reads of the API server
// (kube.PolicyWatch).
type PolicySource interface {
	// Run watches until ctx ends, calling changed (which must not
	// block) after every change.
	Run(ctx context.Context, changed func()) error
	// Synced says the watches have listed once.
	Synced() bool
	Cluster() *netpol.Cluster
	// Generation is the Generation Cluster would carry now (0: none),
	// so an unchanged cluster is not copied again.
	Generation() uint64
	// Known is what the watch knows of one pod, asking nobody.
	Known(namespace, name string) (netpol.Pod, bool)
	Policies() int
	// Pod is what is known of one pod, asking the API server within ctx
	// when the watch has not seen it.
	Pod(ctx context.Context, namespace, name string) (netpol.Pod, error)
}

// PolicyRules writes the node's verdicts (dataplane).
type PolicyRules interface {
	// SetPolicy makes the rules exactly rs, in one transaction.
	SetPolicy(ctx context.Context, rs netpol.Ruleset, logDrops bool) error
	// PolicyDrops counts the packets dropped per isolated pod.
	PolicyDrops(ctx context.Context) (map[netip.Addr]netpol.Drops, error)
}

// PolicyOptions configure enforcement.
type PolicyOptions struct {
	// Source and Rules: both nil turns enforcement off.
	Source PolicySource
	Rules  PolicyRules
	Mode   netpol.Mode
	// LogDrops logs the first packet of each dropped connection
	// (rate-limited, through the kernel log).
	LogDrops bool
	// Off says why enforcement is off, for /v1/policy.
	Off string
	// Count, with enforcement off, counts the cluster's NetworkPolicy
	// objects, so that policies nobody enforces on this node are named
	// (the log, /v1/policy, doctor) rather than silently ignored.
	Count func(ctx context.Context) (int, error)
	// SyncWait bounds how long an Add waits for the first list of
	// policies, namespaces and pods before the mode decides; zero means
	// 10 s.
	SyncWait time.Duration
	// EgressV4Veth, on an IPv6 node with IPv4 egress (ENABLE_V4_EGRESS),
	// names the host end of an attachment's IPv4 egress veth, which the
	// egress plugin makes after vpcnet's ADD answers: the pod's egress
	// verdicts are written for it with the pod's own, so its IPv4 egress
	// is judged from its first packet. nil: pods have no egress veth.
	EgressV4Veth func(ipam.Key) string
}

const (
	// policySyncWait is SyncWait's default.
	policySyncWait = 10 * time.Second
	// policyPodLookup bounds an Add's read of a pod the watch has not
	// seen yet.
	policyPodLookup = 3 * time.Second
	// policyRetry is how soon a failed write is tried again.
	policyRetry = 2 * time.Second
	// policySweep is how often the local pods are checked against the
	// addresses the pool holds (a DEL that never came, a GC).
	policySweep = time.Minute
	// policyCountEvery is how often an agent that enforces nothing
	// counts the cluster's NetworkPolicy objects.
	policyCountEvery = 5 * time.Minute
)

// policyKeeper owns the node's NetworkPolicy rules. One goroutine (run)
// compiles and writes them, so writes happen in the order of the changes
// they reflect and no lock is held while they are.
type policyKeeper struct {
	o    PolicyOptions
	log  *slog.Logger
	clk  clock.Clock
	kick chan struct{}
	reqs chan policyReq
	// synced is closed once the source has listed and the local pods
	// are known, so the first write replaces the last run's rules with
	// rules for every pod.
	synced chan struct{}

	// Owned by run.
	locals map[ipam.Key]localPod
	// scheduled lists the pods the API server has bound to this node
	// (Kube.ScheduledPods), set by run: their rules are written before
	// their Adds.
	scheduled func() []ipam.Pod
	// met is set once by register, before run.
	met *policyMetrics
	// compiler keeps rules' peers while the cluster is unchanged, and
	// cluster is the snapshot it compiled last.
	compiler netpol.Compiler
	cluster  *netpol.Cluster

	dropMu sync.Mutex // guards dropped
	// dropped are deleted pods whose rules go at the next write: a Del
	// does not wait for it (the address cools down before it is given
	// again, and the next Add's write would replace them anyway).
	dropped []ipam.Key

	mu     sync.Mutex // guards below; never held across I/O
	status introspect.PolicyStatus
	last   netpol.Ruleset
	// pods are the local pods as last written, by "namespace/name".
	pods map[string]introspect.PolicyPod
}

// localPod is a pod on this node as its Add left it: the address it
// holds and, when the watch had not seen the pod, what the API server
// said of it then.
type localPod struct {
	pod   ipam.Pod
	addr  netip.Addr
	atAdd *netpol.Pod
}

type policyReq struct {
	put  *ipam.Key
	pod  localPod
	done chan error
}

func newPolicyKeeper(o PolicyOptions, log *slog.Logger, clk clock.Clock) *policyKeeper {
	k := &policyKeeper{o: o, log: log, clk: clk, kick: make(chan struct{}, 1), reqs: make(chan policyReq),
		synced: make(chan struct{}), locals: map[ipam.Key]localPod{}}
	if k.o.Mode == "" {
		k.o.Mode = netpol.Standard
	}
	if k.o.SyncWait == 0 {
		k.o.SyncWait = policySyncWait
	}
	k.status = introspect.PolicyStatus{Enabled: k.on(), Mode: string(k.o.Mode), Source: o.Off}
	return k
}

func (k *policyKeeper) on() bool { return k.o.Source != nil && k.o.Rules != nil }

func (k *policyKeeper) changed() {
	select {
	case k.kick <- struct{}{}:
	default:
	}
}

// run watches the API server and keeps the rules until ctx ends. held
// lists the addresses the pool holds; it is asked at start, so the
// first write covers the pods of the last run, and every policySweep.
// scheduled lists the pods bound to this node, whose chains are written
// before their Adds so that an Add writes only its map entries.
func (k *policyKeeper) run(ctx context.Context, wg *sync.WaitGroup, held func(context.Context) (map[ipam.Key]localPod, error), scheduled func() []ipam.Pod) {
	k.scheduled = scheduled
	if !k.on() {
		if k.o.Count != nil {
			wg.Add(1)
			go func() {
				defer wg.Done()
				k.countUnenforced(ctx)
			}()
		}
		return
	}
	wg.Add(2)
	go func() {
		defer wg.Done()
		if err := k.o.Source.Run(ctx, k.changed); err != nil {
			k.log.Error("NetworkPolicy watch stopped; rules stay as last written", "err", err)
		}
	}()
	go func() {
		defer wg.Done()
		k.loop(ctx, held)
	}()
}

func (k *policyKeeper) loop(ctx context.Context, held func(context.Context) (map[ipam.Key]localPod, error)) {
	timer := make(chan struct{}, 1)
	after := func(d time.Duration) {
		k.clk.AfterFunc(d, func() {
			select {
			case timer <- struct{}{}:
			default:
			}
		})
	}
	sweepDue := k.clk.Now()
	dirty := false
	for {
		synced := isClosed(k.synced)
		if !synced && k.o.Source.Synced() {
			if live, err := held(ctx); err == nil {
				k.locals = live
				close(k.synced)
				synced, dirty = true, true
				k.log.Info("NetworkPolicy watches listed; writing the node's rules", "policies", k.o.Source.Policies(), "pods", len(live))
			} else {
				after(policyRetry)
			}
		}
		if synced && !sweepDue.After(k.clk.Now()) {
			if live, err := held(ctx); err == nil {
				dirty = k.sweep(live) || dirty
			}
			sweepDue = k.clk.Now().Add(policySweep)
			after(policySweep)
		}
		if synced && dirty {
			if err := k.write(ctx); err != nil {
				k.log.Error("NetworkPolicy rules not written; retrying", "err", err)
				after(policyRetry)
			} else {
				dirty = false
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-k.kick:
			k.pending()
			k.takeDropped()
			dirty = true
		case <-timer:
		case r := <-k.reqs:
			// Dels that came before this request go first.
			k.takeDropped()
			k.put(*r.put, r.pod)
			if !isClosed(k.synced) {
				r.done <- errNotSynced
				continue
			}
			k.pending()
			err := k.write(ctx)
			dirty = err != nil
			r.done <- err
		}
	}
}

// put records a pod the pool has just given its address. The pool gives
// an address to one attachment at a time, so another local pod with the
// same address is one whose release the keeper has not heard of (a
// failed Add cleaned up late): it goes, or the two would claim one
// verdict map entry and no write would succeed until the next sweep.
func (k *policyKeeper) put(key ipam.Key, lp localPod) {
	for other, o := range k.locals {
		if o.addr == lp.addr && other != key {
			delete(k.locals, other)
		}
	}
	k.locals[key] = lp
}

// countUnenforced counts the cluster's NetworkPolicy objects while this
// node enforces none, and says so whenever the count changes.
func (k *policyKeeper) countUnenforced(ctx context.Context) {
	last := -1
	for {
		n, err := k.o.Count(ctx)
		if err == nil && n != last {
			k.mu.Lock()
			k.status.Policies = n
			k.mu.Unlock()
			if n > 0 {
				k.log.Error("NetworkPolicy objects exist and this node enforces none of them: every pod here is open to traffic they would deny",
					"policies", n, "why", k.o.Off, "fix", "set VPCNET_NETWORK_POLICY=on, or run a policy engine chained with vpcnet (README, Network policy)")
			}
			last = n
		}
		wake := make(chan struct{})
		k.clk.AfterFunc(policyCountEvery, func() { close(wake) })
		select {
		case <-ctx.Done():
			return
		case <-wake:
		}
	}
}

var errNotSynced = errors.New("the NetworkPolicy, namespace and pod watches have not listed yet")

func isClosed(c chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// sweep keeps the local pods whose address the pool still holds and
// learns those it did not know (a restart); it says whether any changed.
func (k *policyKeeper) sweep(live map[ipam.Key]localPod) bool {
	changed := false
	for key, lp := range k.locals {
		if cur, ok := live[key]; !ok || cur.addr != lp.addr {
			delete(k.locals, key)
			changed = true
		}
	}
	for key, lp := range live {
		if _, ok := k.locals[key]; !ok {
			k.locals[key] = lp
			changed = true
		}
	}
	return changed
}

func (k *policyKeeper) pending() {
	k.mu.Lock()
	if k.status.PendingSince == nil {
		t := k.clk.Now()
		k.status.PendingSince = &t
	}
	k.mu.Unlock()
}

// write compiles what is known now and writes it.
func (k *policyKeeper) write(ctx context.Context) error {
	c := k.cluster
	if gen := k.o.Source.Generation(); c == nil || gen == 0 || gen != c.Generation {
		c = k.o.Source.Cluster()
		k.cluster = c
	}
	local := make([]netpol.Local, 0, len(k.locals))
	pods := make(map[string]introspect.PolicyPod, len(k.locals))
	addressed := make(map[ipam.Pod]bool, len(k.locals))
	for key, lp := range k.locals {
		addressed[lp.pod] = true
		p, ok := k.o.Source.Known(lp.pod.Namespace, lp.pod.Name)
		if !ok && lp.atAdd != nil {
			p, ok = *lp.atAdd, true
		}
		if !ok {
			p = netpol.Pod{Namespace: lp.pod.Namespace, Name: lp.pod.Name}
		}
		// The address is the one this node gave: the API server
		// publishes it only after the Add has answered.
		p.IP = lp.addr
		p.HostNetwork = false
		l := netpol.Local{Pod: p, Unknown: !ok}
		if k.o.EgressV4Veth != nil {
			l.EgressV4Veth = k.o.EgressV4Veth(key)
		}
		local = append(local, l)
		pods[p.Key()] = introspect.PolicyPod{Namespace: p.Namespace, Name: p.Name, IP: lp.addr.String(), Known: ok}
	}
	// The pods bound here that have no address yet: their chains now, so
	// that their Adds write map entries only. One the watch has not seen
	// is left to its Add, which learns its labels.
	if k.scheduled != nil {
		for _, sp := range k.scheduled() {
			if addressed[sp] {
				continue
			}
			if p, ok := k.o.Source.Known(sp.Namespace, sp.Name); ok && !p.HostNetwork {
				local = append(local, netpol.Local{Pod: p, Bound: true})
			}
		}
	}
	start := k.clk.Now()
	rs := k.compiler.Compile(c, local, k.o.Mode)
	err := k.o.Rules.SetPolicy(ctx, rs, k.o.LogDrops)
	k.met.observe(k.clk.Now().Sub(start), err)
	k.mu.Lock()
	defer k.mu.Unlock()
	k.status.Synced = true
	k.status.Policies = len(c.Policies)
	if err != nil {
		k.status.LastError = err.Error()
		return fmt.Errorf("write NetworkPolicy rules: %w", err)
	}
	k.status.LastError = ""
	k.status.Applied = k.clk.Now()
	k.status.PendingSince = nil
	k.status.Isolated = 0
	for _, r := range rs.Pods {
		if r.Pod.IP.IsValid() {
			k.status.Isolated++
		}
	}
	k.last, k.pods = rs, pods
	return nil
}

func (k *policyKeeper) do(ctx context.Context, r policyReq) error {
	r.done = make(chan error, 1)
	return ask(ctx, k.reqs, r, r.done)
}

// admit puts a new pod's verdicts in force before its Add answers: its
// labels from the watch (or the API server), then one write of the
// node's rules, made while the checkpoint that records the pod's address
// is written (admitting). When the watches have not listed yet, it waits a little;
// then the mode decides: standard lets the pod start (open until its
// policies are known), strict refuses it, and the runtime retries.
func (k *policyKeeper) admit(ctx context.Context, as ipam.Assignment) error {
	if !k.on() {
		return nil
	}
	lp := localPod{pod: as.Pod, addr: as.Addr}
	if as.Pod.Name != "" {
		lctx, cancel := context.WithTimeout(ctx, policyPodLookup)
		p, err := k.o.Source.Pod(lctx, as.Pod.Namespace, as.Pod.Name)
		cancel()
		if err == nil {
			lp.atAdd = &p
		} else {
			k.log.Warn("pod's labels unknown at its Add", "pod", as.Pod.String(), "mode", k.o.Mode, "err", err)
		}
	}
	wctx, cancel := context.WithTimeout(ctx, k.o.SyncWait)
	select {
	case <-k.synced:
	case <-wctx.Done():
	}
	cancel()
	key := as.Key
	err := k.do(ctx, policyReq{put: &key, pod: lp})
	if errors.Is(err, errNotSynced) {
		if k.o.Mode == netpol.Strict {
			return fmt.Errorf("NETWORK_POLICY_ENFORCING_MODE=strict starts no pod before its policies are in force, and %w (is the API server reachable?)", err)
		}
		k.log.Warn("pod starts without NetworkPolicy enforcement until the watches list (NETWORK_POLICY_ENFORCING_MODE=standard)", "pod", as.Pod.String(), "err", err)
		return nil
	}
	return err
}

// admitting runs admit on a goroutine of its own, so the pod's rules are
// written while its address's checkpoint is; the channel gets admit's
// result. The caller must take it before answering the Add.
func (k *policyKeeper) admitting(ctx context.Context, as ipam.Assignment) <-chan error {
	done := make(chan error, 1)
	if !k.on() {
		done <- nil
		return done
	}
	go func() { done <- k.admit(ctx, as) }()
	return done
}

// forget drops a deleted pod's verdicts.
func (k *policyKeeper) forget(key ipam.Key) {
	if !k.on() {
		return
	}
	k.dropMu.Lock()
	k.dropped = append(k.dropped, key)
	k.dropMu.Unlock()
	k.changed()
}

// takeDropped forgets the deleted pods; run's goroutine only.
func (k *policyKeeper) takeDropped() {
	k.dropMu.Lock()
	keys := k.dropped
	k.dropped = nil
	k.dropMu.Unlock()
	for _, key := range keys {
		delete(k.locals, key)
	}
}

// view is /v1/policy: the status and, for pod ("namespace/name"), its
// verdicts.
func (k *policyKeeper) view(ctx context.Context, pod string) introspect.PolicyStatus {
	k.mu.Lock()
	st := k.status
	last, pods := k.last, k.pods
	k.mu.Unlock()
	if !k.on() {
		return st
	}
	st.Synced = st.Synced && k.o.Source.Synced()
	st.Policies = k.o.Source.Policies()
	if pod == "" {
		return st
	}
	drops, err := k.o.Rules.PolicyDrops(ctx)
	if err != nil {
		k.log.Warn("NetworkPolicy drop counters unreadable", "err", err)
	}
	p, ok := pods[pod]
	if !ok {
		return st
	}
	for _, r := range last.Pods {
		if r.Pod.Namespace+"/"+r.Pod.Name == pod {
			p.Ingress, p.Egress = directionView(r.Ingress), directionView(r.Egress)
			p.DroppedIngress, p.DroppedEgress = drops[r.Pod.IP].Ingress, drops[r.Pod.IP].Egress
		}
	}
	st.Pods = append(st.Pods, p)
	return st
}

func directionView(iso *netpol.Isolation) *introspect.PolicyDirection {
	if iso == nil {
		return nil
	}
	d := &introspect.PolicyDirection{Policies: iso.Policies, Allows: []introspect.PolicyAllow{}}
	for _, a := range iso.Allows {
		v := introspect.PolicyAllow{Rule: a.Rule, AnyPeer: a.AnyPeer}
		for _, p := range a.Peers {
			v.Peers = append(v.Peers, p.String())
		}
		for _, p := range a.Ports {
			switch {
			case p.AllPorts():
				v.Ports = append(v.Ports, string(p.Protocol))
			case p.First == p.Last:
				v.Ports = append(v.Ports, fmt.Sprintf("%s/%d", p.Protocol, p.First))
			default:
				v.Ports = append(v.Ports, fmt.Sprintf("%s/%d-%d", p.Protocol, p.First, p.Last))
			}
		}
		d.Allows = append(d.Allows, v)
	}
	return d
}

// heldPods lists the pool's assignments as local pods, asking the owner
// goroutine.
func heldPods(a *Agent) func(context.Context) (map[ipam.Key]localPod, error) {
	return func(ctx context.Context) (map[ipam.Key]localPod, error) {
		out := map[ipam.Key]localPod{}
		err := a.query(ctx, func(n *nodestate.Node) {
			for _, as := range n.View(a.now()).Assignments {
				out[as.Key] = localPod{pod: as.Pod, addr: as.Addr}
			}
		})
		return out, err
	}
}
