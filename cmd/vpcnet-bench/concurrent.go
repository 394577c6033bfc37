package main

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"time"

	"github.com/containernetworking/cni/libcni"
)

// concurrentPods is how many ADDs arrive at once in the concurrent
// scenario: a ReplicaSet of 50 scheduled onto one node.
const concurrentPods = 50

// arm is one agent build under test in the concurrent scenario, on its
// own node.
type arm struct {
	label string // "this tree" or the baseline's label
	nd    *node
	net   *network
	// What was measured, over every round.
	add, del      []time.Duration // each ADD and DEL of the concurrent rounds
	rate          []float64       // ADDs per second of each round
	warmAdd, warm []time.Duration // sequential ADD, ADD+DEL
	mem           usage
	// The agent's own metrics over the measured rounds.
	before, agent Metrics
}

// concurrent is scenario 7: fifty ADDs at once on a warm pool, then fifty
// DELs, round after round, and one pod at a time, for this tree's agent
// and, with --baseline-bin, for an older build side by side in the same
// run, rounds alternating so the machine's noise falls on both.
func (b *bench) concurrent(ctx context.Context, res *Result) (err error) {
	arms := []*arm{{label: "this tree"}}
	bins := []string{b.opts.bin}
	if b.opts.baseline != "" {
		arms = append(arms, &arm{label: b.opts.baselineLabel})
		bins = append(bins, b.opts.baseline)
	}
	for i, a := range arms {
		var nd *node
		nd, err = b.startNode(ctx, clusterSpec{
			name: fmt.Sprintf("conc%d", i), bin: bins[i],
			instanceType: "m5.4xlarge", attachDelay: time.Second, imdsLag: 200 * time.Millisecond,
			// Enough warm addresses for a round, and a cooldown short
			// enough that the next round finds them free again.
			env: []string{"WARM_IP_TARGET=60", "IP_COOLDOWN_PERIOD=1"},
		})
		if err != nil {
			return fmt.Errorf("%s: %w", a.label, err)
		}
		defer nd.close()
		if err := nd.n.WaitReady(ctx); err != nil {
			return fmt.Errorf("%s: %w", a.label, err)
		}
		if _, err := nd.settle(ctx, 3*time.Second, time.Minute); err != nil {
			return fmt.Errorf("%s: %w", a.label, err)
		}
		var list *libcni.NetworkConfigList
		list, err = agentConfList(nd.n.ConfDir(), "", "vpcnet")
		if err != nil {
			return err
		}
		a.nd = nd
		a.net = newNetwork("vpcnet", nd.n.NetNS, []string{bins[i]}, filepath.Join(nd.dir, "cni-cache"), list)
	}

	const rounds, warmup = 8, 1
	for r := range warmup + rounds {
		if r == warmup {
			for _, a := range arms {
				if a.before, err = scrape(ctx, a.nd.n.NetNS); err != nil {
					return err
				}
			}
		}
		for i := range arms {
			a := arms[(i+r)%len(arms)]
			if err := a.round(ctx, r, r >= warmup); err != nil {
				return fmt.Errorf("%s, round %d: %w", a.label, r, err)
			}
		}
	}
	for _, a := range arms {
		after, err := scrape(ctx, a.nd.n.NetNS)
		if err != nil {
			return err
		}
		a.agent = after.Diff(a.before)
	}
	const sequential = 60
	for c := range sequential {
		for i := range arms {
			a := arms[(i+c)%len(arms)]
			if err := a.sequential(ctx, c); err != nil {
				return fmt.Errorf("%s, sequential %d: %w", a.label, c, err)
			}
		}
	}
	for _, a := range arms {
		u, err := readUsage(a.nd.n.AgentPID())
		if err != nil {
			return err
		}
		a.mem = u
	}
	concurrentReport(res, arms, rounds, sequential)
	return nil
}

// round makes 50 pod namespaces (not timed), runs their ADDs at once,
// then their DELs at once, and waits out the cooldown so the next round
// finds a warm pool again.
func (a *arm) round(ctx context.Context, r int, keep bool) error {
	pods := make([]*pod, concurrentPods)
	defer func() {
		for _, p := range pods {
			if p != nil {
				p.remove()
			}
		}
	}()
	for i := range pods {
		p, err := newPod(a.nd.prefix, fmt.Sprintf("c%d-%d", r, i))
		if err != nil {
			return err
		}
		pods[i] = p
	}
	adds, wall, err := all(ctx, pods, a.net.add)
	if err != nil {
		return fmt.Errorf("ADD: %w", err)
	}
	dels, _, err := all(ctx, pods, a.net.del)
	if err != nil {
		return fmt.Errorf("DEL: %w", err)
	}
	if keep {
		a.add = append(a.add, adds...)
		a.del = append(a.del, dels...)
		a.rate = append(a.rate, float64(len(pods))/wall.Seconds())
	}
	// IP_COOLDOWN_PERIOD=1: the deleted pods' addresses are free again
	// a second after their DEL.
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(1500 * time.Millisecond):
	}
	return nil
}

// all runs op for every pod at once and returns each latency and the
// time from the first start to the last finish.
func all(ctx context.Context, pods []*pod, op func(context.Context, *pod) (time.Duration, error)) ([]time.Duration, time.Duration, error) {
	took := make([]time.Duration, len(pods))
	errs := make([]error, len(pods))
	var wg sync.WaitGroup
	start := time.Now()
	for i, p := range pods {
		wg.Go(func() { took[i], errs[i] = op(ctx, p) })
	}
	wg.Wait()
	return took, time.Since(start), errors.Join(errs...)
}

// sequential is one warm ADD then DEL, as scenario 1 does.
func (a *arm) sequential(ctx context.Context, c int) error {
	p, err := newPod(a.nd.prefix, fmt.Sprintf("s-%d", c))
	if err != nil {
		return err
	}
	defer p.remove()
	add, err := a.net.add(ctx, p)
	if err != nil {
		return fmt.Errorf("ADD: %w", err)
	}
	del, err := a.net.del(ctx, p)
	if err != nil {
		return fmt.Errorf("DEL: %w", err)
	}
	a.warmAdd = append(a.warmAdd, add)
	a.warm = append(a.warm, add+del)
	return nil
}

func concurrentReport(res *Result, arms []*arm, rounds, sequential int) {
	t := Table{
		Title:  fmt.Sprintf("%d ADDs at once on a warm pool, then %d DELs at once: %d rounds per build, alternating", concurrentPods, concurrentPods, rounds),
		Header: []string{"build", "ADDs/s (median of rounds)", "ADD p50", "ADD p99", "DEL p50", "DEL p99", "agent ADD mean", "checkpoint writes per ADD or DEL", "warm ADD p50", "warm ADD p99", "agent RSS", "of which anonymous", "agent peak RSS"},
	}
	type row struct{ rate, addP50, addP99, delP50, delP99, handler, writes, wP50, wP99, rss, anon, hwm float64 }
	rows := make([]row, len(arms))
	for i, a := range arms {
		rate, add, del, w := Summarize(a.rate), Summarize(ms(a.add)), Summarize(ms(a.del)), Summarize(ms(a.warmAdd))
		handler := 1000 * ratio(a.agent.Sum("vpcnet_rpc_duration_seconds_sum", "method", "add"), a.agent.Sum("vpcnet_rpc_duration_seconds_count", "method", "add"))
		writes := ratio(a.agent.Sum("vpcnet_checkpoint_write_seconds_count"), float64(len(a.add)+len(a.del)))
		rows[i] = row{rate.P50, add.P50, add.P99, del.P50, del.P99, handler, writes, w.P50, w.P99, a.mem.rss, a.mem.anon, a.mem.hwm}
		t.AddRow(a.label, fmt.Sprintf("%.0f (%.0f–%.0f)", rate.P50, rate.Min, rate.Max),
			fmtMS(add.P50), fmtMS(add.P99), fmtMS(del.P50), fmtMS(del.P99), fmtMS(handler), fmt.Sprintf("%.2f", writes),
			fmtMS(w.P50), fmtMS(w.P99), fmtMiB(a.mem.rss), fmtMiB(a.mem.anon), fmtMiB(a.mem.hwm))
	}
	cur := rows[0]
	res.figure("concurrent_adds_per_s", cur.rate)
	res.figure("concurrent_add_p99_ms", cur.addP99)
	res.figure("concurrent_del_p99_ms", cur.delP99)
	res.figure("concurrent_checkpoint_writes_per_op", cur.writes)
	if len(arms) > 1 {
		base := rows[1]
		t.AddRow(arms[0].label+" / "+arms[1].label,
			fmtRatio(ratio(cur.rate, base.rate)), fmtRatio(ratio(cur.addP50, base.addP50)), fmtRatio(ratio(cur.addP99, base.addP99)),
			fmtRatio(ratio(cur.delP50, base.delP50)), fmtRatio(ratio(cur.delP99, base.delP99)),
			fmtRatio(ratio(cur.handler, base.handler)), fmtRatio(ratio(cur.writes, base.writes)),
			fmtRatio(ratio(cur.wP50, base.wP50)), fmtRatio(ratio(cur.wP99, base.wP99)),
			fmtRatio(ratio(cur.rss, base.rss)), fmtRatio(ratio(cur.anon, base.anon)), fmtRatio(ratio(cur.hwm, base.hwm)))
		res.figure("concurrent_adds_per_s_ratio", ratio(cur.rate, base.rate))
		res.figure("concurrent_add_p99_ratio", ratio(cur.addP99, base.addP99))
		res.figure("concurrent_rss_ratio", ratio(cur.rss, base.rss))
		res.figure("concurrent_anon_ratio", ratio(cur.anon, base.anon))
	}
	t.Notes = append(t.Notes,
		"one m5.4xlarge node per build, WARM_IP_TARGET=60, IP_COOLDOWN_PERIOD=1; latencies in ms are libcni's AddNetworkList/DelNetworkList of the vpcnet plugin alone, as containerd calls them; agent ADD mean is the agent's own time to answer (vpcnet_rpc_duration_seconds), checkpoint writes from vpcnet_checkpoint_write_seconds_count, both over the measured rounds",
		fmt.Sprintf("ADDs/s: %d divided by the time from the first ADD's start to the last one's end; warm ADD: %d single ADD+DEL cycles per build, alternating; RSS read from /proc after all of it; its file-backed part (the executable's pages) varies from run to run with the machine's memory pressure, the anonymous part (heap, stacks) is the agent's own", concurrentPods, sequential))
	if len(arms) == 1 {
		t.Notes = append(t.Notes, "no baseline in this run: pass --baseline-bin DIR (make bench BASELINE=REV builds one) to compare with an older build")
	}
	res.Tables = append(res.Tables, t)
}
