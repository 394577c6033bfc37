package scale

import (
	"fmt"

	"github.com/vpcnet/vpcnet/budget/budgetapi"
	"io"
	"maps"
	"slices"
	"strings"
	"time"
)

// Report is a scenario's figures. Times are simulated.
type Report struct {
	Scenario string
	Summary  string
	Nodes    int
	Account  Account
	// Pods is how many measured pods got an address; Unaddressed how
	// many were still waiting when the run ended.
	Pods        int
	Unaddressed int
	// LastAddress is from the start of the measured phase until the last
	// of its pods had an address; Window is the whole measured phase.
	LastAddress time.Duration
	Window      time.Duration
	// LowerBound is the calls the scenario needs at the least, over the
	// account's buckets, plus one attach delay when an ENI must attach;
	// Needed lists those calls by action.
	LowerBound time.Duration
	Needed     map[string]int
	// Calls and Throttled count EC2 calls and RequestLimitExceeded answers
	// by action, over all nodes.
	Calls     map[string]int
	Throttled map[string]int
	// ThrottledPods waited while their node heard RequestLimitExceeded;
	// ThrottledWait is the sum of their waits, ThrottledMax the longest.
	ThrottledPods int
	ThrottledWait time.Duration
	ThrottledMax  time.Duration
	// WaitP50, WaitMax: the measured pods' waits for an address.
	WaitP50, WaitMax time.Duration
	// AddFailures counts ADDs the agent answered with an error (kubelet
	// retried them).
	AddFailures int
	// IdleAddresses are addresses on the nodes' ENIs that no pod holds,
	// at the end of the run.
	IdleAddresses int
	LivePods      int
	ENIs          int
	// Wall is the run's wall time, when the caller measured it.
	Wall time.Duration
	// Budget says the budget controller was installed.
	Budget bool
	// Margin is the share of each bucket the budget controller granted.
	Margin float64
	// Preflight says the agents ran their IAM preflight; SubnetDiscovery
	// that they discovered subnets for new ENIs; Settings are the agent
	// settings given (the rest are production's defaults).
	Preflight       bool
	SubnetDiscovery bool
	Settings        map[string]string
	// DryRuns count the preflight's DryRun probes by action; ProbeCalls
	// every EC2 call of the preflight (the probes and its read of the
	// primary ENI), over all nodes, and ProbeCallsMax on the node that
	// made most.
	DryRuns       map[string]int
	ProbeCalls    int
	ProbeCallsMax int
	// Mutating counts the calls that change something in EC2 (DryRun
	// probes not counted).
	Mutating int
	// OtherShare is the share of every mutating refill the account's
	// other client spent; OtherCalls its calls, OtherRefused those EC2
	// answered RequestLimitExceeded, by action.
	OtherShare   float64
	OtherCalls   int
	OtherRefused map[string]int
	// Failover is the failover scenario's figures; nil in the others.
	Failover *FailoverReport
	// podWaits are the measured pods' waits by name.
	podWaits map[string]time.Duration
}

// FailoverReport is what the budget controller's failover cost.
type FailoverReport struct {
	// At is when the leader died, from the start of the measured phase;
	// Takeover how long after that its successor first answered.
	At, Takeover time.Duration
	// Refused counts the agents' asks that found no leader answering
	// (dead, or not leading yet); AloneJobs the jobs that then called
	// EC2 on their node's own budget, on AloneNodes nodes.
	Refused, AloneJobs, AloneNodes int
	// Held counts the asks that waited for the next leader instead.
	Held int
	// RequestLimitExceeded answers before the leader died, until its
	// successor answered, and after.
	ThrottledBefore, ThrottledDuring, ThrottledAfter int
	// Compared says the same join ran without a failover (same seed):
	// BaselineLast is its last pod; MaxExtra the most any pod waited
	// longer than there (MaxExtraPod which); Target the Lease's takeover
	// time plus one attach, and OverTarget the pods whose extra wait
	// passed it.
	Compared     bool
	BaselineLast time.Duration
	MaxExtra     time.Duration
	MaxExtraPod  string
	Target       time.Duration
	OverTarget   int
	// ExtraP50, ExtraP90, ExtraP99 are the pods' extra waits (negative:
	// sooner than without the failover).
	ExtraP50, ExtraP90, ExtraP99 time.Duration
}

// compare measures each pod's extra wait against base, the same join
// without a failover.
func (f *FailoverReport) compare(base, rep *Report) {
	f.Compared, f.BaselineLast = true, base.LastAddress
	f.Target = f.Takeover + rep.Account.AttachDelay
	var extra []time.Duration
	for _, name := range slices.Sorted(maps.Keys(rep.podWaits)) {
		w := rep.podWaits[name]
		b, ok := base.podWaits[name]
		if !ok {
			continue
		}
		extra = append(extra, w-b)
		if x := w - b; x > f.MaxExtra {
			f.MaxExtra, f.MaxExtraPod = x, name
		}
		if w-b > f.Target {
			f.OverTarget++
		}
	}
	if len(extra) > 0 {
		slices.Sort(extra)
		at := func(q float64) time.Duration { return extra[min(len(extra)-1, int(q*float64(len(extra))))] }
		f.ExtraP50, f.ExtraP90, f.ExtraP99 = at(0.5), at(0.9), at(0.99)
	}
}

// fill computes the figures at the end of the run.
func (r *run) fill(rep *Report) {
	rep.Window = r.now().Sub(r.start)
	rep.Pods, rep.Unaddressed = len(r.waits), r.waiting
	if !r.lastAddr.IsZero() {
		rep.LastAddress = r.lastAddr.Sub(r.start)
	}
	rep.Calls, rep.Throttled = map[string]int{}, map[string]int{}
	for _, n := range r.nodes {
		n.tr.mu.Lock()
		for a, k := range n.tr.calls {
			rep.Calls[a] += k
		}
		for a, k := range n.tr.throttled {
			rep.Throttled[a] += k
		}
		n.tr.mu.Unlock()
	}
	rep.DryRuns = map[string]int{}
	for _, n := range r.nodes {
		n.tr.mu.Lock()
		for a, k := range n.tr.dry {
			rep.DryRuns[a] += k
		}
		n.tr.mu.Unlock()
		rep.ProbeCalls += n.probeCalls
		rep.ProbeCallsMax = max(rep.ProbeCallsMax, n.probeCalls)
	}
	for a, k := range rep.Calls {
		if mutating[a] {
			rep.Mutating += k
		}
	}
	rep.AddFailures = r.addFailures
	rep.ThrottledPods = len(r.throttledWaits)
	for _, w := range r.throttledWaits {
		rep.ThrottledWait += w
		rep.ThrottledMax = max(rep.ThrottledMax, w)
	}
	if len(r.waits) > 0 {
		w := slices.Clone(r.waits)
		slices.Sort(w)
		rep.WaitP50, rep.WaitMax = w[len(w)/2], w[len(w)-1]
	}
	for _, n := range r.nodes {
		ifs, err := r.cloud.Interfaces(n.id)
		if err != nil {
			r.fatal(err)
			return
		}
		held := 0
		for _, i := range ifs {
			held += len(i.Addresses) - 1 + 16*len(i.Prefixes)
		}
		live := 0
		for _, p := range n.pods {
			if p.state == podLive {
				live++
			}
		}
		rep.ENIs += len(ifs)
		rep.LivePods += live
		rep.IdleAddresses += held - live
	}
	rep.Needed = r.needed
	rep.LowerBound = r.lowerBound()
	if r.other != nil {
		rep.OtherCalls, rep.OtherRefused = r.other.sent, r.other.refused
	}
	rep.podWaits = r.podWaits
	if r.budget != nil && r.budget.el != nil {
		rep.Failover = r.failoverFigures()
	}
}

func (r *run) failoverFigures() *FailoverReport {
	e := r.budget.el
	f := &FailoverReport{At: e.killedAt.Sub(r.start), Refused: e.refused}
	end := e.tookOver
	if !e.tookOver.IsZero() {
		f.Takeover = e.tookOver.Sub(e.killedAt)
	} else {
		end = r.now().Add(time.Nanosecond)
	}
	for _, n := range r.nodes {
		f.AloneJobs += n.bc.alone
		f.Held += n.bc.held
		if n.bc.alone > 0 {
			f.AloneNodes++
		}
		n.tr.mu.Lock()
		for _, t := range n.tr.throttledAt {
			switch {
			case e.killedAt.IsZero() || t.Before(e.killedAt):
				f.ThrottledBefore++
			case t.Before(end):
				f.ThrottledDuring++
			default:
				f.ThrottledAfter++
			}
		}
		n.tr.mu.Unlock()
	}
	return f
}

// lowerBound is max over actions of (needed − burst) ÷ refill, plus one
// attach delay when an ENI must attach. With another client spending
// OtherShare of a mutating refill, this cluster has the rest of it (the
// other's share of the burst, a few tokens, is left out).
func (r *run) lowerBound() time.Duration {
	var lb time.Duration
	for a, k := range r.needed {
		b := r.opts.Account.bucketFor(a)
		refill := b.Refill
		if !strings.HasPrefix(a, "Describe") {
			refill *= 1 - r.opts.OtherShare
		}
		if over := k - b.Burst; over > 0 && refill > 0 {
			lb = max(lb, time.Duration(float64(over)/refill*float64(time.Second)))
		}
	}
	if r.needed["AttachNetworkInterface"] > 0 {
		lb += r.opts.Account.AttachDelay
	}
	return lb
}

// Write prints the report as Markdown.
func (rep *Report) Write(w io.Writer) {
	per := func(k int) string { return fmt.Sprintf("%.2f", float64(k)/float64(rep.Nodes)) }
	fmt.Fprintf(w, "#### %s: %s\n\n", rep.Scenario, rep.Summary)
	if rep.Budget {
		fmt.Fprintf(w, "With the budget controller: every node's EC2 calls granted by one budget.Ledger at %.0f%% of the account's buckets, pods waiting first.\n\n", 100*rep.Margin)
	} else {
		fmt.Fprintf(w, "Without the budget controller: every node on its own budget.\n\n")
	}
	fmt.Fprintf(w, "Agent settings: production's defaults%s; subnet discovery %s; IAM preflight %s.\n\n",
		fmtSettings(rep.Settings), onOff(rep.SubnetDiscovery), onOff(rep.Preflight))
	fmt.Fprintf(w, "%d nodes (m5.xlarge), %d measured pods; buckets: mutating %d/%.0f per s, Describe %d/%.0f per s (per action); attach delay %s.\n\n",
		rep.Nodes, rep.Pods, rep.Account.Mutating.Burst, rep.Account.Mutating.Refill, rep.Account.Describe.Burst, rep.Account.Describe.Refill, rep.Account.AttachDelay)
	if rep.OtherShare > 0 {
		fmt.Fprintf(w, "Another client of the account, which the budget controller neither grants nor hears of, spends %.0f%% of every mutating bucket's refill (CreateNetworkInterface, AttachNetworkInterface, ModifyNetworkInterfaceAttribute, AssignPrivateIpAddresses), evenly spaced; the lower bound gives this cluster the rest.\n\n", 100*rep.OtherShare)
	}
	fmt.Fprintf(w, "| figure | value |\n|---|---|\n")
	if rep.Pods > 0 {
		fmt.Fprintf(w, "| time until the last pod has an address | %s |\n", fmtDur(rep.LastAddress))
		if rep.LowerBound > 0 {
			fmt.Fprintf(w, "| lower bound (needed calls ÷ refill + attach) | %s (%s; ratio %.2f) |\n", fmtDur(rep.LowerBound), fmtCounts(rep.Needed), rep.LastAddress.Seconds()/rep.LowerBound.Seconds())
		}
		fmt.Fprintf(w, "| pod wait p50 / max | %s / %s |\n", fmtDur(rep.WaitP50), fmtDur(rep.WaitMax))
	}
	if rep.Unaddressed > 0 {
		fmt.Fprintf(w, "| pods still without an address at the end | %d |\n", rep.Unaddressed)
	}
	fmt.Fprintf(w, "| measured window | %s |\n", fmtDur(rep.Window))
	fmt.Fprintf(w, "| RequestLimitExceeded answers | %d (%s) |\n", sum(rep.Throttled), fmtCounts(rep.Throttled))
	fmt.Fprintf(w, "| pods that waited while their node was throttled | %d, %s in all, longest %s |\n", rep.ThrottledPods, fmtDur(rep.ThrottledWait), fmtDur(rep.ThrottledMax))
	if rep.OtherShare > 0 {
		fmt.Fprintf(w, "| the other client's calls refused (RequestLimitExceeded) | %d of %d (%s) |\n", sum(rep.OtherRefused), rep.OtherCalls, fmtCounts(rep.OtherRefused))
	}
	if f := rep.Failover; f != nil {
		fmt.Fprintf(w, "| the leader died at | %s |\n", fmtDur(f.At))
		if f.Takeover > 0 {
			fmt.Fprintf(w, "| its successor answered after (Lease %s, renew deadline %s, retry %s) | %s |\n", leaseDuration, renewDeadline, retryPeriod, fmtDur(f.Takeover))
		} else {
			fmt.Fprintf(w, "| its successor answered | never |\n")
		}
		fmt.Fprintf(w, "| agents' asks no leader answered | %d |\n", f.Refused)
		fmt.Fprintf(w, "| asks held for the next leader (each a retry after at most %s) | %d |\n", budgetapi.ElectionPause, f.Held)
		fmt.Fprintf(w, "| jobs that called EC2 on their node's own budget (no controller answered) | %d, on %d nodes |\n", f.AloneJobs, f.AloneNodes)
		fmt.Fprintf(w, "| RequestLimitExceeded before the death / until the successor answered / after | %d / %d / %d |\n", f.ThrottledBefore, f.ThrottledDuring, f.ThrottledAfter)
		if f.Compared {
			fmt.Fprintf(w, "| the same join without a failover (same seed): last pod | %s |\n", fmtDur(f.BaselineLast))
			fmt.Fprintf(w, "| pods' extra wait over that join's: p50 / p90 / p99 / max (%s) | %s / %s / %s / %s |\n", f.MaxExtraPod, fmtSigned(f.ExtraP50), fmtSigned(f.ExtraP90), fmtSigned(f.ExtraP99), fmtDur(f.MaxExtra))
			fmt.Fprintf(w, "| pods whose extra wait passed the takeover plus one attach (%s) | %d |\n", fmtDur(f.Target), f.OverTarget)
		}
	}
	fmt.Fprintf(w, "| ADDs answered with an error (kubelet retried each after 10-15 s) | %d (%s per measured pod; each a FailedCreatePodSandBox event and a sandbox made again) |\n", rep.AddFailures, perPod(rep.AddFailures, rep.Pods))
	fmt.Fprintf(w, "| mutating EC2 calls (DryRun probes not counted) | %d |\n", rep.Mutating)
	if rep.Preflight {
		fmt.Fprintf(w, "| IAM preflight: EC2 calls (tokens), DryRun probes and the primary ENI's read | %d, %s per node, at most %d on one node |\n", rep.ProbeCalls, per(rep.ProbeCalls), rep.ProbeCallsMax)
		fmt.Fprintf(w, "| — DryRun probes | %d (%s) |\n", sum(rep.DryRuns), fmtCounts(rep.DryRuns))
	}
	fmt.Fprintf(w, "| EC2 calls (DryRun probes not counted) | %d, %s per node |\n", sum(rep.Calls), per(sum(rep.Calls)))
	hours := rep.Window.Hours()
	for _, a := range slices.Sorted(maps.Keys(rep.Calls)) {
		line := fmt.Sprintf("| — %s per node | %s", a, per(rep.Calls[a]))
		if hours > 0 {
			line += fmt.Sprintf(" (%.1f per node per hour)", float64(rep.Calls[a])/float64(rep.Nodes)/hours)
		}
		fmt.Fprintln(w, line+" |")
	}
	fmt.Fprintf(w, "| idle addresses held at the end | %d (%s per node; %d ENIs, %d live pods) |\n", rep.IdleAddresses, per(rep.IdleAddresses), rep.ENIs, rep.LivePods)
	if rep.Wall > 0 {
		fmt.Fprintf(w, "| wall time | %s |\n", rep.Wall.Round(time.Second))
	}
	fmt.Fprintln(w)
}

func onOff(b bool) string {
	if b {
		return "on"
	}
	return "off"
}

// fmtSettings lists the settings a run changed, for the report.
func fmtSettings(m map[string]string) string {
	if len(m) == 0 {
		return ""
	}
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, k+"="+m[k])
	}
	return ", except " + strings.Join(parts, ", ")
}

// perPod is n per measured pod, to two places.
func perPod(n, pods int) string {
	if pods == 0 {
		return "-"
	}
	return fmt.Sprintf("%.2f", float64(n)/float64(pods))
}

func sum(m map[string]int) int {
	t := 0
	for _, v := range m {
		t += v
	}
	return t
}

func fmtCounts(m map[string]int) string {
	if len(m) == 0 {
		return "none"
	}
	var parts []string
	for _, a := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, fmt.Sprintf("%s %d", a, m[a]))
	}
	return strings.Join(parts, ", ")
}

// fmtSigned is fmtDur for a duration that may be negative.
func fmtSigned(d time.Duration) string {
	if d < 0 {
		return "-" + fmtDur(-d)
	}
	return fmtDur(d)
}

func fmtDur(d time.Duration) string {
	if d >= time.Minute {
		return fmt.Sprintf("%s (%.0f s)", d.Round(time.Second), d.Seconds())
	}
	return d.Round(100 * time.Millisecond).String()
}
