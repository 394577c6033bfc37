package main

import (
	"fmt"
	"time"
)

// warm6Report is the IPv6 warm table: each vpcnet arm beside the
// reference, with their ratios, then the plugin processes' own times.
func (b *bench) warm6Report(res *Result, on, off, ref, refDAD, egress *cycles) {
	lat := Table{
		Title:  fmt.Sprintf("Warm IPv6 ADD and DEL, %d cycles each, interleaved (ms)", len(on.add)),
		Header: []string{"", "p50", "p90", "p99", "min", "max"},
	}
	row := func(name string, d Dist) {
		lat.AddRow(name, fmtMS(d.P50), fmtMS(d.P90), fmtMS(d.P99), fmtMS(d.Min), fmtMS(d.Max))
	}
	ratioRow := func(name string, a, b Dist) {
		lat.AddRow(name, fmtRatio(ratio(a.P50, b.P50)), fmtRatio(ratio(a.P90, b.P90)), fmtRatio(ratio(a.P99, b.P99)), "", "")
	}
	sum := func(c *cycles) []time.Duration {
		out := make([]time.Duration, len(c.add))
		for i := range c.add {
			out[i] = c.add[i] + c.del[i]
		}
		return out
	}
	for _, op := range []struct {
		name string
		get  func(*cycles) []time.Duration
	}{
		{"ADD", func(c *cycles) []time.Duration { return c.add }},
		{"DEL", func(c *cycles) []time.Duration { return c.del }},
		{"ADD+DEL", sum},
	} {
		don, doff, dr := Summarize(ms(op.get(on))), Summarize(ms(op.get(off))), Summarize(ms(op.get(ref)))
		dd := Summarize(ms(op.get(refDAD)))
		row(op.name+" vpcnet, IPv4 egress on", don)
		row(op.name+" vpcnet, IPv4 egress off", doff)
		row(op.name+" ptp+host-local", dr)
		row(fmt.Sprintf("%s ptp+host-local, DAD on (%d cycles)", op.name, len(refDAD.add)), dd)
		ratioRow(op.name+" vpcnet egress on / reference", don, dr)
		ratioRow(op.name+" vpcnet egress off / reference", doff, dr)
		res.figure(op.name+"_reference_dad_p50_ms", dd.P50)
		res.figure(op.name+"_p50_ratio", ratio(don.P50, dr.P50))
		res.figure(op.name+"_p99_ratio", ratio(don.P99, dr.P99))
		res.figure(op.name+"_noegress_p50_ratio", ratio(doff.P50, dr.P50))
		res.figure(op.name+"_noegress_p99_ratio", ratio(doff.P99, dr.P99))
		res.figure(op.name+"_vpcnet_p50_ms", don.P50)
		res.figure(op.name+"_reference_p50_ms", dr.P50)
	}
	lat.Notes = append(lat.Notes,
		"one m5.4xlarge node on a dual-stack VPC with ENABLE_IPv6=true, ENABLE_IPv4=false, ENABLE_PREFIX_DELEGATION=true: pods take addresses from the node's /80 on its primary ENI",
		"egress on: the agent's conflist, vpcnet then vpcnet-egress-v4 (ENABLE_V4_EGRESS, on by default as in aws-node; its IPAM is host-local v1.9.1, as the agent's cniVersion 1.1.0 needs); egress off: the same list without vpcnet-egress-v4, as the agent writes it with ENABLE_V4_EGRESS=false",
		"reference: Debian's ptp + host-local with the range fd00:64::/80 and a default route ::/0, cniVersion 1.0.0; DAD turned off in the fresh pod namespace before ADD (untimed), since ptp waits for its address to leave the tentative state and the ADD would otherwise time the kernel's DAD, not the plugins; the ratios are against this arm",
		"ptp+host-local, DAD on: the reference as it is, every tenth cycle only (it takes seconds)",
		"each cycle makes a fresh pod namespace (not timed); the arms take turns, rotating which goes first; times are libcni's AddNetworkList/DelNetworkList as containerd calls them")
	res.Tables = append(res.Tables, lat)

	med := func(ds []time.Duration) string { return fmtMS(Summarize(ms(ds)).P50) }
	procs := Table{
		Title:  "Plugin processes of a warm IPv6 ADD and DEL, fork to exit (median ms)",
		Header: []string{"process", "ADD", "DEL"},
	}
	procs.AddRow("vpcnet (egress on)", med(on.exec), med(on.delExec))
	procs.AddRow("vpcnet-egress-v4, with its host-local inside", med(egress.exec), med(egress.delExec))
	procs.AddRow("vpcnet (egress off)", med(off.exec), med(off.delExec))
	procs.AddRow("ptp, with its host-local inside", med(ref.exec), med(ref.delExec))
	procs.AddRow("ptp, with its host-local inside, DAD on", med(refDAD.exec), med(refDAD.delExec))
	res.Tables = append(res.Tables, procs)
}
