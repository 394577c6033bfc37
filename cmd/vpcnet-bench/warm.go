package main

import (
	"context"
	"fmt"
	"path/filepath"
	"time"
)

// warm is scenario 1: ADD then DEL of one pod at a time on a node whose
// pool is at target, vpcnet against the reference plugins, interleaved so
// that the machine's noise falls on both alike.
func (b *bench) warm(ctx context.Context, res *Result) error {
	nd, err := b.startNode(ctx, clusterSpec{
		name: "warm", instanceType: "m5.4xlarge", attachDelay: time.Second, imdsLag: 200 * time.Millisecond,
		// Back-to-back cycles would otherwise drain the pool into the
		// 30 s cooldown within seconds and measure the pool's growth,
		// which is scenario 2's subject, not a warm ADD.
		env: []string{"IP_COOLDOWN_PERIOD=1"},
	})
	if err != nil {
		return err
	}
	defer nd.close()
	if err := nd.n.WaitReady(ctx); err != nil {
		return err
	}
	ready := time.Since(nd.started)
	warmedUp, err := nd.settle(ctx, 3*time.Second, 60*time.Second)
	if err != nil {
		return err
	}
	b.warmUpCalls(res, warmedUp, ready)

	logFile := filepath.Join(nd.dir, "vpcnet-plugin.log")
	vlist, err := agentConfList(nd.n.ConfDir(), logFile, "vpcnet")
	if err != nil {
		return err
	}
	rlist, err := refConfList(filepath.Join(nd.dir, "host-local"))
	if err != nil {
		return err
	}
	cache := filepath.Join(nd.dir, "cni-cache")
	vpc := newNetwork("vpcnet", nd.n.NetNS, []string{b.opts.bin}, cache, vlist)
	ref := newNetwork("reference", nd.n.NetNS, []string{b.opts.refBin}, cache, rlist)

	runs := map[*network]*cycles{vpc: {}, ref: {}}
	cycle := func(net *network, i int, keep bool) error {
		p, err := newPod(nd.prefix, fmt.Sprintf("%s-%d", net.name[:1], i))
		if err != nil {
			return err
		}
		defer p.remove()
		add, err := net.add(ctx, p)
		if err != nil {
			return fmt.Errorf("%s ADD %s: %w", net.name, p.name, err)
		}
		exec, _ := net.timer.take(execName(net), "ADD", p.containerID)
		del, err := net.del(ctx, p)
		if err != nil {
			return fmt.Errorf("%s DEL %s: %w", net.name, p.name, err)
		}
		delExec, _ := net.timer.take(execName(net), "DEL", p.containerID)
		if keep {
			runs[net].add = append(runs[net].add, add)
			runs[net].del = append(runs[net].del, del)
			runs[net].exec = append(runs[net].exec, exec)
			runs[net].delExec = append(runs[net].delExec, delExec)
			runs[net].ids = append(runs[net].ids, p.containerID)
		}
		return nil
	}
	// A few unrecorded cycles first: page cache, first agent connection.
	const warmup = 10
	var before Metrics
	var prof *profiler
	for i := range warmup + b.opts.n {
		if i == warmup {
			if before, err = scrape(ctx, nd.n.NetNS); err != nil {
				return err
			}
			if prof, err = b.startProfile("warm"); err != nil {
				return err
			}
		}
		order := []*network{vpc, ref}
		if i%2 == 1 {
			order = []*network{ref, vpc}
		}
		for _, net := range order {
			if err := cycle(net, i, i >= warmup); err != nil {
				return err
			}
		}
	}
	if err := prof.stop(ctx); err != nil {
		return err
	}
	after, err := scrape(ctx, nd.n.NetNS)
	if err != nil {
		return err
	}
	phases, err := readPhases(logFile)
	if err != nil {
		return err
	}
	b.warmReport(res, runs[vpc], runs[ref], phases, after.Diff(before))
	return nil
}

// cycles are the recorded ADD/DEL pairs of one arm.
type cycles struct {
	add, del, exec []time.Duration
	delExec        []time.Duration // the first plugin's DEL process, fork to exit
	ids            []string
}

func execName(n *network) string { return n.list.Plugins[0].Network.Type }

// warmUpCalls records the EC2 calls that brought the fresh node to its
// warm target.
func (b *bench) warmUpCalls(res *Result, m Metrics, ready time.Duration) {
	calls := m.By("vpcnet_ec2_requests_total", "action")
	t := Table{Title: "Fresh m5.4xlarge node to warm target (WARM_ENI_TARGET=1): EC2 calls", Header: []string{"action", "calls"}}
	var total, mutating float64
	for _, a := range sortedKeys(calls) {
		t.AddRow(a, fmt.Sprint(calls[a]))
		total += calls[a]
		if isMutating(a) {
			mutating += calls[a]
		}
	}
	t.AddRow("total", fmt.Sprintf("%v (%v mutating)", total, mutating))
	t.Notes = append(t.Notes, fmt.Sprintf("agent ready %s after it started; retries %v", ready.Round(time.Millisecond), m.Sum("vpcnet_ec2_retries_total")))
	res.Tables = append(res.Tables, t)
	res.figure("warmup_ec2_calls", total)
	res.figure("warmup_ec2_mutating_calls", mutating)
	res.goal("node to warm target in ≤ 3 EC2 calls", fmt.Sprintf("%v calls, %v of them mutating", total, mutating), total <= 3)
}

// isMutating says whether an EC2 action changes anything: every action
// the agent calls except Describe*.
func isMutating(action string) bool {
	return len(action) < 8 || action[:8] != "Describe"
}
