package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/url"
	"strings"
	"time"

	"github.com/vpcnet/vpcnet/introspect"
)

const policyAbout = `The node's NetworkPolicy enforcement: on or off, the mode, whether the
agent's watches have listed, how many policies the cluster has and how many
of this node's pods they isolate, when the rules were last written, how far
they lag the API server, and the last write error.

With NAMESPACE/POD, also that pod's verdicts per direction: open, or the
policies that isolate it and what each of their rules allows (peers and
ports), and the packets dropped to and from it. The pod must run on this
node; elsewhere, ask that node's agent (kubectl vpcnet policy NODE POD).

` + exitCodesHelp

// maxPeersShown bounds the peers printed per rule: a namespaceSelector
// can allow hundreds of pod addresses; -o json lists them all.
const maxPeersShown = 8

func runPolicy(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var af agentFlags
	f := newCmdFlags("policy", "[--agent ADDR] [-o table|json] [NAMESPACE/POD]", policyAbout)
	af.register(f)
	pos, err := f.parse(args, stdout)
	if err != nil {
		return err
	}
	if err := af.check(); err != nil {
		return err
	}
	var pod string
	switch {
	case len(pos) > 1:
		return fmt.Errorf("%w: unexpected %q; want `%s %s`", errUsage, strings.Join(pos[1:], " "), f.Name(), f.synopsis)
	case len(pos) == 1:
		if err := checkPodArg(pos[0]); err != nil {
			return err
		}
		pod = pos[0]
	}
	path := "/v1/policy"
	if pod != "" {
		path += "?pod=" + url.QueryEscape(pod)
	}
	body, err := af.client().Get(ctx, path)
	if err != nil {
		return err
	}
	var st introspect.PolicyStatus
	if err := json.Unmarshal(body, &st); err != nil {
		return fmt.Errorf("decode /v1/policy from %s: %w (is --agent the introspection address, not metrics?)", af.client().URL(), err)
	}
	if af.output == "json" {
		err = writeIndented(stdout, body)
	} else {
		err = writePolicyStatus(stdout, st, time.Now())
	}
	if err != nil || pod == "" {
		return err
	}
	p, err := podVerdicts(st, pod)
	if err != nil || af.output == "json" {
		return err
	}
	fmt.Fprintln(stdout)
	if p == nil {
		_, err = fmt.Fprintf(stdout, "pod %s: open both ways: this node enforces no NetworkPolicy\n", pod)
		return err
	}
	return writePolicyPod(stdout, *p, st.Mode)
}

// checkPodArg refuses a pod not written NAMESPACE/POD.
func checkPodArg(s string) error {
	if ns, name, ok := strings.Cut(s, "/"); !ok || ns == "" || name == "" || strings.Contains(name, "/") {
		return fmt.Errorf("%w: %q: want the pod as NAMESPACE/POD, such as default/web-1", errUsage, s)
	}
	return nil
}

// podVerdicts finds pod's verdicts in st. With enforcement off there are
// none to find and the pod is open (nil, no error); a pod missing
// otherwise is an error that says where to look instead.
func podVerdicts(st introspect.PolicyStatus, pod string) (*introspect.PolicyPod, error) {
	for i := range st.Pods {
		if st.Pods[i].Namespace+"/"+st.Pods[i].Name == pod {
			return &st.Pods[i], nil
		}
	}
	switch {
	case !st.Enabled:
		return nil, nil
	case !st.Synced:
		return nil, fmt.Errorf("pod %s: no verdicts yet: the agent's NetworkPolicy, namespace and pod watches have not listed, so it has written no rules for this node's pods (see `synced` above)", pod)
	}
	ns, name, _ := strings.Cut(pod, "/")
	return nil, fmt.Errorf("pod %s is not on this node (the agent holds no address for it): find its node with `kubectl -n %s get pod %s -o wide` and run `kubectl vpcnet policy NODE %s`", pod, ns, name, pod)
}

// writePolicyStatus prints the node's enforcement: the verdict first,
// then how current the rules are.
func writePolicyStatus(out io.Writer, st introspect.PolicyStatus, now time.Time) error {
	w := newTable(out)
	if !st.Enabled {
		fmt.Fprintf(w, "enforcement:\toff: %s\n", orDash(st.Source))
		if st.Policies > 0 {
			fmt.Fprintf(w, "policies:\t%d in the cluster, none enforced on this node: its pods are open to what they would deny\n", st.Policies)
		} else {
			fmt.Fprintf(w, "policies:\t%d in the cluster\n", st.Policies)
		}
		return w.Flush()
	}
	fmt.Fprintf(w, "enforcement:\ton, %s mode\n", orDash(st.Mode))
	synced := "yes"
	if !st.Synced {
		synced = "no: the NetworkPolicy, namespace and pod watches have not listed yet; the rules are the last run's"
	}
	fmt.Fprintf(w, "synced:\t%s\n", synced)
	fmt.Fprintf(w, "policies:\t%d in the cluster\n", st.Policies)
	fmt.Fprintf(w, "isolated pods:\t%d on this node\n", st.Isolated)
	applied := "never"
	if !st.Applied.IsZero() {
		applied = fmt.Sprintf("%s (%s)", ago(st.Applied, now), st.Applied.UTC().Format(time.RFC3339))
	}
	fmt.Fprintf(w, "rules applied:\t%s\n", applied)
	lag := "none: the rules show every change the agent has heard of"
	if st.PendingSince != nil {
		lag = fmt.Sprintf("%s: changes since %s are not in the rules yet", now.Sub(*st.PendingSince).Round(time.Second), st.PendingSince.UTC().Format(time.RFC3339))
	}
	fmt.Fprintf(w, "lag:\t%s\n", lag)
	if st.LastError != "" {
		fmt.Fprintf(w, "last error:\t%s\n", st.LastError)
	}
	return w.Flush()
}

// writePolicyPod prints one pod's verdicts, a direction at a time.
func writePolicyPod(out io.Writer, p introspect.PolicyPod, mode string) error {
	fmt.Fprintf(out, "pod %s/%s, %s\n", p.Namespace, p.Name, orDash(p.IP))
	if !p.Known {
		until := "standard mode leaves it open until they are"
		if mode == "strict" {
			until = "strict mode isolates it both ways with nothing allowed until they are"
		}
		fmt.Fprintf(out, "  labels not known yet (the API server has not told the agent of this pod): %s\n", until)
	}
	writeDirection(out, "ingress", "from", p.Ingress)
	writeDirection(out, "egress", "to", p.Egress)
	_, err := fmt.Fprintf(out, "  dropped: %d packets to it (ingress), %d from it (egress)\n", p.DroppedIngress, p.DroppedEgress)
	return err
}

func writeDirection(out io.Writer, name, peerWord string, d *introspect.PolicyDirection) {
	switch {
	case d == nil:
		fmt.Fprintf(out, "  %s: open\n", name)
		return
	case len(d.Policies) == 0:
		fmt.Fprintf(out, "  %s: isolated until its labels are known (strict mode)\n", name)
	default:
		fmt.Fprintf(out, "  %s: isolated by %s\n", name, strings.Join(d.Policies, ", "))
	}
	if len(d.Allows) == 0 {
		fmt.Fprintln(out, "    nothing allowed")
	}
	for _, a := range d.Allows {
		fmt.Fprintf(out, "    allow %s: %s %s on %s\n", a.Rule, peerWord, peers(a), ports(a.Ports))
	}
}

func peers(a introspect.PolicyAllow) string {
	switch {
	case a.AnyPeer:
		return "any peer"
	case len(a.Peers) == 0:
		return "no peer (its selectors match no pod yet)"
	case len(a.Peers) > maxPeersShown:
		return fmt.Sprintf("%s and %d more (-o json lists them)", strings.Join(a.Peers[:maxPeersShown], ", "), len(a.Peers)-maxPeersShown)
	}
	return strings.Join(a.Peers, ", ")
}

// ports reads the wire form: "TCP/80", "UDP/5000-5010", or a bare
// protocol for all of its ports; none at all means every port.
func ports(ps []string) string {
	if len(ps) == 0 {
		return "all ports"
	}
	out := make([]string, len(ps))
	for i, p := range ps {
		if !strings.Contains(p, "/") {
			p = "all " + p + " ports"
		}
		out[i] = p
	}
	return strings.Join(out, ", ")
}
