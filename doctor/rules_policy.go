package doctor

import (
	"fmt"
	"strings"
	"time"

	"github.com/vpcnet/vpcnet/introspect"
)

// How far behind the API server the node's NetworkPolicy rules may fall
// before doctor names it. A write takes milliseconds and the watches list
// in seconds, so tens of seconds means a stuck writer or a watch that
// cannot list, not a burst of changes.
const (
	policyLagLimit  = 30 * time.Second
	policySyncLimit = 60 * time.Second
)

// policyFindings: NetworkPolicy objects that this node leaves unenforced,
// and rules that lag what the API server says.
func policyFindings(f Facts) []Finding {
	if f.Agent == nil || f.Agent.Policy == nil {
		return nil
	}
	p := *f.Agent.Policy
	if !p.Enabled {
		return unenforcedFindings(f, p)
	}
	if !p.Synced {
		return notSyncedFindings(f, p)
	}
	return behindFindings(f, p)
}

// unenforcedFindings: enforcement is off while the cluster has policies,
// so every pod here is open to traffic they would deny, unless a chained
// engine enforces them.
func unenforcedFindings(f Facts, p introspect.PolicyStatus) []Finding {
	n, counted := p.Policies, "the agent counts"
	if f.Kube != nil && f.Kube.NetworkPolicies != nil {
		n, counted = *f.Kube.NetworkPolicies, "the API server lists"
	}
	if n == 0 {
		return nil
	}
	ev := []string{
		"agent: NetworkPolicy enforcement off: " + orDash(p.Source),
		fmt.Sprintf("%s %d NetworkPolicy objects", counted, n),
	}
	sev := Error
	switch engine := chainedEngine(f.Host); {
	case engine != "":
		// Another engine's rules are on the node: the policies are its
		// to enforce, as VPCNET_NETWORK_POLICY=off intends.
		return nil
	case f.Host == nil:
		sev = Warning
		ev = append(ev, "the host was not read, so doctor could not look for a chained policy engine's rules")
	default:
		ev = append(ev, "no Calico or Cilium chains in the node's nftables (iptables-nft's included)")
	}
	return []Finding{{
		ID: "network-policy-unenforced", Severity: sev,
		What:     fmt.Sprintf("the cluster has %d NetworkPolicy objects but this node enforces none of them: its pods are open to traffic they would deny", n),
		Evidence: ev,
		Fix:      "set VPCNET_NETWORK_POLICY=on (the default; chart: env.VPCNET_NETWORK_POLICY) with the agent reaching the Kubernetes API, or run a policy engine chained with vpcnet (Calico in policy-only mode, Cilium in generic-veth chaining; README, Network policy)",
	}}
}

// chainedEngine names the policy engine whose chains are on the host, ""
// when none is seen or the host was not read.
func chainedEngine(h *HostFacts) string {
	if h == nil {
		return ""
	}
	for _, c := range h.Chains {
		table, chain := strings.ToLower(c.Table), strings.ToLower(c.Chain)
		switch {
		case strings.HasPrefix(chain, "cali-") || strings.Contains(table, "calico"):
			return "Calico"
		case strings.HasPrefix(chain, "cilium") || strings.Contains(table, "cilium"):
			return "Cilium"
		}
	}
	return ""
}

// notSyncedFindings: the watches have not listed, so the agent has
// written no rules since it started, and what the mode does meanwhile
// is what the operator sees.
func notSyncedFindings(f Facts, p introspect.PolicyStatus) []Finding {
	waited, since := agentRunning(f)
	if p.PendingSince != nil && f.Now.Sub(*p.PendingSince) > waited {
		waited, since = f.Now.Sub(*p.PendingSince), "a change has waited since "+p.PendingSince.UTC().Format(time.RFC3339)
	}
	if waited <= policySyncLimit {
		return nil
	}
	meanwhile := "new pods start open to traffic their policies deny (standard mode)"
	if p.Mode == "strict" {
		meanwhile = "new pods are refused until it has (strict mode)"
	}
	ev := []string{fmt.Sprintf("agent: NetworkPolicy synced=false for at least %s (%s)", age(f.Now, f.Now.Add(-waited)), since)}
	if k := f.Agent.Status.Kubernetes; k.Enabled && !k.Reachable {
		ev = append(ev, "agent: API server not reachable: "+orDash(k.LastError))
	} else if k.LastError != "" {
		ev = append(ev, "agent's last API error: "+k.LastError)
	}
	return []Finding{{
		ID: "network-policy-not-synced", Severity: Error,
		What:     "NetworkPolicy enforcement is on but the agent's watches have not listed the cluster's policies, namespaces and pods: the node's rules are the last run's, and " + meanwhile,
		Evidence: ev,
		Fix:      "give the agent's ClusterRole list and watch on networkpolicies (networking.k8s.io), namespaces and pods cluster-wide, as deploy/vpcnet.yaml and the chart of this release do (an older ClusterRole lacks them), and check that the agent reaches the API server; its log names the watch that fails",
	}}
}

// agentRunning is a lower bound on how long the agent has run: each
// condition's Since is no earlier than the agent's start, so the oldest
// of them is.
func agentRunning(f Facts) (time.Duration, string) {
	var oldest time.Time
	for _, c := range f.Agent.Status.Conditions {
		if !c.Since.IsZero() && (oldest.IsZero() || c.Since.Before(oldest)) {
			oldest = c.Since
		}
	}
	if oldest.IsZero() {
		return 0, ""
	}
	return f.Now.Sub(oldest), "the agent's oldest condition dates from " + oldest.UTC().Format(time.RFC3339)
}

// behindFindings: the rules do not show what the API server says: a
// change waiting too long, or a write that failed.
func behindFindings(f Facts, p introspect.PolicyStatus) []Finding {
	lagging := p.PendingSince != nil && f.Now.Sub(*p.PendingSince) > policyLagLimit
	if !lagging && p.LastError == "" {
		return nil
	}
	var ev []string
	what := "the agent's last write of this node's NetworkPolicy rules failed: pods, policies or namespaces changed since are not in force here"
	if lagging {
		lag := age(f.Now, *p.PendingSince)
		what = fmt.Sprintf("this node's NetworkPolicy rules lag the API server by %s: changes to policies, namespaces or pods since then are not in force here", lag)
		ev = append(ev, fmt.Sprintf("agent: pendingSince %s (%s ago)", p.PendingSince.UTC().Format(time.RFC3339), lag))
	}
	if !p.Applied.IsZero() {
		ev = append(ev, fmt.Sprintf("agent: rules last applied %s (%s ago)", p.Applied.UTC().Format(time.RFC3339), age(f.Now, p.Applied)))
	}
	sev, fix := Warning, "a burst of changes catches up in seconds; a lag that keeps growing is a stuck agent: read its log and the vpcnet_policy_* metrics (write time, lag), and restart vpcnetd if it does not catch up (it rewrites every rule from what its watches know)"
	if p.LastError != "" {
		ev = append(ev, "agent: lastError "+p.LastError)
		sev, fix = Error, "the agent's log says why the write failed (\"NetworkPolicy rules not written\"); the agent retries every few seconds, and a restart of vpcnetd rewrites every rule"
	}
	return []Finding{{ID: "network-policy-behind", Severity: sev, What: what, Evidence: ev, Fix: fix}}
}
