package doctor

import (
	"fmt"
	"strings"
)

// agentFindings: without the agent nothing on the node gets an address.
func agentFindings(f Facts) []Finding {
	if f.Agent != nil {
		return nil
	}
	// Only an agent doctor asked and got no answer from; one left out
	// with --skip is no finding.
	var ev []string
	for _, s := range f.Sources {
		if s.Name == SourceAgent && !s.OK && !strings.HasPrefix(s.Detail, notRead) {
			ev = append(ev, s.Detail)
		}
	}
	if len(ev) == 0 {
		return nil
	}
	return []Finding{{
		ID: "agent-unreachable", Severity: Error,
		What:     "vpcnetd does not answer on this node: no pod can get an address, and doctor sees only what the node, EC2 and the API show",
		Evidence: ev,
		Fix: "check the agent's pod (kubectl -n kube-system get pods -o wide --field-selector spec.nodeName=NODE, then kubectl logs) or its process; if it runs, pass its introspection address with --agent (INTROSPECTION_BIND_ADDRESS). " +
			"Without the agent doctor read the DaemonSet's paths: if the agent keeps its files elsewhere, name them (--state-dir, --cni-conf-dir, --cni-bin-dir)",
	}}
}

// limitsFindings: story 1. An unknown type is not fatal, but the agent
// then only trusts what it sees attached, so pods beyond that wait.
func limitsFindings(f Facts) []Finding {
	if f.Agent == nil {
		return nil
	}
	st := f.Agent.Status
	if !strings.HasPrefix(st.LimitsSource, "observed") {
		return nil
	}
	return []Finding{{
		ID: "limits-unknown", Severity: Error,
		What: fmt.Sprintf("the agent does not know the ENI limits of instance type %s, so it runs with what is attached now (%d ENIs of %d addresses) and pods beyond that wait",
			st.InstanceType, st.MaxENIs, st.IPv4PerENI),
		Evidence: []string{"limitsSource: " + st.LimitsSource},
		Fix: fmt.Sprintf("allow ec2:DescribeInstanceTypes for the node's role (deploy/iam-policy.json) so the agent reads %s's limits from EC2, or upgrade vpcnet to a release whose limits table lists it; then restart vpcnetd",
			st.InstanceType),
	}}
}

// readinessFindings: story 5. Which condition holds the agent back, and
// what the runtime sees as a result.
func readinessFindings(f Facts) []Finding {
	var out []Finding
	taint := startupTaintOnNode(f)
	if f.Agent != nil && !f.Agent.Status.Ready {
		var ev []string
		for _, c := range f.Agent.Status.Conditions {
			if !c.OK {
				ev = append(ev, fmt.Sprintf("condition %s: %s", c.Name, c.Message))
			}
		}
		if e := f.Agent.Status.LastEC2Error; e != "" {
			ev = append(ev, "agent's last EC2 error: "+e)
		}
		// Doctor's own calls from the same node often show what the
		// agent is stuck on while its conditions say "not checked yet".
		for _, s := range f.Sources {
			if !s.OK && (s.Name == SourceEC2 || s.Name == SourceIMDS) && !strings.HasPrefix(s.Detail, notRead) {
				ev = append(ev, fmt.Sprintf("doctor's own %s call from this node: %s", s.Name, s.Detail))
			}
		}
		if taint != "" {
			ev = append(ev, "startup taint "+taint+" is still on the Node (as it should be until the agent is ready)")
		}
		out = append(out, Finding{
			ID: "agent-not-ready", Severity: Error,
			What:     "vpcnetd is running but not ready, so it has not written the CNI configuration and the node's network stays not ready",
			Evidence: ev,
			Fix:      "fix the failing condition named in the evidence (each says what it waits for); vpcnetd becomes ready by itself once it holds, writes the CNI configuration and removes the startup taint",
		})
	}
	if c := f.CNI; c != nil {
		out = append(out, cniFindings(f, *c)...)
	}
	if taint != "" && f.Agent != nil && f.Agent.Status.Ready {
		out = append(out, Finding{
			ID: "startup-taint-stuck", Severity: Error,
			What:     "the agent is ready but the startup taint is still on the Node, so pods that do not tolerate it are not scheduled here",
			Evidence: []string{"taint " + taint, "agent kubernetes.startupTaintRemoved=false; lastError: " + f.Agent.Status.Kubernetes.LastError},
			Fix:      "let the agent's service account patch its Node (RBAC: nodes patch, see deploy/), or remove it: kubectl taint nodes NODE " + f.StartupTaint + "-",
		})
	}
	return out
}

// startupTaintOnNode is the startup taint as it is on the Node, "" when
// absent or unknown.
func startupTaintOnNode(f Facts) string {
	if f.StartupTaint == "" {
		return ""
	}
	if f.Kube != nil && f.Kube.Node != nil {
		for _, t := range f.Kube.Node.Taints {
			if t == f.StartupTaint || strings.HasPrefix(t, f.StartupTaint+"=") || strings.HasPrefix(t, f.StartupTaint+":") {
				return t
			}
		}
		return ""
	}
	// Without the API, the agent's own account of its taint.
	if f.Agent != nil && f.Agent.Status.Kubernetes.Enabled && f.Agent.Status.Kubernetes.StartupTaint != "" && !f.Agent.Status.Kubernetes.TaintRemoved {
		return f.StartupTaint
	}
	return ""
}

func cniFindings(f Facts, c CNIFacts) []Finding {
	var out []Finding
	ready := f.Agent != nil && f.Agent.Status.Ready
	switch {
	case c.Ours == "":
		why := "the agent writes it only once it is ready"
		if ready {
			why = "yet the agent says it is ready: the directory it writes to (VPCNET_CNI_CONF_DIR) is not the one the runtime reads"
		}
		out = append(out, Finding{
			ID: "cni-config-missing", Severity: Error,
			What:     "no vpcnet CNI configuration in " + c.ConfDir + ", so kubelet reports the network not ready and no pod starts: " + why,
			Evidence: []string{fmt.Sprintf("files in %s: %s", c.ConfDir, listOrNone(c.Files))},
			Fix:      "make vpcnetd ready (see agent-not-ready) and mount the runtime's CNI configuration directory (/etc/cni/net.d) into the agent at VPCNET_CNI_CONF_DIR",
		})
	case len(c.Files) > 0 && c.Files[0] != c.Ours:
		out = append(out, Finding{
			ID: "cni-config-shadowed", Severity: Error,
			What:     fmt.Sprintf("the runtime uses the first configuration in %s, %s, not vpcnet's %s", c.ConfDir, c.Files[0], c.Ours),
			Evidence: []string{"files in order: " + strings.Join(c.Files, ", ")},
			Fix:      "remove " + c.Files[0] + " from " + c.ConfDir + " (an old CNI's file), or rename vpcnet's with VPCNET_CNI_CONF_NAME so it sorts first",
		})
	}
	if len(c.MissingPlugins) > 0 {
		out = append(out, Finding{
			ID: "cni-plugin-missing", Severity: Error,
			What:     "the CNI configuration names plugins that are not installed in " + c.BinDir,
			Evidence: []string{"missing: " + strings.Join(c.MissingPlugins, ", ")},
			Fix:      "the DaemonSet's init container (vpcnet-install) copies them into /opt/cni/bin: check its log, and that the host path is mounted",
		})
	}
	if c.StatusRan && c.StatusErr != "" {
		out = append(out, Finding{
			ID: "cni-status-not-ready", Severity: Error,
			What:     "CNI STATUS of the installed plugin, as the runtime runs it, says the network is not ready",
			Evidence: []string{"STATUS: " + c.StatusErr},
			Fix:      "STATUS asks vpcnetd over its socket: make the agent ready and check that the socket path in the configuration (VPCNET_SOCKET) is mounted on the host",
		})
	}
	return out
}

func listOrNone(ss []string) string {
	if len(ss) == 0 {
		return "none"
	}
	return strings.Join(ss, ", ")
}
