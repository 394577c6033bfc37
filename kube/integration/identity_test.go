package integration

import (
	"strings"
	"testing"

	"github.com/vpcnet/vpcnet/agent"
	"github.com/vpcnet/vpcnet/kube"
)

func TestTheNodeIsFoundByNameOrProviderIDAndNamesThatDisagreeAreReported(t *testing.T) {
	t.Parallel()
	// Nodes are cluster-wide: the names ip-10-0-0-* get each case's own
	// suffix, here and in the wanted messages.
	tests := []struct {
		name string
		// nodeName is MY_NODE_NAME and hostname the host's name ("" for
		// none); mine is the Node with this instance's providerID and
		// other one with another instance's ("" for none).
		nodeName, hostname, mine, other string
		// want: the Node used, how it was found, and words the mismatch
		// must hold (none: the names agree).
		wantNode, wantBy string
		wantMismatch     []string
	}{
		{
			name:     "by MY_NODE_NAME",
			nodeName: "ip-10-0-0-5", hostname: "ip-10-0-0-5", mine: "ip-10-0-0-5", other: "ip-10-0-0-6",
			wantNode: "ip-10-0-0-5", wantBy: kube.ByNodeName,
		},
		{
			name: "by providerID when MY_NODE_NAME is unset",
			mine: "ip-10-0-0-5", other: "ip-10-0-0-6",
			wantNode: "ip-10-0-0-5", wantBy: kube.ByProviderID,
		},
		{
			name:     "by providerID when MY_NODE_NAME names no Node",
			nodeName: "ghost", mine: "ip-10-0-0-5",
			wantNode: "ip-10-0-0-5", wantBy: kube.ByProviderID,
			wantMismatch: []string{"MY_NODE_NAME is ghost", "this instance's Node (by providerID) is ip-10-0-0-5", "downward API"},
		},
		{
			name:     "by providerID when MY_NODE_NAME names another machine's Node",
			nodeName: "ip-10-0-0-6", mine: "ip-10-0-0-5", other: "ip-10-0-0-6",
			wantNode: "ip-10-0-0-5", wantBy: kube.ByProviderID,
			wantMismatch: []string{"MY_NODE_NAME is ip-10-0-0-6", "is ip-10-0-0-5"},
		},
		{
			name:     "registered by its private DNS name on a host named otherwise (story 6)",
			nodeName: "ip-10-0-0-5", hostname: "build-box-7", mine: "ip-10-0-0-5",
			wantNode: "ip-10-0-0-5", wantBy: kube.ByNodeName,
			wantMismatch: []string{"the host name is build-box-7 but the Node is named ip-10-0-0-5"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := setup(t)
			inst := e.instance()
			name := func(s string) string { return suffixed(s, e) }
			if tt.mine != "" {
				e.node(t, name(tt.mine), providerID(inst))
			}
			if tt.other != "" {
				e.node(t, name(tt.other), providerID(e.instance()))
			}
			l := startLayer(t, e.agentConfig(t), inst, map[string]string{"MY_NODE_NAME": name(tt.nodeName)}, func(o *kube.Options) {
				o.Hostname = name(tt.hostname)
			})
			st := l.waitFor(t, "found the Node", nodeFound)
			if st.Node != name(tt.wantNode) || st.NodeFoundBy != tt.wantBy {
				t.Fatalf("Node %q found by %q, want %q by %q", st.Node, st.NodeFoundBy, name(tt.wantNode), tt.wantBy)
			}
			if len(tt.wantMismatch) == 0 && st.Mismatch != "" {
				t.Errorf("names reported as disagreeing: %s", st.Mismatch)
			}
			for _, w := range tt.wantMismatch {
				if !strings.Contains(st.Mismatch, suffixed(w, e)) {
					t.Errorf("mismatch %q does not say %q", st.Mismatch, suffixed(w, e))
				}
			}
		})
	}
}

// suffixed gives the Node names ip-10-0-0-5 and -6 in s the test's suffix.
func suffixed(msg string, e *env) string {
	for _, n := range []string{"ip-10-0-0-5", "ip-10-0-0-6"} {
		msg = strings.ReplaceAll(msg, n, e.name(n))
	}
	return msg
}

func TestANodeRegisteredAfterTheAgentStartsIsFound(t *testing.T) {
	t.Parallel()
	e := setup(t)
	inst := e.instance()
	me := e.name("ip-10-0-0-5")
	l := startLayer(t, e.agentConfig(t), inst, map[string]string{"MY_NODE_NAME": me}, nil)
	st := l.waitFor(t, "reported the Node missing", func(st agent.KubeState) bool { return st.NodeProblem != "" })
	for _, w := range []string{"no Node is named " + me + " (MY_NODE_NAME)", "no Node has providerID " + providerID(inst), "kubelet may not have registered"} {
		if !strings.Contains(st.NodeProblem, w) {
			t.Errorf("problem %q does not say %q", st.NodeProblem, w)
		}
	}
	if st.LastError != "" || !st.Reachable {
		t.Errorf("a Node not registered yet is no API failure: reachable %v, last error %q", st.Reachable, st.LastError)
	}

	// kubelet registers the Node.
	e.node(t, me, providerID(inst))
	st = l.waitFor(t, "found the Node once registered", nodeFound)
	if st.Node != me || st.NodeFoundBy != kube.ByNodeName || st.NodeProblem != "" {
		t.Errorf("Node %q by %q, problem %q; want %s by MY_NODE_NAME and no problem", st.Node, st.NodeFoundBy, st.NodeProblem, me)
	}
}
