package main

import (
	"fmt"
	"maps"
	"slices"
	"time"
)

func (b *bench) warmReport(res *Result, v, r *cycles, phases pluginLog, agent Metrics) {
	sum := func(c *cycles) []time.Duration {
		out := make([]time.Duration, len(c.add))
		for i := range c.add {
			out[i] = c.add[i] + c.del[i]
		}
		return out
	}
	lat := Table{
		Title:  fmt.Sprintf("Warm ADD and DEL, %d cycles each, interleaved (ms)", len(v.add)),
		Header: []string{"", "p50", "p90", "p99", "min", "max"},
	}
	row := func(name string, d Dist) {
		lat.AddRow(name, fmtMS(d.P50), fmtMS(d.P90), fmtMS(d.P99), fmtMS(d.Min), fmtMS(d.Max))
	}
	ratioRow := func(name string, a, b Dist) {
		lat.AddRow(name, fmtRatio(ratio(a.P50, b.P50)), fmtRatio(ratio(a.P90, b.P90)), fmtRatio(ratio(a.P99, b.P99)), "", "")
	}
	for _, op := range []struct {
		name string
		get  func(*cycles) []time.Duration
	}{
		{"ADD", func(c *cycles) []time.Duration { return c.add }},
		{"DEL", func(c *cycles) []time.Duration { return c.del }},
		{"ADD+DEL", sum},
	} {
		dv, dr := Summarize(ms(op.get(v))), Summarize(ms(op.get(r)))
		row(op.name+" vpcnet", dv)
		row(op.name+" ptp+host-local", dr)
		ratioRow(op.name+" vpcnet / reference", dv, dr)
		res.figure(op.name+"_p50_ratio", ratio(dv.P50, dr.P50))
		res.figure(op.name+"_p99_ratio", ratio(dv.P99, dr.P99))
		res.figure(op.name+"_vpcnet_p50_ms", dv.P50)
		res.figure(op.name+"_reference_p50_ms", dr.P50)
		if op.name != "ADD+DEL" {
			p50, p99 := ratio(dv.P50, dr.P50), ratio(dv.P99, dr.P99)
			res.goal(fmt.Sprintf("warm %s ≤ 1.0× the reference at p50 and p99", op.name),
				fmt.Sprintf("%s at p50, %s at p99", fmtRatio(p50), fmtRatio(p99)), p50 <= 1 && p99 <= 1)
		}
		if op.name == "ADD+DEL" {
			p50, p99 := ratio(dv.P50, dr.P50), ratio(dv.P99, dr.P99)
			res.goal("warm ADD+DEL ≤ 1.3× the reference at p50 and p99",
				fmt.Sprintf("%s at p50, %s at p99", fmtRatio(p50), fmtRatio(p99)), p50 <= 1.3 && p99 <= 1.3)
		}
	}
	lat.Notes = append(lat.Notes,
		"vpcnet: the agent's conflist, the plugin alone (it maps hostPorts itself; no portmap on either side); reference: Debian's ptp + host-local, cniVersion 1.0.0",
		"one m5.4xlarge node with its pool at target (WARM_ENI_TARGET=1), IP_COOLDOWN_PERIOD=1; each cycle makes a fresh pod namespace (not timed); times are libcni's AddNetworkList/DelNetworkList as containerd calls them")
	res.Tables = append(res.Tables, lat)

	// The breakdown, per ADD, from the driver's stopwatch around the
	// plugin process and the plugin's own phase times.
	var total, exec, proc, pre, rpc, wire, lib []time.Duration
	for i, id := range v.ids {
		p, ok := phases.add[id]
		if !ok {
			continue
		}
		total = append(total, v.add[i])
		exec = append(exec, v.exec[i])
		proc = append(proc, v.exec[i]-p.took)
		pre = append(pre, p.took-p.rpc-p.wire)
		rpc = append(rpc, p.rpc)
		wire = append(wire, p.wire)
		lib = append(lib, v.add[i]-v.exec[i])
	}
	med := func(ds []time.Duration) float64 { return Summarize(ms(ds)).P50 }
	mean := func(name string, match ...string) float64 {
		n := agent.Sum(name+"_count", match...)
		if n == 0 {
			return 0
		}
		return agent.Sum(name+"_sum", match...) / n * 1000
	}
	handler := mean("vpcnet_rpc_duration_seconds", "method", "add")
	ckpt := mean("vpcnet_checkpoint_write_seconds")
	t := med(total)
	share := func(x float64) string {
		if t == 0 || x == 0 {
			return ""
		}
		return fmt.Sprintf("%.0f%%", 100*x/t)
	}
	bd := Table{
		Title:  fmt.Sprintf("Where a warm vpcnet ADD spends its time (%d ADDs; median ms unless marked mean)", len(total)),
		Header: []string{"phase", "ms", "share of ADD"},
	}
	add := func(name string, x float64) { bd.AddRow(name, fmtMS(x), share(x)) }
	add("ADD as containerd sees it (libcni)", t)
	add("  plugin process, fork to exit", med(exec))
	add("    process start and exit (exec, Go runtime and package init, result, exit)", med(proc))
	add("    config, log file, agent client set-up", med(pre))
	add("    Add RPC to vpcnetd, as the plugin sees it", med(rpc))
	add("      agent handler (mean, vpcnet_rpc_duration_seconds)", handler)
	add("        of which checkpoint write (mean, vpcnet_checkpoint_write_seconds)", ckpt)
	add("    netlink: veth, addresses, routes, rules, neighbour", med(wire))
	add("  libcni outside the plugin (result cache write)", med(lib))
	bd.Notes = append(bd.Notes,
		"medians of the parts do not add up exactly to the median whole",
		"the checkpoint write mean covers the DELs' writes too; each ADD and DEL writes the checkpoint once")
	res.Tables = append(res.Tables, bd)
	res.figure("add_process_ms", med(proc))
	res.figure("add_rpc_ms", med(rpc))
	res.figure("add_wire_ms", med(wire))
	res.figure("add_agent_handler_mean_ms", handler)
	res.figure("checkpoint_write_mean_ms", ckpt)
	rexec := Summarize(ms(r.exec)).P50
	res.figure("reference_ptp_exec_ms", rexec)
	b.delBreakdown(res, v, r, phases, agent)
}

// delBreakdown is where a warm DEL spends its time, vpcnet's from the
// plugin's phase times, the reference's from its two processes.
func (b *bench) delBreakdown(res *Result, v, r *cycles, phases pluginLog, agent Metrics) {
	var total, exec, proc, pre, unwire, rpc []time.Duration
	for i, id := range v.ids {
		p, ok := phases.del[id]
		if !ok || i >= len(v.delExec) {
			continue
		}
		total = append(total, v.del[i])
		exec = append(exec, v.delExec[i])
		proc = append(proc, v.delExec[i]-p.took)
		pre = append(pre, p.took-p.unwire-p.rpc)
		unwire = append(unwire, p.unwire)
		rpc = append(rpc, p.rpc)
	}
	med := func(ds []time.Duration) float64 { return Summarize(ms(ds)).P50 }
	handler := 0.0
	if n := agent.Sum("vpcnet_rpc_duration_seconds_count", "method", "del"); n > 0 {
		handler = agent.Sum("vpcnet_rpc_duration_seconds_sum", "method", "del") / n * 1000
	}
	t := med(total)
	share := func(x float64) string {
		if t == 0 || x == 0 {
			return ""
		}
		return fmt.Sprintf("%.0f%%", 100*x/t)
	}
	bd := Table{
		Title:  fmt.Sprintf("Where a warm DEL spends its time (%d DELs; median ms unless marked mean)", len(total)),
		Header: []string{"phase", "ms", "share of vpcnet's DEL"},
	}
	add := func(name string, x float64) { bd.AddRow(name, fmtMS(x), share(x)) }
	add("vpcnet DEL as containerd sees it (libcni)", t)
	add("  plugin process, fork to exit", med(exec))
	add("    process start and exit (exec, Go runtime and package init, exit)", med(proc))
	add("    config, log file", med(pre))
	add("    netlink: the route and rules to the pod (first, so the address is free of them; vpcnetd deletes the veth pair after answering)", med(unwire))
	add("    Del RPC to vpcnetd, as the plugin sees it", med(rpc))
	add("      agent handler, with its checkpoint write (mean, vpcnet_rpc_duration_seconds)", handler)
	rt := med(r.del)
	bd.AddRow("ptp+host-local DEL as containerd sees it (libcni)", fmtMS(rt), "")
	bd.AddRow("  ptp process, fork to exit (runs host-local inside)", fmtMS(med(r.delExec)), "")
	bd.Notes = append(bd.Notes, "medians of the parts do not add up exactly to the median whole")
	res.Tables = append(res.Tables, bd)
	res.figure("del_process_ms", med(proc))
	res.figure("del_unwire_ms", med(unwire))
	res.figure("del_rpc_ms", med(rpc))
	res.figure("del_agent_handler_mean_ms", handler)
	res.figure("reference_ptp_del_exec_ms", med(r.delExec))
}

func sortedKeys[V any](m map[string]V) []string { return slices.Sorted(maps.Keys(m)) }
