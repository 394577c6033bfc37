package doctor

import (
	"fmt"
	"time"
)

// rule finds one family of problems in the facts. Rules never do I/O.
type rule func(f Facts) []Finding

// rules is every check, in the order of DESIGN.md's stories.
var rules = []rule{
	agentFindings,
	limitsFindings,
	stateFindings,
	capacityFindings,
	budgetFindings,
	coolingFindings,
	leakFindings,
	readinessFindings,
	identityFindings,
	authFindings,
	unmanagedFindings,
	permissionFindings,
	awsNodeFindings,
	imdsExposureFindings,
	ipv6Findings,
	policyFindings,
	pathFindings,
}

// Diagnose turns what Gather read into a report. It is pure: the same
// facts always give the same report.
func Diagnose(f Facts) Report {
	r := Report{Sources: f.Sources}
	for _, rl := range rules {
		r.Findings = append(r.Findings, rl(f)...)
	}
	sortFindings(r.Findings)
	return r
}

// age says how long ago t was, rounded for people.
func age(now, t time.Time) string {
	d := now.Sub(t)
	switch {
	case d < 0:
		return "in the future (clock skew?)"
	case d < time.Minute:
		return d.Round(time.Second).String()
	case d < 48*time.Hour:
		return d.Round(time.Minute).String()
	}
	return fmt.Sprintf("%dd", int(d.Hours()/24))
}

// setting reads one of the agent's settings, "" when unknown.
func (f Facts) setting(name string) string {
	if f.Agent == nil || f.Agent.Config == nil {
		return ""
	}
	return f.Agent.Config[name]
}
