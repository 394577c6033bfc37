package main

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/vpcnet/vpcnet/sim"
)

// sideTables renders the awsnode scenario: per pair and phase the pods'
// time to Ready and the sandbox failures, then each node's start, EC2
// calls and agent memory.
func sideTables(runs []*sideRun, starts map[string]sideStart, use map[string]usage, cloud *sim.Cloud) []Table {
	ready := Table{
		Title:  "aws-node and vpcnet side by side: a Deployment's pods from its creation to Ready (ms), the same work on both nodes at one instant",
		Header: []string{"pods", "pool", "CNI", "p50", "p99", "worst", "FailedCreatePodSandBox per pod", "sandboxes re-created per pod", "ENIs / addresses before → after"},
		Notes: []string{
			"one cluster: kube-apiserver, scheduler, controller-manager, CoreDNS and kube-proxy, and four nodes of real kubelet and containerd on the local cloud (attach 2 s, detach 1 s); a pair of nodes per instance type, one on aws-node v1.23.2 (built from the module proxy, installed from its own manifest), one on vpcnet (deploy/vpcnet.yaml), each DaemonSet kept to its nodes by the label " + sideLabel,
			"both agents with aws-node's manifest's pool settings (" + strings.Join(sidePoolEnv, ", ") + ", prefix delegation off) and their own defaults otherwise",
			"fresh: the first Deployment on the node, with the pool its agent made at start; warm: the same again once those pods are gone and their addresses have cooled 35 s",
			"each pod runs the test server with a readiness probe every second on its address; Ready is timed from the Deployment's creation to the moment this driver's watch sees the pod Ready",
			"sandboxes re-created: the kubelet's SandboxChanged events (a sandbox killed and made again); FailedCreatePodSandBox: each failed sandbox creation, retried by the kubelet",
		},
	}
	for _, r := range runs {
		d := Summarize(ms(r.ready))
		ready.AddRow(fmt.Sprint(r.pods), r.phase, r.cni, fmtMS(d.P50), fmtMS(d.P99), fmtMS(d.Max),
			fmt.Sprintf("%.2f", float64(r.failedSandboxes)/float64(r.pods)),
			fmt.Sprintf("%.2f", float64(r.sandboxChanged)/float64(r.pods)),
			fmt.Sprintf("%d / %d → %d / %d", r.enisBefore, r.addrsBefore, r.enisAfter, r.addrsAfter))
	}

	nodes := Table{
		Title:  "aws-node and vpcnet side by side: each node's agent",
		Header: []string{"node", "CNI", "DaemonSet applied → Node Ready", "agent started → Node Ready", "agent RSS at the end", "agent peak RSS", "EC2 calls (all run)", "mutating EC2 calls"},
		Notes: []string{
			"Node Ready as this driver's watch saw it; the agent's start is its container's start as the kubelet reports it, to the second",
			"EC2 calls: every request the node made to the local cloud's EC2 endpoint from its start to the end of the run, throttled and refused ones included; mutating: those that could change something (neither Describe nor DryRun)",
			"RSS from /proc of the agent process (aws-k8s-agent, vpcnetd) after the last run",
		},
	}
	calls := Table{Title: "aws-node and vpcnet side by side: EC2 calls by action over the whole run", Header: []string{"action"},
		Notes: []string{"a DryRun call changes nothing, but EC2 counts it against the action's request bucket all the same: vpcnetd's preflight makes one per permission it checks at each start"}}
	var ids []string
	for _, p := range sidePairs {
		for _, cni := range []string{cniAWSNode, cniVpcnet} {
			id := p.nodes[cni]
			ids = append(ids, id)
			calls.Header = append(calls.Header, fmt.Sprintf("%s %s", cni, p.instanceType))
			c := cloud.Calls(id)
			total, mutating := 0, 0
			for a, n := range c {
				total += n
				if !strings.HasPrefix(a, "Describe") && !strings.HasSuffix(a, sim.DryRunSuffix) {
					mutating += n
				}
			}
			st, u := starts[id], use[id]
			nodes.AddRow(fmt.Sprintf("%s (%s)", id, p.instanceType), cni, fmtSec(st.sinceInstall.Seconds()), fmtSec(st.sinceAgent.Seconds()),
				fmtMiB(u.rss), fmtMiB(u.hwm), fmt.Sprint(total), fmt.Sprint(mutating))
		}
	}
	actions := map[string]bool{}
	for _, id := range ids {
		for a := range cloud.Calls(id) {
			actions[a] = true
		}
	}
	for _, a := range slices.Sorted(maps.Keys(actions)) {
		row := []string{a}
		for _, id := range ids {
			row = append(row, fmt.Sprint(cloud.Calls(id)[a]))
		}
		calls.AddRow(row...)
	}
	return []Table{ready, nodes, calls}
}

// sideGoals: vpcnet ahead of aws-node on every figure, with no sandbox
// failure where aws-node has none.
func sideGoals(res *Result, runs []*sideRun, starts map[string]sideStart, use map[string]usage, cloud *sim.Cloud) {
	t := Table{Title: "Goal of the switch-over issue: vpcnet ahead of aws-node on every figure", Header: []string{"figure", "aws-node", "vpcnet", "vpcnet / aws-node", "verdict"}}
	row := func(figure string, aws, vpc float64, format func(float64) string) {
		verdict := "ahead"
		switch {
		case vpc > aws:
			verdict = "**behind**"
		case vpc == aws:
			verdict = "even"
		}
		t.AddRow(figure, format(aws), format(vpc), fmtRatio(ratio(vpc, aws)), verdict)
	}
	byKey := map[string]*sideRun{}
	for _, r := range runs {
		byKey[fmt.Sprintf("%d %s %s", r.pods, r.phase, r.cni)] = r
	}
	for _, p := range sidePairs {
		for _, phase := range []string{"fresh", "warm"} {
			a, v := byKey[fmt.Sprintf("%d %s %s", p.pods, phase, cniAWSNode)], byKey[fmt.Sprintf("%d %s %s", p.pods, phase, cniVpcnet)]
			if a == nil || v == nil {
				continue
			}
			da, dv := Summarize(ms(a.ready)), Summarize(ms(v.ready))
			label := fmt.Sprintf("%d pods, %s pool", p.pods, phase)
			row(label+": p50 to Ready (ms)", da.P50, dv.P50, fmtMS)
			row(label+": p99 to Ready (ms)", da.P99, dv.P99, fmtMS)
			row(label+": worst to Ready (ms)", da.Max, dv.Max, fmtMS)
			row(label+": failed sandboxes", float64(a.failedSandboxes), float64(v.failedSandboxes), fmtCount)
			res.figure(fmt.Sprintf("side_%d_%s_p50_ratio", p.pods, phase), ratio(dv.P50, da.P50))
		}
		aid, vid := p.nodes[cniAWSNode], p.nodes[cniVpcnet]
		sum := func(id string) float64 {
			n := 0
			for _, c := range cloud.Calls(id) {
				n += c
			}
			return float64(n)
		}
		row(p.instanceType+": EC2 calls", sum(aid), sum(vid), fmtCount)
		row(p.instanceType+": agent RSS", use[aid].rss, use[vid].rss, fmtMiB)
		row(p.instanceType+": agent start to Node Ready (s)", starts[aid].sinceAgent.Seconds(), starts[vid].sinceAgent.Seconds(), fmtSec)
		row(p.instanceType+": DaemonSet applied to Node Ready (s)", starts[aid].sinceInstall.Seconds(), starts[vid].sinceInstall.Seconds(), fmtSec)
	}
	res.Tables = append([]Table{t}, res.Tables...)
}

func fmtCount(v float64) string { return fmt.Sprint(v) }
