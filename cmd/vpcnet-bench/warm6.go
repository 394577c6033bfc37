package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/vpcnet/vpcnet/cniconf"
	"github.com/vpcnet/vpcnet/fabric"
)

// ipv6Env is aws-node's IPv6 mode, which it accepts only with IPv4 off
// and prefix delegation on. ENABLE_V4_EGRESS is left at its default, on.
var ipv6Env = []string{"ENABLE_IPv6=true", "ENABLE_IPv4=false", "ENABLE_PREFIX_DELEGATION=true"}

// warm6 is scenario 1 on an IPv6 node (issue 27): warm ADD then DEL of
// one pod at a time, vpcnet's pods taking addresses from the node's /80,
// against the reference plugins given an IPv6 range. vpcnet runs twice:
// the agent's conflist as written, with the IPv4 egress plugin chained
// (ENABLE_V4_EGRESS, on by default as in aws-node), and the same list
// without it (what the agent writes with ENABLE_V4_EGRESS=false). The
// arms take turns, each cycle rotating which goes first.
func (b *bench) warm6(ctx context.Context, res *Result) error {
	nd, err := b.startNode(ctx, clusterSpec{
		name: "warm6", instanceType: "m5.4xlarge", attachDelay: time.Second, imdsLag: 200 * time.Millisecond,
		dualStack: true, env: ipv6Env,
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
	b.warm6UpCalls(res, warmedUp, ready)

	onList, err := agentConfList(nd.n.ConfDir(), "", "vpcnet", cniconf.EgressV4Type)
	if err != nil {
		return err
	}
	if len(onList.Plugins) != 2 {
		return fmt.Errorf("the IPv6 node's conflist has %d plugins, want vpcnet and %s (ENABLE_V4_EGRESS is on by default)", len(onList.Plugins), cniconf.EgressV4Type)
	}
	offList, err := agentConfList(nd.n.ConfDir(), "", "vpcnet")
	if err != nil {
		return err
	}
	rlist, err := refConfList6(filepath.Join(nd.dir, "host-local"))
	if err != nil {
		return err
	}
	cache := filepath.Join(nd.dir, "cni-cache")
	// The egress plugin delegates its node-local IPv4 address to
	// host-local, found on CNI_PATH: v1.9.1 in --bin, as a node has it
	// (the agent's list says cniVersion 1.1.0, which Debian's older
	// host-local refuses).
	dirs := []string{b.opts.bin}
	refList := func(name string) *network {
		return newNetwork(name, nd.n.NetNS, []string{b.opts.refBin}, cache, rlist)
	}
	on := newNetwork("egress", nd.n.NetNS, dirs, cache, onList)
	off := newNetwork("noegress", nd.n.NetNS, dirs, cache, offList)
	ref, refDAD := refList("reference"), refList("dad")
	// ptp waits for the pod's address to leave the tentative state, so
	// with DAD on, as a pod namespace starts, its ADD is the kernel's
	// DAD wait (one to two seconds). The reference arm turns DAD off in
	// the fresh pod namespace before its ADD, untimed, so that its ADD
	// is the plugins' work, as vpcnet's (whose addresses skip DAD, as
	// aws-node's do). The reference as it is runs every dadEvery-th
	// cycle only, to keep the scenario short.
	const dadEvery = 10
	noDAD := map[*network]bool{ref: true}
	runs := map[*network]*cycles{on: {}, off: {}, ref: {}, refDAD: {}}
	egressExec := &cycles{}
	cycle := func(net *network, i int, keep bool) error {
		p, err := newPod(nd.prefix, fmt.Sprintf("%s-%d", net.name[:1], i))
		if err != nil {
			return err
		}
		defer p.remove()
		if noDAD[net] {
			if err := disableDAD(p.netns); err != nil {
				return err
			}
		}
		add, err := net.add(ctx, p)
		if err != nil {
			return fmt.Errorf("%s ADD %s: %w", net.name, p.name, err)
		}
		exec, _ := net.timer.take(execName(net), "ADD", p.containerID)
		eAdd, eOK := net.timer.take(cniconf.EgressV4Type, "ADD", p.containerID)
		del, err := net.del(ctx, p)
		if err != nil {
			return fmt.Errorf("%s DEL %s: %w", net.name, p.name, err)
		}
		delExec, _ := net.timer.take(execName(net), "DEL", p.containerID)
		eDel, _ := net.timer.take(cniconf.EgressV4Type, "DEL", p.containerID)
		if keep {
			r := runs[net]
			r.add, r.del = append(r.add, add), append(r.del, del)
			r.exec, r.delExec = append(r.exec, exec), append(r.delExec, delExec)
			r.ids = append(r.ids, p.containerID)
			if eOK {
				egressExec.exec = append(egressExec.exec, eAdd)
				egressExec.delExec = append(egressExec.delExec, eDel)
			}
		}
		return nil
	}
	const warmup = 10
	var prof *profiler
	arms := []*network{on, off, ref}
	for i := range warmup + b.opts.n {
		if i == warmup {
			if prof, err = b.startProfile("warm6"); err != nil {
				return err
			}
		}
		turn := slices.Clone(arms)
		if i%dadEvery == 0 {
			turn = append(turn, refDAD)
		}
		for k := range turn {
			if err := cycle(turn[(i+k)%len(turn)], i, i >= warmup); err != nil {
				return err
			}
		}
	}
	if err := prof.stop(ctx); err != nil {
		return err
	}
	b.warm6Report(res, runs[on], runs[off], runs[ref], runs[refDAD], egressExec)
	return nil
}

// warm6UpCalls records the EC2 calls that gave the fresh IPv6 node its
// /80: no warm pool, so this is the node's whole EC2 cost for pods.
func (b *bench) warm6UpCalls(res *Result, m Metrics, ready time.Duration) {
	calls := m.By("vpcnet_ec2_requests_total", "action")
	t := Table{Title: "Fresh m5.4xlarge IPv6 node to ready: EC2 calls", Header: []string{"action", "calls"}}
	var total float64
	for _, a := range sortedKeys(calls) {
		t.AddRow(a, fmt.Sprint(calls[a]))
		total += calls[a]
	}
	t.AddRow("total", fmt.Sprint(total))
	t.Notes = append(t.Notes, fmt.Sprintf("agent ready %s after it started; retries %v", ready.Round(time.Millisecond), m.Sum("vpcnet_ec2_retries_total")))
	res.Tables = append(res.Tables, t)
	res.figure("ipv6_node_ec2_calls", total)
}

// disableDAD has links made later in the namespace at netns skip
// duplicate address detection. The kernel applies the larger of "all"
// and a link's own accept_dad, so both are set.
func disableDAD(netns string) error {
	return fabric.Do(netns, func() error {
		for _, key := range []string{"all", "default"} {
			if err := os.WriteFile("/proc/sys/net/ipv6/conf/"+key+"/accept_dad", []byte("0"), 0o644); err != nil {
				return fmt.Errorf("accept_dad in %s: %w", netns, err)
			}
		}
		return nil
	})
}
