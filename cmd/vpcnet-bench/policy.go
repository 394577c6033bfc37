package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"path/filepath"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/vpcnet/vpcnet/fabric"
	"github.com/vpcnet/vpcnet/introspect"
)

// policy is scenario 9: what NetworkPolicy enforcement costs. Two nodes
// of one cluster watch one API server holding 1,000 NetworkPolicies and
// 5,000 pods; the node "on" enforces them (VPCNET_NETWORK_POLICY=on), the
// node "off" does not. Side by side in one run it measures a warm ADD on
// each, TCP set-up between two pods of the enforcing node with and
// without a policy between them, how long a policy change takes to be in
// force there, and each agent's memory.
func (b *bench) policy(ctx context.Context, res *Result) error {
	nodes, err := b.startKubeNodes(ctx, clusterSpec{
		name: "policy", instanceType: "m5.4xlarge", attachDelay: time.Second, imdsLag: 200 * time.Millisecond,
		nodes: 2,
		// As in the warm scenario: back-to-back cycles would otherwise
		// drain the pool into the cooldown and measure its growth.
		env: []string{"IP_COOLDOWN_PERIOD=1"},
		nodeEnv: map[string][]string{
			instanceID(0): {"VPCNET_NETWORK_POLICY=on"},
			instanceID(1): {"VPCNET_NETWORK_POLICY=off"},
		},
	})
	if err != nil {
		return err
	}
	defer nodes[0].close()
	on, off := nodes[0], nodes[1]
	for _, nd := range nodes {
		if err := nd.n.WaitReady(ctx); err != nil {
			return err
		}
		if err := nd.createNode(ctx); err != nil {
			return err
		}
		if err := nd.waitFound(ctx, 0); err != nil {
			return err
		}
	}
	r := &policyRun{}
	k := on.kubeClient
	start := time.Now()
	if r.filled, err = fillCluster(ctx, k); err != nil {
		return err
	}
	r.fill = time.Since(start)
	if r.synced, err = waitPolicySynced(ctx, on, r.filled.policies, start); err != nil {
		return err
	}

	// The measured pods, in the API server before their ADDs as the
	// scheduler binds pods before kubelet starts them.
	warmName := func(nd *node, i int) string {
		if nd == on {
			return fmt.Sprintf("on-w-%d", i%warmRotation)
		}
		return fmt.Sprintf("off-w-%d", i%warmRotation)
	}
	for _, nd := range nodes {
		for i := range warmRotation {
			if _, err := k.CoreV1().Pods(benchPolNS).Create(ctx, benchPod(benchPolNS, warmName(nd, i), nd.nodeName, selectedLabels), metav1.CreateOptions{}); err != nil {
				return fmt.Errorf("create pod %s: %w", warmName(nd, i), err)
			}
		}
	}
	tcp, err := b.startTCPPods(ctx, on)
	if err != nil {
		return err
	}
	defer tcp.close()
	r.benchPods = 2*warmRotation + 3
	for _, nd := range nodes {
		if _, err := nd.settle(ctx, 3*time.Second, time.Minute); err != nil {
			return err
		}
	}
	if r.selected, err = policyView(ctx, on, benchPolNS+"/"+tcp.selected.name); err != nil {
		return err
	}

	if err := b.policyWarm(ctx, r, on, off, warmName); err != nil {
		return err
	}
	if err := tcp.measure(ctx, r); err != nil {
		return err
	}
	if err := b.propagation(ctx, r, on, tcp); err != nil {
		return err
	}
	if err := r.memory(ctx, on, off); err != nil {
		return err
	}
	r.report(res)
	return nil
}

// warmRotation is how many pod names each node's warm cycles rotate
// over: pods made in the API server before the cycles, so that no watch
// event lands during them.
const warmRotation = 8

// policyRun is what the policy scenario measured.
type policyRun struct {
	filled populated
	// benchPods are the measured pods, in the API server too.
	benchPods int
	fill      time.Duration // making it all in the API server
	synced    time.Duration // from the start of the fill to the rules written
	selected  introspect.PolicyPod

	// Warm ADD/DEL on each node, and the agents' metrics over them.
	onAdd, offAdd, onDel, offDel []time.Duration
	onAgent, offAgent            Metrics
	// The plugin's Add and Del RPCs, from its log.
	onRPC, offRPC struct{ add, del []time.Duration }

	// TCP set-up to the pod a policy isolates and allows, and to the
	// one no policy selects.
	toSelected, toOpen []time.Duration

	// Propagation: by traffic, and by the agent's own Applied, from the
	// change's request; for changes that allow and that deny.
	allowed, denied []time.Duration
	applied         []time.Duration
	notInForce      int
	flipAgent       Metrics

	onMem, offMem usage
}

// waitPolicySynced waits until the enforcing agent has listed and its
// rules reflect the cluster as filled: every policy known, nothing
// pending, and the same last write at three looks half a second apart
// (events of the fill's last requests may still be on their way, and
// each would start a write). The last write may come before the fill's
// last request has returned: the watch can deliver its event first.
func waitPolicySynced(ctx context.Context, nd *node, policies int, since time.Time) (time.Duration, error) {
	filled := time.Now()
	deadline := filled.Add(3 * time.Minute)
	quiet := 0
	var st, prev introspect.PolicyStatus
	for quiet < 2 {
		var err error
		st, err = policyStatus(ctx, nd, "")
		if err == nil && st.Enabled && st.Synced && st.Policies == policies && st.PendingSince == nil && st.Applied.After(since) && st.Applied.Equal(prev.Applied) {
			quiet++
		} else {
			quiet = 0
		}
		prev = st
		if time.Now().After(deadline) {
			return 0, fmt.Errorf("the enforcing agent's rules do not reflect the %d policies 3 minutes after they were made: %+v (%v)", policies, st, err)
		}
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
	return st.Applied.Sub(since), nil
}

func policyStatus(ctx context.Context, nd *node, pod string) (introspect.PolicyStatus, error) {
	path := "/v1/policy"
	if pod != "" {
		path += "?pod=" + pod
	}
	var st introspect.PolicyStatus
	body, err := nd.n.Get(ctx, path)
	if err != nil {
		return st, err
	}
	if err := json.Unmarshal(body, &st); err != nil {
		return st, fmt.Errorf("GET %s: %w", path, err)
	}
	return st, nil
}

// policyView is one pod's verdicts on the node.
func policyView(ctx context.Context, nd *node, pod string) (introspect.PolicyPod, error) {
	st, err := policyStatus(ctx, nd, pod)
	if err != nil {
		return introspect.PolicyPod{}, err
	}
	if len(st.Pods) != 1 {
		return introspect.PolicyPod{}, fmt.Errorf("the enforcing agent has no verdicts for %s", pod)
	}
	return st.Pods[0], nil
}

// policyWarm is the warm scenario's cycle on both nodes, interleaved:
// ADD then DEL of one pod, the node's order flipping every cycle. The
// pods rotate over a few names the API server already has, so on the
// enforcing node each ADD is of a pod that policies select.
func (b *bench) policyWarm(ctx context.Context, r *policyRun, on, off *node, name func(*node, int) string) error {
	nets, logs := map[*node]*network{}, map[*node]string{}
	for _, nd := range []*node{on, off} {
		logs[nd] = filepath.Join(nd.dir, nd.n.ID+"-vpcnet-plugin.log")
		list, err := agentConfList(nd.n.ConfDir(), logs[nd], "vpcnet")
		if err != nil {
			return err
		}
		nets[nd] = newNetwork("vpcnet", nd.n.NetNS, []string{b.opts.bin}, filepath.Join(nd.dir, nd.n.ID+"-cni-cache"), list)
	}
	ids := map[*node][]string{}
	cycle := func(nd *node, i int, keep bool) error {
		label := "off"
		if nd == on {
			label = "on"
		}
		p, err := newPod(nd.prefix, fmt.Sprintf("%s-%d", label, i))
		if err != nil {
			return err
		}
		defer p.remove()
		p.name, p.namespace, p.containerID = name(nd, i), benchPolNS, fmt.Sprintf("bench-%s-%d", label, i)
		net := nets[nd]
		add, err := net.add(ctx, p)
		if err != nil {
			return fmt.Errorf("node %s: ADD %s: %w", label, p.name, err)
		}
		del, err := net.del(ctx, p)
		if err != nil {
			return fmt.Errorf("node %s: DEL %s: %w", label, p.name, err)
		}
		if keep {
			ids[nd] = append(ids[nd], p.containerID)
			if nd == on {
				r.onAdd, r.onDel = append(r.onAdd, add), append(r.onDel, del)
			} else {
				r.offAdd, r.offDel = append(r.offAdd, add), append(r.offDel, del)
			}
		}
		return nil
	}
	const warmup = 10
	var onBefore, offBefore Metrics
	var prof *profiler
	var err error
	for i := range warmup + b.opts.n {
		if i == warmup {
			if onBefore, err = scrape(ctx, on.n.NetNS); err != nil {
				return err
			}
			if offBefore, err = scrape(ctx, off.n.NetNS); err != nil {
				return err
			}
			if prof, err = b.startProfile("policy-add"); err != nil {
				return err
			}
		}
		order := []*node{on, off}
		if i%2 == 1 {
			order = []*node{off, on}
		}
		for _, nd := range order {
			if err := cycle(nd, i, i >= warmup); err != nil {
				return err
			}
		}
	}
	if err := prof.stop(ctx); err != nil {
		return err
	}
	onAfter, err := scrape(ctx, on.n.NetNS)
	if err != nil {
		return err
	}
	offAfter, err := scrape(ctx, off.n.NetNS)
	if err != nil {
		return err
	}
	r.onAgent, r.offAgent = onAfter.Diff(onBefore), offAfter.Diff(offBefore)
	// The Add and Del RPCs as the plugin saw them, from its log: what
	// of the difference is the agent's.
	for _, nd := range []*node{on, off} {
		phases, err := readPhases(logs[nd])
		if err != nil {
			return err
		}
		rpc := &r.offRPC
		if nd == on {
			rpc = &r.onRPC
		}
		for _, id := range ids[nd] {
			if p, ok := phases.add[id]; ok {
				rpc.add = append(rpc.add, p.rpc)
			}
			if p, ok := phases.del[id]; ok {
				rpc.del = append(rpc.del, p.rpc)
			}
		}
	}
	return nil
}

// tcpPods are the enforcing node's client and two servers: one that
// policies select and that allowClient admits the client to, one that no
// policy selects.
type tcpPods struct {
	client, selected, open *pod
	toSelected, toOpen     string // host:port
	listeners              []interface{ Close() error }
}

func (b *bench) startTCPPods(ctx context.Context, nd *node) (*tcpPods, error) {
	t := &tcpPods{}
	list, err := agentConfList(nd.n.ConfDir(), "", "vpcnet")
	if err != nil {
		return nil, err
	}
	net := newNetwork("vpcnet", nd.n.NetNS, []string{b.opts.bin}, filepath.Join(nd.dir, nd.n.ID+"-cni-cache-tcp"), list)
	k := nd.kubeClient
	specs := []struct {
		into   **pod
		ns     string
		name   string
		labels map[string]string
	}{
		{&t.client, benchOpenNS, "client", clientLabels},
		{&t.selected, benchPolNS, "server-selected", selectedLabels},
		{&t.open, benchOpenNS, "server-open", openLabels},
	}
	addrs := make([]netip.Addr, len(specs))
	for i, s := range specs {
		if _, err := k.CoreV1().Pods(s.ns).Create(ctx, benchPod(s.ns, s.name, nd.nodeName, s.labels), metav1.CreateOptions{}); err != nil {
			t.close()
			return nil, fmt.Errorf("create pod %s/%s: %w", s.ns, s.name, err)
		}
		p, err := newPod(nd.prefix, "tcp-"+s.name)
		if err != nil {
			t.close()
			return nil, err
		}
		p.name, p.namespace = s.name, s.ns
		*s.into = p
		if _, addrs[i], err = net.addAddr(ctx, p); err != nil {
			t.close()
			return nil, fmt.Errorf("ADD %s/%s: %w", s.ns, s.name, err)
		}
		// Published as kubelet does once the sandbox is up: the client
		// becomes the allowed peer of the selected server.
		if err := publishAddr(ctx, k, s.ns, s.name, addrs[i]); err != nil {
			t.close()
			return nil, err
		}
	}
	for i, p := range []*pod{t.selected, t.open} {
		addr := netip.AddrPortFrom(addrs[i+1], serverPort).String()
		ln, err := fabric.Listen(p.netns, "tcp4", addr)
		if err != nil {
			t.close()
			return nil, fmt.Errorf("listen in %s: %w", p.name, err)
		}
		t.listeners = append(t.listeners, ln)
		go serve(ln)
		if i == 0 {
			t.toSelected = addr
		} else {
			t.toOpen = addr
		}
	}
	for _, addr := range []string{t.toSelected, t.toOpen} {
		if err := waitReachable(ctx, t.client.netns, addr, 30*time.Second); err != nil {
			t.close()
			return nil, fmt.Errorf("the client cannot reach %s: %w", addr, err)
		}
	}
	return t, nil
}

func (t *tcpPods) close() {
	for _, ln := range t.listeners {
		ln.Close()
	}
	for _, p := range []*pod{t.client, t.selected, t.open} {
		if p != nil {
			p.remove()
		}
	}
}

// tcpConnections is how many connections are timed to each server:
// enough that the p99 rests on fifty of them, not on the few that a
// passing burst of the machine's other work decides (2,000 gave p99
// ratios from 0.92× to 1.42× on one tree).
const tcpConnections = 5000

// measure times connections from the client to each server, alternating,
// the order flipping every pair.
func (t *tcpPods) measure(ctx context.Context, r *policyRun) error {
	const warmup = 20
	for i := range warmup + tcpConnections {
		order := []string{t.toSelected, t.toOpen}
		if i%2 == 1 {
			order = []string{t.toOpen, t.toSelected}
		}
		for _, addr := range order {
			took, err := connect(ctx, t.client.netns, addr, 2*time.Second)
			if err != nil {
				return fmt.Errorf("connection %d to %s: %w", i, addr, err)
			}
			if i < warmup {
				continue
			}
			if addr == t.toSelected {
				r.toSelected = append(r.toSelected, took)
			} else {
				r.toOpen = append(r.toOpen, took)
			}
		}
	}
	return nil
}

// policyFlips is how many times the propagation measurement changes
// allowClient: half take the client's allowance away, half give it back.
const policyFlips = 50

// propagation changes allowClient in the API server policyFlips times,
// each time timing until the change is in force on the enforcing node,
// judged by the client's connections to the selected server.
func (b *bench) propagation(ctx context.Context, r *policyRun, on *node, t *tcpPods) error {
	nps := on.kubeClient.NetworkingV1().NetworkPolicies(benchPolNS)
	before, err := scrape(ctx, on.n.NetNS)
	if err != nil {
		return err
	}
	prof, err := b.startProfile("policy-change")
	if err != nil {
		return err
	}
	allowed := true // as benchPolicy made it
	for i := range policyFlips {
		want := !allowed
		p := startProber(ctx, t.client.netns, t.toSelected)
		err := p.waitVerdict(ctx, allowed, 30*time.Second)
		if err != nil {
			p.close()
			return fmt.Errorf("change %d: before it: %w", i, err)
		}
		cur, err := nps.Get(ctx, allowClient, metav1.GetOptions{})
		if err != nil {
			p.close()
			return fmt.Errorf("get NetworkPolicy %s/%s: %w", benchPolNS, allowClient, err)
		}
		cur.Spec = allowClientPolicy(want).Spec
		t0 := time.Now()
		if _, err := nps.Update(ctx, cur, metav1.UpdateOptions{}); err != nil {
			p.close()
			return fmt.Errorf("update NetworkPolicy %s/%s: %w", benchPolNS, allowClient, err)
		}
		took, err := p.inForce(ctx, t0, want)
		p.close()
		switch {
		case errors.Is(err, errNotInForce):
			// Counted as probeLimit; the next change waits (30 s at
			// most) for this one to be in force before it starts.
			r.notInForce++
		case err != nil:
			return err
		}
		if want {
			r.allowed = append(r.allowed, took)
		} else {
			r.denied = append(r.denied, took)
		}
		if st, err := policyStatus(ctx, on, ""); err == nil && st.Applied.After(t0) {
			r.applied = append(r.applied, st.Applied.Sub(t0))
		}
		allowed = want
	}
	if err := prof.stop(ctx); err != nil {
		return err
	}
	after, err := scrape(ctx, on.n.NetNS)
	if err != nil {
		return err
	}
	r.flipAgent = after.Diff(before)
	if !allowed {
		// Leave the client allowed, as the cluster was made.
		cur, err := nps.Get(ctx, allowClient, metav1.GetOptions{})
		if err == nil {
			cur.Spec = allowClientPolicy(true).Spec
			_, err = nps.Update(ctx, cur, metav1.UpdateOptions{})
		}
		if err != nil {
			return fmt.Errorf("restore NetworkPolicy %s/%s: %w", benchPolNS, allowClient, err)
		}
	}
	return nil
}

// memorySettle is how long both agents are left alone before their
// memory is read: long enough for vpcnetd's idle trim (internal/idlegc:
// a quiet 5 s period after enough allocation) to have returned the
// garbage of the measurements to the kernel.
const memorySettle = 20 * time.Second

// memory reads both agents' memory, at the same time, after memorySettle.
func (r *policyRun) memory(ctx context.Context, on, off *node) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(memorySettle):
	}
	var wg sync.WaitGroup
	var onErr, offErr error
	wg.Go(func() { r.onMem, onErr = sampleAgent(ctx, on, 10*time.Second) })
	wg.Go(func() { r.offMem, offErr = sampleAgent(ctx, off, 10*time.Second) })
	wg.Wait()
	if onErr != nil {
		return onErr
	}
	return offErr
}
