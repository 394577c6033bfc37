package main

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/vpcnet/vpcnet/introspect"
)

// writeStatus prints /v1/status for people: the verdict first, then what
// is wrong, then the counts.
func writeStatus(out io.Writer, st introspect.Status, now time.Time) error {
	w := newTable(out)
	fmt.Fprintf(w, "ready:\t%s\n", yesNo(st.Ready))
	fmt.Fprintf(w, "agent version:\t%s\n", strings.TrimSpace(st.Version+" "+st.Commit))
	limits := fmt.Sprintf("%d ENIs x %d addresses", st.MaxENIs, st.IPv4PerENI)
	if st.LimitsSource != "" {
		limits += " (" + st.LimitsSource + ")"
	}
	fmt.Fprintf(w, "instance:\t%s %s, %s\n", st.InstanceID, st.InstanceType, limits)
	if mp := st.MaxPods; mp.Value > 0 {
		fmt.Fprintf(w, "max pods:\t%d (%s); the node can address %d, EKS recommends %d\n", mp.Value, mp.Source, mp.Addressable, mp.Recommended)
		if mp.Problem != "" {
			fmt.Fprintf(w, "max pods problem:\t%s\n", mp.Problem)
		}
	}
	a := st.Addresses
	fmt.Fprintf(w, "addresses:\t%d total, %d assigned, %d cooling, %d free; %d ADDs waiting\n", a.Total, a.Assigned, a.Cooling, a.Free, st.Waiting)
	if st.NextFree != nil {
		fmt.Fprintf(w, "next address free:\t%s\n", ago(*st.NextFree, now))
	}
	fmt.Fprintf(w, "last reconcile:\t%s\n", ago(st.LastReconcile, now))
	if st.LastEC2Error != "" {
		fmt.Fprintf(w, "last EC2 error:\t%s\n", st.LastEC2Error)
	}
	if st.Shortfall != "" {
		fmt.Fprintf(w, "shortfall:\t%s\n", st.Shortfall)
	}
	if st.GrowthHeldUntil != nil {
		fmt.Fprintf(w, "growth held:\tuntil %s (%s)\n", st.GrowthHeldUntil.Format(time.RFC3339), ago(*st.GrowthHeldUntil, now))
	}
	if st.ReleaseHold != "" {
		fmt.Fprintf(w, "release held:\t%s\n", st.ReleaseHold)
	}
	if len(st.Quarantined) > 0 {
		fmt.Fprintf(w, "quarantined:\t%s\n", strings.Join(st.Quarantined, ", "))
	}
	if st.Reclaimed > 0 {
		fmt.Fprintf(w, "reclaimed:\t%d (released by the agent: pod gone without a DEL)\n", st.Reclaimed)
	}
	k := st.Kubernetes
	kube := "off: " + k.Source
	if k.Enabled {
		kube = fmt.Sprintf("reachable %s, node %s", yesNo(k.Reachable), orDash(k.Node))
		if k.LastError != "" {
			kube += ", last error: " + k.LastError
		}
		if k.NodeProblem != "" {
			kube += ", " + k.NodeProblem
		}
	}
	fmt.Fprintf(w, "kubernetes:\t%s\n", kube)
	if err := w.Flush(); err != nil {
		return err
	}

	fmt.Fprintln(out, "\nplanned change:")
	if len(st.Planned) == 0 {
		fmt.Fprintf(out, "  none: %s\n", noPlan(st))
	}
	for _, p := range st.Planned {
		fmt.Fprintf(out, "  - %s\n", p)
	}

	fmt.Fprintln(out, "\nconditions:")
	if err := writeConditions(out, st.Conditions, now); err != nil {
		return err
	}
	if failing := failingOnly(st.Diagnostics); len(failing) > 0 {
		fmt.Fprintln(out, "\ndiagnostics (they do not make the agent unready; `vpcnetctl doctor` explains them):")
		if err := writeConditions(out, failing, now); err != nil {
			return err
		}
	}
	if len(st.StaleEntries) > 0 {
		fmt.Fprintln(out, "\nstale checkpoint entries (held, but no pod on the host has them):")
		return writeHolds(out, st.StaleEntries, now)
	}
	return nil
}

// noPlan says why the agent plans no change. An empty plan is the pool
// at its target only when nothing is short: a limit that stops growth
// (the shortfall) empties the plan too, and "at its target" beside
// "3 addresses short" would contradict the line above it.
func noPlan(st introspect.Status) string {
	if st.Shortfall != "" {
		return "the pool is short of its target and cannot grow (see shortfall)"
	}
	return "the pool is at its target"
}

func failingOnly(cs []introspect.Condition) []introspect.Condition {
	var out []introspect.Condition
	for _, c := range cs {
		if !c.OK {
			out = append(out, c)
		}
	}
	return out
}

func writeConditions(out io.Writer, cs []introspect.Condition, now time.Time) error {
	w := newTable(out)
	fmt.Fprintln(w, "  NAME\tOK\tSINCE\tMESSAGE")
	for _, c := range cs {
		fmt.Fprintf(w, "  %s\t%s\t%s\t%s\n", c.Name, yesNo(c.OK), ago(c.Since, now), c.Message)
	}
	return w.Flush()
}

func writeENIs(out io.Writer, enis []introspect.ENI) error {
	w := newTable(out)
	fmt.Fprintln(w, "ENI\tDEV\tSUBNET\tCIDR\tPRIMARY IP\tTABLE\tTOTAL\tASSIGNED\tCOOLING\tFREE\tDELETE ON TERMINATION")
	for _, e := range enis {
		id := e.ID
		if e.Primary {
			id += " (primary)"
		}
		fmt.Fprintf(w, "%s\t%d\t%s\t%s\t%s\t%d\t%d\t%d\t%d\t%d\t%s\n", id, e.DeviceIndex, e.SubnetID, e.SubnetCIDR, e.PrimaryIP,
			e.RouteTable, e.Total, e.Assigned, e.Cooling, e.Free, yesNo(e.DeleteOnTermination))
	}
	return w.Flush()
}

func writeHolds(out io.Writer, holds []introspect.Hold, now time.Time) error {
	w := newTable(out)
	fmt.Fprintln(w, "ADDRESS\tPOD\tCONTAINER\tIFNAME\tSINCE\tQUARANTINED")
	for _, h := range holds {
		cid := h.ContainerID
		if len(cid) > 12 {
			cid = cid[:12]
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\n", h.Address, orDash(h.Pod), cid, h.IfName, ago(h.Since, now), yesNo(h.Quarantined))
	}
	return w.Flush()
}

func writeSettings(out io.Writer, settings []introspect.Setting) error {
	w := newTable(out)
	fmt.Fprintln(w, "NAME\tVALUE\tDEFAULT")
	for _, s := range settings {
		v := s.Value
		if v == s.Default {
			v += " (default)"
		}
		fmt.Fprintf(w, "%s\t%s\t%s\n", s.Name, orDash(v), orDash(s.Default))
	}
	return w.Flush()
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
