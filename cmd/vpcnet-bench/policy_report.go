package main

import (
	"fmt"
	"time"

	"github.com/vpcnet/vpcnet/introspect"
)

// The goals of the NetworkPolicy issue, each a ratio or a difference of
// two arms measured side by side, but for propagation, which has no arm
// to compare with.
const (
	goalAddRatio     = 1.1
	goalConnectRatio = 1.1
	goalPropagation  = time.Second
	goalExtraRSSMiB  = 10.0
)

func (r *policyRun) report(res *Result) {
	pods := fmt.Sprintf("%d pods", r.filled.pods)
	known := fmt.Sprintf("%d pods", r.filled.pods+r.benchPods)
	setup := Table{
		Title:  fmt.Sprintf("NetworkPolicy: the cluster both nodes watch (%d NetworkPolicies, %s, %d namespaces)", r.filled.policies, pods, r.filled.namespaces),
		Header: []string{"figure", "value"},
	}
	setup.AddRow("making it in the API server (namespaces, pods and their status.podIPs, policies; 32 requests at a time)", fmtSec(r.fill.Seconds()))
	setup.AddRow("from the start of that to the enforcing agent's rules written with all of it", fmtSec(r.synced.Seconds()))
	setup.AddRow(fmt.Sprintf("a measured pod's verdicts (%s/%s)", r.selected.Namespace, r.selected.Name), describeVerdicts(r.selected))
	setup.Notes = append(setup.Notes,
		"pods: 100 in each of 50 namespaces (app, tier and version labels, named ports http, metrics and some grpc), bound to 100 nodes that do not exist, each with an address scattered over 10.0.64.0/18; 2 DNS pods in kube-system; and the measured pods, bound to the two bench nodes",
		"policies: 20 per namespace in 49 namespaces and in bench-pol, the measured pods' namespace: deny-all ingress, same-namespace, monitoring by namespace and pod selector with a named port, ten per-app allows from a tier and from a team's namespaces, DNS egress to kube-system, HTTPS egress to an ipBlock with excepts, backend to db, db from backend on a port range, an ipBlock ingress, a matchExpressions selector allowing the prod namespaces, and egress on a named port; in bench-pol allow-client takes the ipBlock ingress's place",
		"no kubelet, scheduler or controllers: etcd and kube-apiserver in the VPC router's namespace; the driver creates the objects and publishes addresses through the status subresource as kubelet would")
	res.Tables = append(res.Tables, setup)

	onAdd, offAdd := Summarize(ms(r.onAdd)), Summarize(ms(r.offAdd))
	onDel, offDel := Summarize(ms(r.onDel)), Summarize(ms(r.offDel))
	lat := Table{
		Title:  fmt.Sprintf("Warm ADD and DEL with the policies in the API server: the enforcing node against one with VPCNET_NETWORK_POLICY=off, %d cycles each, interleaved (ms)", len(r.onAdd)),
		Header: []string{"", "p50", "p90", "p99", "min", "max"},
	}
	row := func(name string, d Dist) {
		lat.AddRow(name, fmtMS(d.P50), fmtMS(d.P90), fmtMS(d.P99), fmtMS(d.Min), fmtMS(d.Max))
	}
	ratioRow := func(name string, a, b Dist) {
		lat.AddRow(name, fmtRatio(ratio(a.P50, b.P50)), fmtRatio(ratio(a.P90, b.P90)), fmtRatio(ratio(a.P99, b.P99)), "", "")
	}
	addQ := pairedQuantiles(ms(r.onAdd), ms(r.offAdd))
	delQ := pairedQuantiles(ms(r.onDel), ms(r.offDel))
	row("ADD, enforcing", onAdd)
	row("ADD, off", offAdd)
	ratioRow("ADD enforcing / off", onAdd, offAdd)
	lat.AddRow("  95% interval (pairs resampled)", fmtInterval(addQ[0]), fmtInterval(addQ[1]), fmtInterval(addQ[2]), "", "")
	row("DEL, enforcing", onDel)
	row("DEL, off", offDel)
	ratioRow("DEL enforcing / off", onDel, offDel)
	lat.AddRow("  95% interval (pairs resampled)", fmtInterval(delQ[0]), fmtInterval(delQ[1]), fmtInterval(delQ[2]), "", "")
	lat.Notes = append(lat.Notes,
		"two m5.4xlarge nodes of one local cloud and one API server, IP_COOLDOWN_PERIOD=1, pools at target; each cycle makes a fresh pod namespace (not timed), then ADD and DEL through libcni as containerd calls them, with the agent's conflist (vpcnet alone), the nodes' order flipping every cycle; 10 unrecorded cycles first",
		pairedNote("cycle", len(r.onAdd)),
		fmt.Sprintf("the pods rotate over %d names per node in bench-pol, made in the API server before the cycles (so no watch event lands during them), with the labels that the policies of bench-pol select and bound to the nodes: on the enforcing node each pod's chains are written before the cycles, when the agent first sees it bound there, and each ADD and each DEL rewrites the node's verdict map entries", warmRotation))
	res.Tables = append(res.Tables, lat)

	mean := func(m Metrics, name string, match ...string) float64 {
		c := m.Sum(name+"_count", match...)
		if c == 0 {
			return 0
		}
		return m.Sum(name+"_sum", match...) / c * 1000
	}
	ops := float64(len(r.onAdd) + len(r.onDel))
	writes := r.onAgent.Sum("vpcnet_policy_writes_total")
	write := mean(r.onAgent, "vpcnet_policy_write_seconds")
	med := func(ds []time.Duration) string { return fmtMS(Summarize(ms(ds)).P50) }
	where := Table{
		Title:  "Where the enforcing node's ADD and DEL spend the difference (ms)",
		Header: []string{"figure", "enforcing", "off"},
	}
	where.AddRow("ADD as containerd sees it (libcni), median", fmtMS(onAdd.P50), fmtMS(offAdd.P50))
	where.AddRow("  Add RPC to vpcnetd as the plugin sees it (its log), median", med(r.onRPC.add), med(r.offRPC.add))
	where.AddRow("    the address from the pool (vpcnet_rpc_duration_seconds, add), mean", fmtMS(mean(r.onAgent, "vpcnet_rpc_duration_seconds", "method", "add")), fmtMS(mean(r.offAgent, "vpcnet_rpc_duration_seconds", "method", "add")))
	where.AddRow("      its checkpoint write (vpcnet_checkpoint_write_seconds), mean", fmtMS(mean(r.onAgent, "vpcnet_checkpoint_write_seconds")), fmtMS(mean(r.offAgent, "vpcnet_checkpoint_write_seconds")))
	where.AddRow("    one write of the node's rules (vpcnet_policy_write_seconds), mean, beside the checkpoint's", fmtMS(write), "")
	where.AddRow("DEL as containerd sees it (libcni), median", fmtMS(onDel.P50), fmtMS(offDel.P50))
	where.AddRow("  Del RPC to vpcnetd as the plugin sees it (its log), median", med(r.onRPC.del), med(r.offRPC.del))
	where.AddRow("    the release (vpcnet_rpc_duration_seconds, del), mean", fmtMS(mean(r.onAgent, "vpcnet_rpc_duration_seconds", "method", "del")), fmtMS(mean(r.offAgent, "vpcnet_rpc_duration_seconds", "method", "del")))
	where.AddRow("rule writes per ADD or DEL (vpcnet_policy_writes_total)", fmt.Sprintf("%.2f", ratio(writes, ops)), "")
	where.Notes = append(where.Notes,
		"vpcnet_rpc_duration_seconds times the address part of the agent's Add and Del only; on the enforcing node the Add also waits for its pod's verdicts, written while the checkpoint that records its address is (agent policyKeeper.admitting), and the Del leaves their removal to a write that follows it (forget)",
		"a write compiles the local pods' verdicts (netpol.Compiler, which keeps each rule's peers while the watches see no change that matters to them) and writes what changed of table ip vpcnet-policy in one nftables transaction (dataplane.SetPolicy): for an ADD or a DEL, its pod's map entries")
	res.Tables = append(res.Tables, where)

	sel, open := Summarize(ms(r.toSelected)), Summarize(ms(r.toOpen))
	tt := Table{
		Title:  fmt.Sprintf("TCP set-up between two pods of the enforcing node, %d connections each, alternating (ms, SYN to the server's first byte)", len(r.toSelected)),
		Header: []string{"server", "p50", "p90", "p99", "min", "max"},
	}
	tt.AddRow("isolated by policies, allow-client admits the client", fmtMS(sel.P50), fmtMS(sel.P90), fmtMS(sel.P99), fmtMS(sel.Min), fmtMS(sel.Max))
	tt.AddRow("selected by no policy", fmtMS(open.P50), fmtMS(open.P90), fmtMS(open.P99), fmtMS(open.Min), fmtMS(open.Max))
	tt.AddRow("isolated / open", fmtRatio(ratio(sel.P50, open.P50)), fmtRatio(ratio(sel.P90, open.P90)), fmtRatio(ratio(sel.P99, open.P99)), "", "")
	conQ := pairedQuantiles(ms(r.toSelected), ms(r.toOpen))
	tt.AddRow("  95% interval (pairs resampled)", fmtInterval(conQ[0]), fmtInterval(conQ[1]), fmtInterval(conQ[2]), "", "")
	tt.Notes = append(tt.Notes,
		"the client (bench-open, selected by no policy) connects to a server in bench-pol whose ingress five policies isolate and allow-client allows, and to one in bench-open; each connection is timed inside the client's namespace from connect to the first byte the server sends, so both pass the node's forward hook and the policy table's verdict maps; 20 unrecorded pairs first",
		pairedNote("pair of connections", len(r.toSelected)))
	res.Tables = append(res.Tables, tt)

	all := append(append([]time.Duration{}, r.allowed...), r.denied...)
	pd, pa, pn, ap := Summarize(ms(all)), Summarize(ms(r.allowed)), Summarize(ms(r.denied)), Summarize(ms(r.applied))
	pt := Table{
		Title:  fmt.Sprintf("From a NetworkPolicy change in the API server to its enforcement on the node: %d changes (ms)", len(all)),
		Header: []string{"", "n", "p50", "p90", "p99", "max"},
	}
	prow := func(name string, d Dist) {
		pt.AddRow(name, fmt.Sprint(d.N), fmtMS(d.P50), fmtMS(d.P90), fmtMS(d.P99), fmtMS(d.Max))
	}
	prow("in force, judged by traffic: every change", pd)
	prow("  changes that allow the client", pa)
	prow("  changes that deny it", pn)
	prow("the agent's own Applied time after the change (/v1/policy)", ap)
	pt.Notes = append(pt.Notes,
		fmt.Sprintf("during the changes the agent wrote its rules %.0f times, %s ms each on average (vpcnet_policy_write_seconds): the rest of a change's time is the API server's write and watch, and the agent's wait for the CPU",
			r.flipAgent.Sum("vpcnet_policy_write_seconds_count"), fmtMS(mean(r.flipAgent, "vpcnet_policy_write_seconds"))),
		fmt.Sprintf("each change updates allow-client's podSelector (role: client, or a role no pod has) and is timed from just before the update request; the client starts a new connection to the isolated server every %s (each given %s: a dropped SYN is retransmitted only after a second), and the change counts as in force from the first attempt after the last one that still saw the old verdict, with %d in a row seeing the new one", probeEvery, probeTimeout, probeSettled),
		fmt.Sprintf("changes not in force within %s (counted as that): %d", probeLimit, r.notInForce))
	res.Tables = append(res.Tables, pt)

	mt := Table{
		Title:  fmt.Sprintf("Agent memory with the %d policies and %s known, after %s idle (MiB)", r.filled.policies, known, memorySettle),
		Header: []string{"figure", "enforcing", "off", "difference"},
	}
	mrow := func(name string, on, off float64) {
		mt.AddRow(name, fmtMiB(on), fmtMiB(off), fmtMiB(on-off))
	}
	mrow("resident memory (VmRSS)", r.onMem.rss, r.offMem.rss)
	mrow("  anonymous (RssAnon): heap, stacks, runtime", r.onMem.anon, r.offMem.anon)
	mrow("  file-backed (RssFile): the executable's pages", r.onMem.file, r.offMem.file)
	mrow("peak resident memory (VmHWM)", r.onMem.hwm, r.offMem.hwm)
	mrow("Go heap in use (go_memstats_heap_inuse_bytes)", r.onMem.heap, r.offMem.heap)
	mrow("memory the Go runtime holds (go_memstats_sys_bytes)", r.onMem.sys, r.offMem.sys)
	mt.AddRow("CPU while idle (10 s window, % of one core)", fmtPct(r.onMem.cpu), fmtPct(r.offMem.cpu), "")
	mt.Notes = append(mt.Notes, "the enforcing agent watches every NetworkPolicy, namespace and pod of the cluster; the other only counts the policies every 5 minutes; both watch their own Node and its pods. Read from /proc/PID/status after the other measurements, both at once")
	res.Tables = append(res.Tables, mt)

	addP50, addP99 := ratio(onAdd.P50, offAdd.P50), ratio(onAdd.P99, offAdd.P99)
	conP50, conP99 := ratio(sel.P50, open.P50), ratio(sel.P99, open.P99)
	extra := (r.onMem.rss - r.offMem.rss) / (1 << 20)
	res.figure("policy_add_p50_ratio", addP50)
	res.figure("policy_add_p99_ratio", addP99)
	res.figure("policy_add_p99_ratio_lo", addQ[2].Lo)
	res.figure("policy_add_p99_ratio_hi", addQ[2].Hi)
	res.figure("policy_add_on_p50_ms", onAdd.P50)
	res.figure("policy_add_off_p50_ms", offAdd.P50)
	res.figure("policy_del_p50_ratio", ratio(onDel.P50, offDel.P50))
	res.figure("policy_write_mean_ms", write)
	res.figure("policy_connect_p50_ratio", conP50)
	res.figure("policy_connect_p99_ratio", conP99)
	res.figure("policy_connect_p99_ratio_lo", conQ[2].Lo)
	res.figure("policy_connect_p99_ratio_hi", conQ[2].Hi)
	res.figure("policy_propagation_p50_ms", pd.P50)
	res.figure("policy_propagation_p99_ms", pd.P99)
	res.figure("policy_rss_on_mib", r.onMem.rss/(1<<20))
	res.figure("policy_rss_off_mib", r.offMem.rss/(1<<20))
	res.figure("policy_rss_extra_mib", extra)

	addMeasured := fmt.Sprintf("%s at p50, %s at p99 (95%% intervals %s and %s; %s against %s ms at p50)", fmtRatio(addP50), fmtRatio(addP99),
		fmtInterval(addQ[0]), fmtInterval(addQ[2]), fmtMS(onAdd.P50), fmtMS(offAdd.P50))
	goals := []GoalLine{
		{Goal: fmt.Sprintf("warm ADD with %d NetworkPolicies ≤ %.1f× the ADD without, p50 and p99", r.filled.policies, goalAddRatio),
			Measured: addMeasured,
			Met:      addP50 <= goalAddRatio && addP99 <= goalAddRatio},
		{Goal: fmt.Sprintf("TCP set-up between two pods a policy allows ≤ %.1f× with no policy, p50 and p99", goalConnectRatio),
			Measured: fmt.Sprintf("%s at p50, %s at p99 (95%% intervals %s and %s)", fmtRatio(conP50), fmtRatio(conP99), fmtInterval(conQ[0]), fmtInterval(conQ[2])),
			Met:      conP50 <= goalConnectRatio && conP99 <= goalConnectRatio},
		{Goal: fmt.Sprintf("policy change in the API server to enforcement on the node, p99 ≤ %s", goalPropagation),
			Measured: fmt.Sprintf("%s ms p50, %s ms p99 over %d changes", fmtMS(pd.P50), fmtMS(pd.P99), pd.N),
			Met:      pd.N > 0 && pd.P99 <= float64(goalPropagation/time.Millisecond) && r.notInForce == 0},
		{Goal: fmt.Sprintf("agent RSS with %d policies and %s known ≤ %.0f MiB more than without", r.filled.policies, known, goalExtraRSSMiB),
			Measured: fmt.Sprintf("%+.1f MiB (%s against %s)", extra, fmtMiB(r.onMem.rss), fmtMiB(r.offMem.rss)),
			Met:      extra <= goalExtraRSSMiB},
	}
	gt := Table{Title: "Goals of the NetworkPolicy issue in this run", Header: []string{"goal", "measured", "verdict"}}
	for _, g := range goals {
		res.goal(g.Goal, g.Measured, g.Met)
		verdict := "met"
		if !g.Met {
			verdict = "**missed**"
		}
		gt.AddRow(g.Goal, g.Measured, verdict)
	}
	// The run's goals section is rewritten only by a run of every
	// scenario; this table shows the verdicts beside the figures
	// whichever scenarios ran.
	res.Tables = append([]Table{gt}, res.Tables...)
}

// describeVerdicts sums up one pod's verdicts: the policies and allows
// per direction and how many peer prefixes they hold.
func describeVerdicts(p introspect.PolicyPod) string {
	dir := func(name string, d *introspect.PolicyDirection) string {
		if d == nil {
			return name + " open"
		}
		peers := 0
		for _, a := range d.Allows {
			peers += len(a.Peers)
		}
		return fmt.Sprintf("%s: %d policies, %d allows, %d peer prefixes", name, len(d.Policies), len(d.Allows), peers)
	}
	return dir("ingress", p.Ingress) + "; " + dir("egress", p.Egress)
}

// pairedQuantiles are the p50, p90 and p99 ratios of paired samples
// with their intervals.
func pairedQuantiles(a, b []float64) [3]PairedRatio {
	return [3]PairedRatio{pairedRatio(a, b, 0.50), pairedRatio(a, b, 0.90), pairedRatio(a, b, 0.99)}
}

func fmtInterval(r PairedRatio) string {
	if r.Lo == 0 {
		return "n/a"
	}
	return fmt.Sprintf("%.2f–%.2f×", r.Lo, r.Hi)
}

// pairedNote says how a table's ratios and their intervals are made.
func pairedNote(pair string, n int) string {
	return fmt.Sprintf("each ratio is the enforcing arm's quantile over the other's, the samples taken in pairs (one of each per %s, back to back, their order flipping every pair, so both arms see the machine's load of that moment); its 95%% interval is the middle 95%% of the same ratio over %d resamples of the %d pairs (drawn with replacement, a pair staying a pair, from a fixed seed): how far the ratio could move on another run of this tree under this load. The goal is judged on the ratio itself", pair, bootstrapResamples, n)
}
