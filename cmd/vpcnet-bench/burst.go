package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"sync"
	"time"
)

// kubeletBackoff is how long the kubelet waits before it retries a pod
// whose sandbox failed: its pod worker requeues after 10 s with up to 50%
// jitter (pkg/kubelet: backOffPeriod, workerBackOffPeriodJitterFactor).
func kubeletBackoff() time.Duration {
	return 10*time.Second + time.Duration(rand.Int64N(int64(5*time.Second)))
}

// podRun is what happened to one pod of a burst.
type podRun struct {
	attempts int
	done     time.Duration // from the burst's start to its successful ADD
	lastAdd  time.Duration // the successful ADD's own latency
	err      error         // the last failure
}

// startPods runs ADD for every pod at once, as kubelet does when a
// scheduler places them together: each retries after a failure (DEL first,
// as containerd tears a failed sandbox down) until it succeeds or ctx
// ends.
func startPods(ctx context.Context, net *network, pods []*pod, start time.Time) []podRun {
	runs := make([]podRun, len(pods))
	var wg sync.WaitGroup
	for i, p := range pods {
		wg.Go(func() {
			r := &runs[i]
			for ctx.Err() == nil {
				r.attempts++
				took, err := net.add(ctx, p)
				if err == nil {
					r.done, r.lastAdd, r.err = time.Since(start), took, nil
					return
				}
				r.err = err
				_, _ = net.del(ctx, p)
				select {
				case <-ctx.Done():
				case <-time.After(kubeletBackoff()):
				}
			}
		})
	}
	wg.Wait()
	return runs
}

// burst is scenario 2: a fresh node with slow ENI attachment gets many
// pods at once.
func (b *bench) burst(ctx context.Context, res *Result) error {
	const d = 5 * time.Second
	var totals, readies, bindings []float64
	var calls map[string]float64
	var retried int
	var timelines []string
	var adds []time.Duration
	for run := range b.opts.burstRuns {
		r, err := b.burstOnce(ctx, run, d)
		if err != nil {
			return err
		}
		totals = append(totals, r.total.Seconds())
		readies = append(readies, r.ready.Seconds())
		if b.opts.apiserver != "" {
			bindings = append(bindings, r.binding.Seconds())
		}
		adds = append(adds, r.adds...)
		retried += r.retried
		timelines = append(timelines, r.timeline)
		if calls == nil {
			calls = r.calls
		} else {
			for k, v := range r.calls {
				calls[k] += v
			}
		}
	}
	runs := len(totals)
	tot := Summarize(totals)
	t := Table{
		Title:  fmt.Sprintf("Cold burst: %d pods at once on a fresh m5.4xlarge, D = %s attach delay, IMDS lag 2 s (%d runs: min / median / max)", b.opts.burst, d, runs),
		Header: []string{"figure", "value"},
	}
	t.AddRow("agent start to ready", fmtSpread(Summarize(readies), fmtSec))
	if len(bindings) > 0 {
		t.AddRow(fmt.Sprintf("binding the %d pods in the API server, before the burst", b.opts.burst), fmtSpread(Summarize(bindings), fmtSec))
	}
	t.AddRow("burst start to the last successful ADD", fmtSpread(tot, fmtSec))
	t.AddRow("that time / D", fmtSpread(Dist{N: tot.N, Min: tot.Min / d.Seconds(), P50: tot.P50 / d.Seconds(), Max: tot.Max / d.Seconds()}, func(v float64) string { return fmt.Sprintf("%.2f", v) }))
	ad := Summarize(ms(adds))
	t.AddRow("successful ADD latency min / p50 / p99 / max", fmt.Sprintf("%s / %s / %s / %s ms", fmtMS(ad.Min), fmtMS(ad.P50), fmtMS(ad.P99), fmtMS(ad.Max)))
	t.AddRow("pods that needed a retry (kubelet backoff 10–15 s)", fmt.Sprintf("%d of %d", retried, runs*b.opts.burst))
	for i, tl := range timelines {
		t.AddRow(fmt.Sprintf("run %d: the agent's ENI attachments, from the burst's start", i+1), tl)
	}
	t.Notes = append(t.Notes, "pods use the agent's conflist as written (vpcnet alone: it maps hostPorts itself); namespaces are made before the burst; default settings (WARM_ENI_TARGET=1)")
	if b.opts.apiserver != "" {
		t.Notes = append(t.Notes, "with an API server (etcd and kube-apiserver in the VPC router's namespace, no kubelet): the agent watches its Node and pods; the pods are bound to the node first, as the scheduler binds pods before kubelet has made their sandboxes, then every ADD starts at once")
	} else {
		t.Notes = append(t.Notes, "no API server (--kube-apiserver not given): the agent knows of pods only from their ADDs")
	}
	res.Tables = append(res.Tables, t)

	ct := Table{Title: fmt.Sprintf("Cold burst: EC2 calls by action, agent start to the last ADD (per run, mean of %d)", runs), Header: []string{"action", "calls"}}
	var total, mutating float64
	for _, a := range sortedKeys(calls) {
		v := calls[a] / float64(runs)
		ct.AddRow(a, fmt.Sprintf("%.1f", v))
		total += v
		if isMutating(a) {
			mutating += v
		}
	}
	ct.AddRow("total", fmt.Sprintf("%.1f (%.1f mutating)", total, mutating))
	res.Tables = append(res.Tables, ct)
	res.figure("burst_total_s_median", tot.P50)
	res.figure("burst_total_over_d_median", tot.P50/d.Seconds())
	res.figure("burst_ec2_calls", total)
	// Issue 16: the last pod of a burst waits about one attach delay.
	goal := 1.1 * d.Seconds()
	res.goal(fmt.Sprintf("cold burst of %d pods ≤ 1.1·D (%s)", b.opts.burst, fmtSec(goal)),
		fmt.Sprintf("%s median, %s worst (%.2f·D)", fmtSec(tot.P50), fmtSec(tot.Max), tot.Max/d.Seconds()), tot.Max <= goal)
	return nil
}

type burstRun struct {
	ready, total time.Duration
	// binding is how long binding the pods in the API server took, with
	// one (before the burst's start).
	binding  time.Duration
	adds     []time.Duration
	retried  int
	calls    map[string]float64
	timeline string
}

func (b *bench) burstOnce(ctx context.Context, run int, d time.Duration) (*burstRun, error) {
	spec := clusterSpec{
		name: fmt.Sprintf("burst%d", run), instanceType: "m5.4xlarge", attachDelay: d, imdsLag: 2 * time.Second,
	}
	start := b.startNode
	if b.opts.apiserver != "" {
		start = b.startKubeNode
	}
	nd, err := start(ctx, spec)
	if err != nil {
		return nil, err
	}
	defer nd.close()
	pods := make([]*pod, b.opts.burst)
	for i := range pods {
		if pods[i], err = newPod(nd.prefix, fmt.Sprintf("b-%d", i)); err != nil {
			return nil, err
		}
	}
	if err := nd.n.WaitReady(ctx); err != nil {
		return nil, err
	}
	readyAt, err := loggedAt(nd.n.AgentLog(), "ready: CNI configuration written")
	if err != nil {
		return nil, err
	}
	r := &burstRun{ready: readyAt.Sub(nd.started)}
	if nd.kube != nil {
		if err := nd.registerNode(ctx); err != nil {
			return nil, err
		}
	}
	list, err := agentConfList(nd.n.ConfDir(), "")
	if err != nil {
		return nil, err
	}
	net := newNetwork("vpcnet", nd.n.NetNS, []string{b.opts.bin}, nd.dir+"/cni-cache", list)
	bctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	var prof *profiler
	if run == 0 {
		if prof, err = b.startProfile("burst"); err != nil {
			return nil, err
		}
	}
	if nd.kube != nil {
		// The scheduler binds a burst's pods before kubelet has made
		// their sandboxes: the burst's ADDs start once all are bound.
		if r.binding, err = nd.bindAll(bctx, pods); err != nil {
			return nil, err
		}
	}
	begun := time.Now()
	runs := startPods(bctx, net, pods, begun)
	if err := prof.stop(ctx); err != nil {
		return nil, err
	}
	m, err := scrape(ctx, nd.n.NetNS)
	if err != nil {
		return nil, err
	}
	for i, pr := range runs {
		if pr.err != nil {
			return nil, fmt.Errorf("pod %s never got an address in %d attempts: %w", pods[i].name, pr.attempts, pr.err)
		}
		r.total = max(r.total, pr.done)
		r.adds = append(r.adds, pr.lastAdd)
		if pr.attempts > 1 {
			r.retried++
		}
	}
	r.calls = m.By("vpcnet_ec2_requests_total", "action")
	if r.timeline, err = attachTimeline(nd.n.AgentLog(), begun); err != nil {
		return nil, err
	}
	return r, nil
}

// loggedAt is when the agent first logged msg: the agent's own clock,
// not when a poll of it happened to see the change.
func loggedAt(logPath, msg string) (time.Time, error) {
	data, err := os.ReadFile(logPath)
	if err != nil {
		return time.Time{}, err
	}
	for _, line := range strings.Split(string(data), "\n") {
		var e struct {
			Time time.Time `json:"time"`
			Msg  string    `json:"msg"`
		}
		if json.Unmarshal([]byte(line), &e) == nil && e.Msg == msg {
			return e.Time, nil
		}
	}
	return time.Time{}, fmt.Errorf("%s: no %q", logPath, msg)
}

// attachTimeline reads the agent's log for when it decided to attach
// ENIs and when each was ready, relative to start: what shows whether a
// burst waited for one attachment after another.
func attachTimeline(logPath string, start time.Time) (string, error) {
	data, err := os.ReadFile(logPath)
	if err != nil {
		return "", err
	}
	return timeline(data, start), nil
}

func timeline(agentLog []byte, start time.Time) string {
	var parts []string
	var lastStart string
	n := 0
	flush := func() {
		if n > 0 {
			parts = append(parts, fmt.Sprintf("%d started %s", n, lastStart))
		}
		n = 0
	}
	for _, line := range strings.Split(string(agentLog), "\n") {
		var e struct {
			Time   time.Time `json:"time"`
			Msg    string    `json:"msg"`
			Action string    `json:"action"`
		}
		if json.Unmarshal([]byte(line), &e) != nil || e.Time.Before(start.Add(-time.Second)) {
			continue
		}
		at := fmt.Sprintf("%+.1f s", e.Time.Sub(start).Seconds())
		switch {
		case e.Msg == "EC2 change" && strings.HasPrefix(e.Action, "attach"):
			// The action is described in words ("attach a new ENI in
			// subnet-a with 29 addresses ..."); assignments and the
			// like are not attachments.
			if at != lastStart {
				flush()
			}
			lastStart = at
			n++
		case e.Msg == "ENI configured":
			flush()
			parts = append(parts, "1 ready "+at)
		}
	}
	flush()
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}
