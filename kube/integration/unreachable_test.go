package integration

import (
	"slices"
	"strings"
	"testing"

	"github.com/vpcnet/vpcnet/agent"
)

func TestAnAPIServerThatGoesAwayIsReportedAndWaitedOut(t *testing.T) {
	t.Parallel()
	e := setup(t)
	inst := e.instance()
	me := e.name("ip-10-0-0-5")
	e.node(t, me, providerID(inst), tainted(ourTaint))
	e.pod(t, "web-0", me)
	rc := e.agentConfig(t)
	p := newProxy(t, rc.Host)
	rc.Host = p.url()
	l := startLayer(t, rc, inst, map[string]string{"MY_NODE_NAME": me, "VPCNET_STARTUP_TAINT": startupTaint}, nil)
	st := l.waitFor(t, "found the Node and its pod", func(st agent.KubeState) bool { return st.Node == me && st.Pods == 1 && st.Reachable })
	since := st.Since

	// The API server goes away.
	p.cut()
	// Requests in flight when it went may fail with "unexpected EOF"
	// first; the probes that follow must say the connection is refused.
	st = l.waitFor(t, "reported the API server unreachable, connection refused", func(st agent.KubeState) bool {
		return !st.Reachable && strings.Contains(st.LastError, "connection refused")
	})
	if !st.Since.After(since) {
		t.Errorf("since = %v, not moved on from %v when the API server went away", st.Since, since)
	}
	if st.Node != me || st.Pods != 1 {
		t.Errorf("while the API server is away the layer forgot what it knew: Node %q, %d pods", st.Node, st.Pods)
	}
	// Ready meanwhile: the taint waits, and the status says why.
	l.SetReady(true)
	st = l.waitFor(t, "said the taint waits", func(st agent.KubeState) bool { return strings.Contains(st.StartupTaint, "failed (retrying)") })
	if st.TaintRemoved || !strings.Contains(st.StartupTaint, "connection refused") {
		t.Errorf("taint state %q (removed %v), want it waiting on the unreachable API server", st.StartupTaint, st.TaintRemoved)
	}
	e.pod(t, "web-1", me) // scheduled while the agent cannot see it
	if !l.running() {
		t.Fatal("Run returned while the API server was away")
	}
	since = st.Since

	// It comes back: the layer catches up by itself.
	p.mend(t)
	st = l.waitFor(t, "caught up once the API server was back", func(st agent.KubeState) bool {
		return st.Reachable && st.Pods == 2 && st.TaintRemoved
	})
	if !st.Since.After(since) {
		t.Errorf("since = %v, not moved on from %v when the API server came back", st.Since, since)
	}
	if got := e.taintKeys(t, me); slices.Contains(got, startupTaint+":NoSchedule") {
		t.Errorf("the startup taint is still on the Node: %v", got)
	}
}
