package main

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// churnHold is how long each churned pod lives between its ADD and DEL.
const churnHold = 2 * time.Second

// churn is scenario 3: pods created and deleted at a steady rate on a
// node whose pool has settled. Nothing about that needs EC2.
func (b *bench) churn(ctx context.Context, res *Result) error {
	nd, err := b.startNode(ctx, clusterSpec{
		name: "churn", instanceType: "m5.4xlarge", attachDelay: time.Second, imdsLag: 200 * time.Millisecond,
	})
	if err != nil {
		return err
	}
	defer nd.close()
	if err := nd.n.WaitReady(ctx); err != nil {
		return err
	}
	if _, err := nd.settle(ctx, 3*time.Second, time.Minute); err != nil {
		return err
	}
	list, err := agentConfList(nd.n.ConfDir(), "")
	if err != nil {
		return err
	}
	net := newNetwork("vpcnet", nd.n.NetNS, []string{b.opts.bin}, nd.dir+"/cni-cache", list)

	// Warm up until freed addresses come out of their 30 s cooldown as
	// fast as new pods take them: from then on the pool is at its
	// steady-state size and target.
	interval := time.Duration(float64(time.Second) / b.opts.churnRate)
	warmup := int((40 * time.Second) / interval)
	c := &churner{net: net, prefix: nd.prefix}
	settled, err := scrape(ctx, nd.n.NetNS)
	if err != nil {
		return err
	}
	if err := c.run(ctx, "w", warmup, interval); err != nil {
		return err
	}
	before, err := scrape(ctx, nd.n.NetNS)
	if err != nil {
		return err
	}
	c.adds, c.dels, c.failed = nil, nil, 0
	start := time.Now()
	if err := c.run(ctx, "c", b.opts.churn, interval); err != nil {
		return err
	}
	took := time.Since(start)
	after, err := scrape(ctx, nd.n.NetNS)
	if err != nil {
		return err
	}
	diff := after.Diff(before)

	calls := diff.By("vpcnet_ec2_requests_total", "action")
	var mutating, describe float64
	for a, v := range calls {
		if isMutating(a) {
			mutating += v
		} else {
			describe += v
		}
	}
	var grew float64
	for a, v := range before.Diff(settled).By("vpcnet_ec2_requests_total", "action") {
		if isMutating(a) {
			grew += v
		}
	}
	add, del := Summarize(ms(c.adds)), Summarize(ms(c.dels))
	t := Table{
		Title: fmt.Sprintf("Steady churn: %d pods created and deleted at %.0f/s on an m5.4xlarge, each living %s, after %d warm-up cycles",
			b.opts.churn, b.opts.churnRate, churnHold, warmup),
		Header: []string{"figure", "value"},
	}
	t.AddRow("mutating EC2 calls during warm-up (the pool grows to hold the cooldown)", fmt.Sprint(grew))
	t.AddRow("mutating EC2 calls in the measured cycles", fmt.Sprint(mutating))
	t.AddRow("Describe calls (periodic resync)", fmt.Sprint(describe))
	t.AddRow("ADD p50 / p90 / p99 / max", fmt.Sprintf("%s / %s / %s / %s ms", fmtMS(add.P50), fmtMS(add.P90), fmtMS(add.P99), fmtMS(add.Max)))
	t.AddRow("DEL p50 / p99", fmt.Sprintf("%s / %s ms", fmtMS(del.P50), fmtMS(del.P99)))
	t.AddRow("failed ADDs", fmt.Sprint(c.failed))
	t.AddRow("pool at the end: ENIs, addresses (assigned / cooling / free)", fmt.Sprintf("%v, %v (%v / %v / %v)",
		after.Sum("vpcnet_enis_attached"), after.Sum("vpcnet_addresses"),
		after.Sum("vpcnet_addresses", "state", "assigned"), after.Sum("vpcnet_addresses", "state", "cooling"), after.Sum("vpcnet_addresses", "state", "free")))
	t.AddRow("measured phase lasted", took.Round(100*time.Millisecond).String())
	t.Notes = append(t.Notes, "default settings (WARM_ENI_TARGET=1, IP_COOLDOWN_PERIOD=30): the pool holds every cooling address on top of the warm ENI, so it settles at rate × 30 s + pods + one ENI's worth",
		"pods use the agent's conflist as written (vpcnet alone: it maps hostPorts itself)")
	res.Tables = append(res.Tables, t)
	res.figure("churn_mutating_calls", mutating)
	res.figure("churn_add_p99_ms", add.P99)
	res.goal("zero mutating EC2 calls in steady churn", fmt.Sprintf("%v in %d cycles", mutating, b.opts.churn), mutating == 0)
	if c.failed > 0 {
		return fmt.Errorf("%d ADDs failed during churn: %v", c.failed, c.lastErr)
	}
	return nil
}

// churner starts one pod every interval; each lives churnHold and is
// deleted.
type churner struct {
	net    *network
	prefix string

	// mu guards the results.
	mu      sync.Mutex
	adds    []time.Duration
	dels    []time.Duration
	failed  int
	lastErr error
}

func (c *churner) run(ctx context.Context, tag string, n int, interval time.Duration) error {
	var wg sync.WaitGroup
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for i := range n {
		select {
		case <-ctx.Done():
			wg.Wait()
			return ctx.Err()
		case <-tick.C:
		}
		wg.Go(func() { c.cycle(ctx, fmt.Sprintf("%s-%d", tag, i)) })
	}
	wg.Wait()
	return ctx.Err()
}

func (c *churner) cycle(ctx context.Context, name string) {
	p, err := newPod(c.prefix, name)
	if err != nil {
		c.fail(err)
		return
	}
	defer p.remove()
	add, err := c.net.add(ctx, p)
	if err != nil {
		c.fail(err)
		_, _ = c.net.del(ctx, p)
		return
	}
	select {
	case <-ctx.Done():
	case <-time.After(churnHold):
	}
	del, err := c.net.del(ctx, p)
	if err != nil {
		c.fail(err)
		return
	}
	c.mu.Lock()
	c.adds = append(c.adds, add)
	c.dels = append(c.dels, del)
	c.mu.Unlock()
}

func (c *churner) fail(err error) {
	c.mu.Lock()
	c.failed++
	c.lastErr = err
	c.mu.Unlock()
}
