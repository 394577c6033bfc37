package main

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/vpcnet/vpcnet/introspect"
)

// squeeze collapses the runs of spaces tabwriter pads columns with, so a
// test can name a whole line as a person reads it.
func squeeze(s string) string {
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		lines[i] = strings.Join(strings.Fields(l), " ")
	}
	return strings.Join(lines, "\n")
}

func TestPolicyPrintsTheNodesEnforcementAndAPodsVerdicts(t *testing.T) {
	lagging := enforcingPolicy()
	pending := time.Now().Add(-45 * time.Second)
	lagging.PendingSince = &pending
	lagging.LastError = "nft: add rule: no such file or directory"

	off := introspect.PolicyStatus{Enabled: false, Source: "VPCNET_NETWORK_POLICY=off", Mode: "standard", Policies: 3}

	unsynced := enforcingPolicy()
	unsynced.Synced, unsynced.Applied, unsynced.Pods = false, time.Time{}, nil

	strict := enforcingPolicy()
	strict.Mode = "strict"
	strict.Pods = []introspect.PolicyPod{{Namespace: "default", Name: "new-0", IP: "10.0.0.13",
		Ingress: &introspect.PolicyDirection{Allows: []introspect.PolicyAllow{}},
		Egress:  &introspect.PolicyDirection{Allows: []introspect.PolicyAllow{}}}}

	tests := []struct {
		name     string
		pol      introspect.PolicyStatus
		args     []string
		wantCode int
		wantOut  []string // whole lines or parts of them, spaces squeezed
		wantErr  string
	}{
		{"the node's enforcement", enforcingPolicy(), nil, 0, []string{
			"enforcement: on, standard mode",
			"synced: yes",
			"policies: 3 in the cluster",
			"isolated pods: 2 on this node",
			"rules applied: 12s ago (",
			"lag: none: the rules show every change the agent has heard of",
		}, ""},
		{"a pod isolated for ingress", enforcingPolicy(), []string{"default/web-1"}, 0, []string{
			"pod default/web-1, 10.0.0.11",
			"ingress: isolated by default/allow-web, default/deny-all",
			"allow default/allow-web ingress[0]: from 10.0.1.0/24, 10.0.2.7/32 on TCP/80, UDP/5000-5010",
			"allow default/allow-web ingress[1]: from any peer on all ports",
			"allow default/allow-web ingress[2]: from no peer (its selectors match no pod yet) on all SCTP ports",
			"egress: open",
			"dropped: 12 packets to it (ingress), 0 from it (egress)",
		}, ""},
		{"a pod with nothing allowed out and many peers in", enforcingPolicy(), []string{"default/db-0"}, 0, []string{
			"allow default/db ingress[0]: from 10.0.0.1/32, 10.0.0.2/32, 10.0.0.3/32, 10.0.0.4/32, 10.0.0.5/32, 10.0.0.6/32, 10.0.0.7/32, 10.0.0.8/32 and 2 more (-o json lists them) on TCP/5432",
			"egress: isolated by default/deny-all\nnothing allowed",
			"dropped: 0 packets to it (ingress), 3 from it (egress)",
		}, ""},
		{"a pod on another node", enforcingPolicy(), []string{"default/web-9"}, 1, []string{"enforcement: on, standard mode"},
			"pod default/web-9 is not on this node (the agent holds no address for it): find its node with `kubectl -n default get pod web-9 -o wide` and run `kubectl vpcnet policy NODE default/web-9`"},
		{"rules behind the API server", lagging, nil, 0, []string{
			"lag: 45s: changes since " + pending.UTC().Format(time.RFC3339) + " are not in the rules yet",
			"last error: nft: add rule: no such file or directory",
		}, ""},
		{"enforcement off with policies in the cluster", off, nil, 0, []string{
			"enforcement: off: VPCNET_NETWORK_POLICY=off",
			"policies: 3 in the cluster, none enforced on this node: its pods are open to what they would deny",
		}, ""},
		{"a pod with enforcement off", off, []string{"default/web-1"}, 0, []string{
			"pod default/web-1: open both ways: this node enforces no NetworkPolicy",
		}, ""},
		{"watches not listed yet", unsynced, []string{"default/web-1"}, 1, []string{
			"synced: no: the NetworkPolicy, namespace and pod watches have not listed yet; the rules are the last run's",
			"rules applied: never",
		}, "pod default/web-1: no verdicts yet"},
		{"a pod whose labels are unknown, strict", strict, []string{"default/new-0"}, 0, []string{
			"enforcement: on, strict mode",
			"labels not known yet (the API server has not told the agent of this pod): strict mode isolates it both ways with nothing allowed until they are",
			"ingress: isolated until its labels are known (strict mode)\nnothing allowed",
			"egress: isolated until its labels are known (strict mode)\nnothing allowed",
		}, ""},
		{"the pod is NAMESPACE/POD", enforcingPolicy(), []string{"web-1"}, 2, nil, `"web-1": want the pod as NAMESPACE/POD`},
		{"one pod at a time", enforcingPolicy(), []string{"default/web-1", "default/db-0"}, 2, nil, `unexpected "default/db-0"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := fakeAgentWithPolicy(t, readyStatus(), tt.pol)
			var stdout, stderr bytes.Buffer
			args := append([]string{"policy", "--agent", srv.URL}, tt.args...)
			code := run(context.Background(), args, &stdout, &stderr)
			if code != tt.wantCode {
				t.Fatalf("exit %d, want %d\nstdout:\n%s\nstderr:\n%s", code, tt.wantCode, &stdout, &stderr)
			}
			out := squeeze(stdout.String())
			for _, w := range tt.wantOut {
				if !strings.Contains(out, w) {
					t.Errorf("stdout lacks %q:\n%s", w, &stdout)
				}
			}
			if !strings.Contains(stderr.String(), tt.wantErr) {
				t.Errorf("stderr lacks %q:\n%s", tt.wantErr, &stderr)
			}
		})
	}
}

func TestPolicyJSONIsTheAgentsOwnDocument(t *testing.T) {
	srv := fakeAgent(t, readyStatus())
	var stdout, stderr bytes.Buffer
	if code := run(context.Background(), []string{"policy", "-o", "json", "--agent", srv.URL, "default/web-1"}, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, &stderr)
	}
	var got introspect.PolicyStatus
	if err := json.Unmarshal(stdout.Bytes(), &got); err != nil {
		t.Fatalf("stdout is not a /v1/policy document: %v\n%s", err, &stdout)
	}
	if !got.Enabled || len(got.Pods) != 1 || got.Pods[0].Name != "web-1" || got.Pods[0].DroppedIngress != 12 {
		t.Errorf("decoded %+v, want the served status with web-1's verdicts", got)
	}
}

func TestPolicyOfAnUnreachableAgentExitsThree(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if code := run(context.Background(), []string{"policy", "--agent", unreachableAddr(t)}, &stdout, &stderr); code != exitUnreachable {
		t.Fatalf("exit %d, want %d: %s", code, exitUnreachable, &stderr)
	}
	if !strings.Contains(stderr.String(), "vpcnetd not reachable") {
		t.Errorf("stderr lacks the reason: %s", &stderr)
	}
}
